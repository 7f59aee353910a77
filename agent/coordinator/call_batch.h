// Rounds of calls to many hosts (describe every host, launch every host, stop every host) that
// an implementation may carry in fewer messages: the hosts reached through a tree of agents
// (agent/relay/tree_hosts.h) send one message per child of the leader for a whole round
// instead of one per host.
//
// Contract: between hold() and flush() the NodeAgent calls of the batch's hosts may be queued
// rather than sent; flush() sends everything queued (by any thread) and returns without waiting
// for answers. A caller flushes before it waits for any answer of the round, or it would wait on
// a request that was never sent. hold() nests: calls go out at the outermost flush() at the
// latest, and a call made while nothing is held is sent at once.
#pragma once

namespace hvd::agent::coordinator {

class CallBatch {
 public:
  virtual ~CallBatch() = default;
  virtual void hold() = 0;
  virtual void flush() = 0;
};

// hold() for a scope; flush() at its end unless flushed earlier.
class HeldRound {
 public:
  explicit HeldRound(CallBatch* batch) : batch_(batch) {
    if (batch_) batch_->hold();
  }
  ~HeldRound() { flush(); }
  HeldRound(const HeldRound&) = delete;
  HeldRound& operator=(const HeldRound&) = delete;

  void flush() {
    if (batch_) batch_->flush();
    batch_ = nullptr;
  }

 private:
  CallBatch* batch_;
};

}  // namespace hvd::agent::coordinator
