#include "transport/shm_link.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

#include "common/syscall_error.h"

namespace hvd::transport {
namespace {

class HeapRing final : public RingMemory {
 public:
  explicit HeapRing(size_t capacity) : bytes_(shmRegionBytes(capacity)) {
    base_ = std::aligned_alloc(4096, bytes_);
    if (base_ == nullptr) throw std::bad_alloc();
    std::memset(base_, 0, bytes_);
    initShmPair(base_, capacity);
  }
  ~HeapRing() override { std::free(base_); }
  void* base() const override { return base_; }
  size_t bytes() const override { return bytes_; }

 private:
  size_t bytes_;
  void* base_;
};

}  // namespace

void initShmPair(void* region, size_t capacity) {
  auto* header = new (region) ShmPairHeader();
  header->capacity = capacity;
  header->magic = ShmPairHeader::kMagic;
}

std::shared_ptr<RingMemory> allocateHeapRing(size_t capacity) {
  return std::make_shared<HeapRing>(capacity);
}

ShmLink::ShmLink(int peer, int side, std::shared_ptr<RingMemory> memory, int wakeFd,
                 std::string peerDescription)
    : peer_(peer),
      side_(side),
      memory_(std::move(memory)),
      header_(static_cast<ShmPairHeader*>(memory_->base())),
      wakeFd_(wakeFd),
      description_(std::move(peerDescription)) {
  if (header_->magic != ShmPairHeader::kMagic) {
    throw InternalError("shared-memory ring with " + description_ + " is not initialised");
  }
  capacity_ = header_->capacity;
  if (capacity_ == 0 || (capacity_ & (capacity_ - 1)) != 0 ||
      shmRegionBytes(capacity_) > memory_->bytes()) {
    throw InternalError("shared-memory ring with " + description_ + " has a bad capacity");
  }
  mask_ = capacity_ - 1;
  auto* base = static_cast<uint8_t*>(memory_->base()) + kShmDataOffset;
  tx_ = base + static_cast<size_t>(side_) * capacity_;
  rx_ = base + static_cast<size_t>(1 - side_) * capacity_;
  txTail_ = header_->tail[side_].value.load(std::memory_order_relaxed);
  txHeadSeen_ = header_->head[side_].value.load(std::memory_order_acquire);
  rxHead_ = header_->head[1 - side_].value.load(std::memory_order_relaxed);
  rxTailSeen_ = header_->tail[1 - side_].value.load(std::memory_order_acquire);
}

ShmLink::~ShmLink() {
  if (wakeFd_ >= 0) ::close(wakeFd_);
}

size_t ShmLink::trySend(const uint8_t* data, size_t bytes) {
  if (closed_ || bytes == 0) return 0;
  if (capacity_ - (txTail_ - txHeadSeen_) < bytes) {
    txHeadSeen_ = header_->head[side_].value.load(std::memory_order_acquire);
  }
  const size_t n = std::min<uint64_t>(bytes, capacity_ - (txTail_ - txHeadSeen_));
  if (n == 0) return 0;
  const size_t pos = txTail_ & mask_;
  const size_t first = std::min<size_t>(n, capacity_ - pos);
  std::memcpy(tx_ + pos, data, first);
  if (n > first) std::memcpy(tx_, data + first, n - first);
  txTail_ += n;
  header_->tail[side_].value.store(txTail_, std::memory_order_release);
  wakePeer();
  return n;
}

uint8_t* ShmLink::reserveSend(size_t bytes, size_t* granted) {
  *granted = 0;
  if (closed_ || bytes == 0) return nullptr;
  if (capacity_ - (txTail_ - txHeadSeen_) < bytes) {
    txHeadSeen_ = header_->head[side_].value.load(std::memory_order_acquire);
  }
  const size_t pos = txTail_ & mask_;
  const uint64_t space = capacity_ - (txTail_ - txHeadSeen_);
  *granted = std::min<uint64_t>({bytes, space, capacity_ - pos});
  return tx_ + pos;
}

void ShmLink::commitSend(size_t bytes) {
  if (bytes == 0) return;
  txTail_ += bytes;
  header_->tail[side_].value.store(txTail_, std::memory_order_release);
  wakePeer();
}

size_t ShmLink::tryRecv(size_t bytes, size_t align, size_t offset, RecvSink& sink) {
  if (bytes == 0) return 0;
  if (rxTailSeen_ - rxHead_ < bytes) {
    rxTailSeen_ = header_->tail[1 - side_].value.load(std::memory_order_acquire);
  }
  size_t n = std::min<uint64_t>(bytes, rxTailSeen_ - rxHead_);
  n &= ~(align - 1);
  if (n == 0) return 0;
  const size_t pos = rxHead_ & mask_;
  const size_t first = std::min<size_t>(n, capacity_ - pos);
  if (first == n) {
    sink.consume(rx_ + pos, offset, n);
  } else {
    // The data wraps around the end of the ring. An element split by the wrap (possible when
    // earlier traffic left the tail at an odd offset) is reassembled in a small bounce buffer.
    const size_t whole = first & ~(align - 1);
    if (whole > 0) sink.consume(rx_ + pos, offset, whole);
    size_t done = whole;
    const size_t split = first - whole;
    if (split > 0) {
      uint8_t element[8];
      std::memcpy(element, rx_ + pos + whole, split);
      std::memcpy(element + split, rx_, align - split);
      sink.consume(element, offset + done, align);
      done += align;
    }
    if (n > done) sink.consume(rx_ + (done - first), offset + done, n - done);
  }
  rxHead_ += n;
  header_->head[1 - side_].value.store(rxHead_, std::memory_order_release);
  wakePeer();
  return n;
}

const uint8_t* ShmLink::peekRecv(size_t bytes) {
  if (rxTailSeen_ - rxHead_ < bytes) {
    rxTailSeen_ = header_->tail[1 - side_].value.load(std::memory_order_acquire);
    if (rxTailSeen_ - rxHead_ < bytes) return nullptr;
  }
  const size_t pos = rxHead_ & mask_;
  return capacity_ - pos >= bytes ? rx_ + pos : nullptr;
}

void ShmLink::commitRecv(size_t bytes) {
  rxHead_ += bytes;
  header_->head[1 - side_].value.store(rxHead_, std::memory_order_release);
  wakePeer();
}

void ShmLink::wakePeer() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  auto& flag = header_->sleeping[1 - side_].value;
  if (flag.load(std::memory_order_relaxed) != 0 && flag.exchange(0) != 0) {
    const char byte = 'w';
    // A full socket buffer already holds a pending wake-up; a closed one is seen by poll.
    (void)!::send(wakeFd_, &byte, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
  }
}

void ShmLink::prepareSleep() {
  header_->sleeping[side_].value.store(1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

void ShmLink::afterSleep(short revents) {
  header_->sleeping[side_].value.store(0, std::memory_order_relaxed);
  if ((revents & (POLLIN | POLLHUP | POLLERR)) == 0) return;
  char buf[256];
  while (true) {
    const ssize_t r = ::recv(wakeFd_, buf, sizeof(buf), MSG_DONTWAIT);
    if (r > 0) continue;
    if (r == 0) {
      closed_ = true;
    } else if (errno == EINTR) {
      continue;
    } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
      closed_ = true;  // ECONNRESET and friends: the peer is gone
    }
    return;
  }
}

void ShmLink::abort() {
  closed_ = true;
  ::shutdown(wakeFd_, SHUT_RDWR);
}

}  // namespace hvd::transport
