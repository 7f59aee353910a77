// Link over a connected TCP socket (between hosts, or everywhere with HVD_TRANSPORT=tcp).
// The socket is non-blocking; writes go straight from the caller's buffer (at most
// kMaxWriteBytes per call: 1 MiB writes carry about twice the bandwidth of 128 KiB ones on
// loopback), reads land in a staging buffer so the sink only ever sees whole elements.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "transport/link.h"

namespace hvd::transport {

class TcpLink final : public Link {
 public:
  static constexpr size_t kMaxWriteBytes = 1 << 20;
  static constexpr size_t kStagingBytes = 1 << 20;

  // Takes ownership of a connected socket.
  TcpLink(int peer, int fd, std::string peerDescription);
  ~TcpLink() override;

  int peer() const override { return peer_; }
  std::string describe() const override { return description_; }
  const char* kind() const override { return "tcp"; }

  size_t trySend(const uint8_t* data, size_t bytes) override;
  size_t tryRecv(size_t bytes, size_t align, size_t offset, RecvSink& sink) override;

  int waitFd() const override { return fd_; }
  short pollEvents(bool wantSend, bool wantRecv) const override;
  void prepareSleep() override {}
  void afterSleep(short revents) override;
  bool peerClosed() const override { return closed_; }
  void abort() override;

 private:
  // Reads up to `max` bytes without blocking. Returns 0 when nothing is there now or the peer
  // has closed its end (then closed_ is set).
  size_t readSome(uint8_t* dst, size_t max);

  int peer_;
  int fd_;
  std::string description_;
  bool closed_ = false;
  std::unique_ptr<uint8_t[]> staging_;
  size_t stagedBegin_ = 0;
  size_t stagedEnd_ = 0;
};

// Socket options every data-plane socket gets (non-blocking, TCP_NODELAY, large buffers).
void configureDataSocket(int fd);

}  // namespace hvd::transport
