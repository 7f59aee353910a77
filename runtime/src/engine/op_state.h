// The shared state behind an hvd::Handle: one submitted op (or one grouped allreduce), its
// completion, error and engine-allocated results. The engine thread fills the results and then
// completes the state under its mutex; waiters read them only after seeing `done`, so the mutex
// orders every access (no data race on the outputs).
//
// The state also holds the names of its ops (in_flight_names.h): they stay taken until a waiter
// has seen the op finish, or until the state is destroyed (every handle dropped, the engine done
// with it).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/in_flight_names.h"
#include "hvd/engine.hpp"

namespace hvd::engine {

class OpState {
 public:
  // `members`: how many named ops must finish before the handle is done (a grouped allreduce
  // has one per member; every other op has one).
  OpState(std::string name, int members) : name_(std::move(name)), remaining_(members) {}

  const std::string& name() const { return name_; }
  // Engine side, at submit: the names this op holds until a waiter sees it finish.
  void holdNames(std::unique_ptr<NameLease> lease) { lease_ = std::move(lease); }

  // Engine side (the engine thread, or a submit call failing at once). One member finished;
  // `error` (may be null) is kept if it is the first. The last member completes the handle.
  void finishMember(std::exception_ptr error);
  // Fails the handle now, whatever members remain (engine failure, shutdown, stall).
  void fail(std::exception_ptr error);

  // Results, written by the engine thread before the last finishMember(); read after wait().
  std::vector<uint8_t>& mutableOutput() { return output_; }
  Shape& mutableOutputShape() { return outputShape_; }
  std::vector<int64_t>& mutableSplits() { return splits_; }
  void setValue(int64_t value) { value_ = value; }  // join(): the last rank to join

  // User side.
  bool done() const;
  // Both give the names back once they have seen the op finish (successfully or not).
  void wait() const;  // rethrows the error
  bool waitFor(std::chrono::milliseconds timeout) const;
  const std::vector<uint8_t>& output() const { return output_; }
  const Shape& outputShape() const { return outputShape_; }
  const std::vector<int64_t>& splits() const { return splits_; }
  int64_t value() const { return value_; }

 private:
  const std::string name_;
  mutable std::mutex mutex_;
  mutable std::condition_variable cv_;
  int remaining_;
  bool done_ = false;
  std::exception_ptr error_;
  std::vector<uint8_t> output_;
  Shape outputShape_;
  std::vector<int64_t> splits_;
  int64_t value_ = -1;
  std::unique_ptr<NameLease> lease_;  // set before the op is queued, never replaced
};

}  // namespace hvd::engine
