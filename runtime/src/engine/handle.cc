// hvd::Handle over engine::OpState.
#include "engine/op_state.h"
#include "hvd/error.hpp"

namespace hvd {
namespace engine {

void OpState::finishMember(std::exception_ptr error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (done_) return;
  if (error && !error_) error_ = error;
  if (--remaining_ > 0) return;
  done_ = true;
  cv_.notify_all();
}

void OpState::fail(std::exception_ptr error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (done_) return;
  if (!error_) error_ = error;
  done_ = true;
  cv_.notify_all();
}

bool OpState::done() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_;
}

void OpState::wait() const {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return done_; });
  if (lease_) lease_->release();
  if (error_) std::rethrow_exception(error_);
}

bool OpState::waitFor(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!cv_.wait_for(lock, timeout, [&] { return done_; })) return false;
  if (lease_) lease_->release();
  if (error_) std::rethrow_exception(error_);
  return true;
}

}  // namespace engine

namespace {
const engine::OpState& stateOf(const std::shared_ptr<engine::OpState>& state) {
  if (!state) throw InvalidArgumentError("hvd::Handle: empty handle (default-constructed)");
  return *state;
}
}  // namespace

const std::string& Handle::name() const { return stateOf(state_).name(); }
bool Handle::poll() const { return stateOf(state_).done(); }
void Handle::wait() const { stateOf(state_).wait(); }
bool Handle::waitFor(std::chrono::milliseconds timeout) const {
  return stateOf(state_).waitFor(timeout);
}
const std::vector<uint8_t>& Handle::output() const { return stateOf(state_).output(); }
const Shape& Handle::outputShape() const { return stateOf(state_).outputShape(); }
const std::vector<int64_t>& Handle::receivedSplits() const { return stateOf(state_).splits(); }

}  // namespace hvd
