// Same-host link: two byte rings in memory both processes map (shm_ring.h), plus a stream
// socket to the peer that carries only wake-up bytes and, by closing, tells that the peer is
// gone. The same class serves ranks as threads (heap memory + socketpair), so unit tests run the
// production code path.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "transport/link.h"
#include "transport/shm_ring.h"

namespace hvd::transport {

// Keeps the ring memory alive (an mmap of a shared-memory object, or a heap block shared by
// threads) for as long as a link uses it.
class RingMemory {
 public:
  virtual ~RingMemory() = default;
  virtual void* base() const = 0;
  virtual size_t bytes() const = 0;
};

std::shared_ptr<RingMemory> allocateHeapRing(size_t capacity);

class ShmLink final : public Link {
 public:
  // `side` is 0 for the lower rank of the pair, 1 for the higher. Takes ownership of wakeFd.
  ShmLink(int peer, int side, std::shared_ptr<RingMemory> memory, int wakeFd,
          std::string peerDescription);
  ~ShmLink() override;

  int peer() const override { return peer_; }
  std::string describe() const override { return description_; }
  const char* kind() const override { return "shm"; }
  size_t capacity() const { return capacity_; }  // bytes per direction

  size_t trySend(const uint8_t* data, size_t bytes) override;
  size_t tryRecv(size_t bytes, size_t align, size_t offset, RecvSink& sink) override;
  const uint8_t* peekRecv(size_t bytes) override;
  void commitRecv(size_t bytes) override;
  uint8_t* reserveSend(size_t bytes, size_t* granted) override;
  void commitSend(size_t bytes) override;

  int waitFd() const override { return wakeFd_; }
  short pollEvents(bool, bool) const override { return POLLIN; }
  void prepareSleep() override;
  void afterSleep(short revents) override;
  bool peerClosed() const override { return closed_; }
  void abort() override;

 private:
  void wakePeer();

  int peer_;
  int side_;
  std::shared_ptr<RingMemory> memory_;
  ShmPairHeader* header_;
  uint8_t* tx_;
  const uint8_t* rx_;
  uint64_t capacity_;
  uint64_t mask_;
  int wakeFd_;
  std::string description_;
  bool closed_ = false;
  // Local copies: our own counters and the last seen value of the peer's, so the common case
  // touches no cache line the peer writes.
  uint64_t txTail_ = 0;
  uint64_t txHeadSeen_ = 0;
  uint64_t rxHead_ = 0;
  uint64_t rxTailSeen_ = 0;
};

}  // namespace hvd::transport
