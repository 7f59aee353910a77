#include "transport/tcp_link.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/syscall_error.h"

namespace hvd::transport {

void configureDataSocket(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  const int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    throwSyscall("fcntl(O_NONBLOCK) on a data socket");
  }
}

TcpLink::TcpLink(int peer, int fd, std::string peerDescription)
    : peer_(peer),
      fd_(fd),
      description_(std::move(peerDescription)),
      staging_(new uint8_t[kStagingBytes]) {
  configureDataSocket(fd_);
}

TcpLink::~TcpLink() {
  if (fd_ >= 0) ::close(fd_);
}

size_t TcpLink::trySend(const uint8_t* data, size_t bytes) {
  if (closed_ || bytes == 0) return 0;
  while (true) {
    const ssize_t n =
        ::send(fd_, data, std::min(bytes, kMaxWriteBytes), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    if (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN) {
      closed_ = true;
      return 0;
    }
    throwSyscall("send to " + description_);
  }
}

size_t TcpLink::tryRecv(size_t bytes, size_t align, size_t offset, RecvSink& sink) {
  size_t consumed = 0;
  while (consumed < bytes) {
    const size_t staged = stagedEnd_ - stagedBegin_;
    const size_t take = std::min(staged, bytes - consumed) & ~(align - 1);
    if (take > 0) {
      sink.consume(staging_.get() + stagedBegin_, offset + consumed, take);
      stagedBegin_ += take;
      consumed += take;
      continue;
    }
    if (closed_) break;
    if (staged == 0) {
      // A plain copy reads straight into its destination (one copy fewer than staging).
      if (uint8_t* target = sink.directTarget(offset + consumed)) {
        const size_t got = readSome(target, bytes - consumed);
        if (got == 0) break;
        consumed += got;
        continue;
      }
    }
    // Keep the partial element (fewer than `align` bytes) at the front, then read more.
    if (stagedBegin_ > 0) {
      std::memmove(staging_.get(), staging_.get() + stagedBegin_, staged);
      stagedBegin_ = 0;
      stagedEnd_ = staged;
    }
    // Read no further than this operation needs when possible, so the next operation's bytes
    // are not copied through here unnecessarily; but at least one element.
    const size_t want = std::max(align, bytes - consumed);
    const size_t room = std::min(kStagingBytes - stagedEnd_, want - std::min(want, staged));
    if (room == 0) break;
    const size_t got = readSome(staging_.get() + stagedEnd_, room);
    if (got == 0) break;
    stagedEnd_ += got;
  }
  return consumed;
}

size_t TcpLink::readSome(uint8_t* dst, size_t max) {
  while (true) {
    const ssize_t r = ::recv(fd_, dst, max, MSG_DONTWAIT);
    if (r > 0) return static_cast<size_t>(r);
    if (r == 0) {
      closed_ = true;
      return 0;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    if (errno == ECONNRESET || errno == ENOTCONN) {
      closed_ = true;
      return 0;
    }
    throwSyscall("recv from " + description_);
  }
}

short TcpLink::pollEvents(bool wantSend, bool wantRecv) const {
  short events = 0;
  if (wantRecv) events |= POLLIN;
  if (wantSend) events |= POLLOUT;
  return events;
}

void TcpLink::afterSleep(short revents) {
  // An error or hang-up is picked up by the next send/recv, after any data still buffered.
  if ((revents & POLLERR) != 0 && (revents & POLLIN) == 0) closed_ = true;
}

void TcpLink::abort() {
  closed_ = true;
  ::shutdown(fd_, SHUT_RDWR);
}

}  // namespace hvd::transport
