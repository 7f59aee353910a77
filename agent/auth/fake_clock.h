// A Clock that moves only when a test says so.
#pragma once

#include <chrono>
#include <mutex>

#include "agent/auth/request_signer.h"

namespace hvd::agent::auth {

class FakeClock : public Clock {
 public:
  explicit FakeClock(std::chrono::system_clock::time_point start) : now_(start) {}

  std::chrono::system_clock::time_point now() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return now_;
  }
  void set(std::chrono::system_clock::time_point t) {
    std::lock_guard<std::mutex> lock(mutex_);
    now_ = t;
  }
  void advance(std::chrono::milliseconds d) {
    std::lock_guard<std::mutex> lock(mutex_);
    now_ += d;
  }

 private:
  std::mutex mutex_;  // verifiers may read the clock from several threads
  std::chrono::system_clock::time_point now_;
};

}  // namespace hvd::agent::auth
