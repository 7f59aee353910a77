// A Link is this rank's end of a reliable, ordered byte stream in each direction with one peer:
// the transport contract every collective is written against (cf. Gloo's Pair).
//
// Contract:
//  * Non-blocking. trySend/tryRecv move what they can now and return the byte count; they never
//    wait. Blocking, deadlines and spinning policy live in one place (progress.h), so a rank
//    that waits on two links at once (ring: previous and next peer) never deadlocks.
//  * trySend copies out of the caller's buffer before returning; the buffer may be reused.
//  * tryRecv hands incoming bytes to `sink` in contiguous pieces whose sizes are multiples of
//    `align` (the element size, a power of two <= 8), so reductions never see half an element.
//  * A peer that closed its end (exit, crash, or an error it could not recover from) turns into
//    hvd::PeerError naming the peer, but only once every byte it sent has been consumed.
//  * Blocking support: before sleeping the progress engine calls prepareSleep(), re-checks for
//    progress, then poll()s waitFd() for pollEvents(); afterSleep() consumes the wake-up.
#pragma once

#include <poll.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace hvd::transport {

// Receives a contiguous piece of the stream: `offset` is the position of `data` within the
// current receive operation.
class RecvSink {
 public:
  virtual void consume(const uint8_t* data, size_t offset, size_t bytes) = 0;
  // Where bytes at `offset` may be written directly when this sink is a plain copy, so a
  // transport that reads into memory (TCP) can skip its staging buffer; null otherwise.
  virtual uint8_t* directTarget(size_t offset) { return nullptr; }

 protected:
  ~RecvSink() = default;
};

class Link {
 public:
  virtual ~Link() = default;

  virtual int peer() const = 0;
  // "rank 2 on host-b (shm)" -- used in every error message about this link.
  virtual std::string describe() const = 0;
  virtual const char* kind() const = 0;

  virtual size_t trySend(const uint8_t* data, size_t bytes) = 0;
  // Consumes up to `bytes` (a multiple of align) starting at stream position `offset` of the
  // receive operation (only passed through to the sink).
  virtual size_t tryRecv(size_t bytes, size_t align, size_t offset, RecvSink& sink) = 0;
  // The next `bytes` bytes of the incoming stream, contiguous and without consuming them, or
  // null when they have not all arrived (or are not contiguous, or the transport cannot peek).
  // Lets the progress engine read a framed message's length and then take the whole message
  // in place (commitRecv) or in one tryRecv.
  virtual const uint8_t* peekRecv(size_t bytes) { return nullptr; }
  // Consumes the first `bytes` of what the last peekRecv returned (at most that many), after
  // the caller read them in place: a peeked message is taken without a sink's virtual call.
  virtual void commitRecv(size_t bytes) {}

  // Zero-copy sending, for transports whose outgoing stream lives in memory (shared-memory
  // rings): reserveSend returns a contiguous, writable region at the tail of the stream of up to
  // `bytes` bytes (its size in *granted, 0 when there is no room or no support); the caller
  // fills a prefix of it and publishes that prefix with commitSend. Lets a ring rank reduce a
  // received piece straight into the next rank's ring instead of into memory it reads back.
  virtual uint8_t* reserveSend(size_t bytes, size_t* granted) {
    *granted = 0;
    return nullptr;
  }
  virtual void commitSend(size_t bytes) {}

  virtual int waitFd() const = 0;
  virtual short pollEvents(bool wantSend, bool wantRecv) const = 0;
  virtual void prepareSleep() = 0;
  // Handles poll's revents for waitFd(); records a closed peer (reported by the next try call
  // that cannot make progress).
  virtual void afterSleep(short revents) = 0;
  // True once the peer's end is known to be closed.
  virtual bool peerClosed() const = 0;

  // Tears the link down so the peer's pending operations fail promptly (used when this rank
  // abandons a collective after an error: errors propagate around the ring instead of leaving
  // other ranks to time out).
  virtual void abort() = 0;
};

}  // namespace hvd::transport
