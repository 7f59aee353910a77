// A queue between the threads that produce a job's events (process supervisors, remote agents'
// stream readers, the coordinator) and the one gRPC handler thread that writes them to the
// caller's stream. Producers never block on the network: a slow caller holds up only its own
// handler, never a rank's output pipe or another job.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <vector>

namespace hvd::agent::service {

template <typename T>
class EventQueue {
 public:
  void push(T event) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      events_.push_back(std::move(event));
    }
    cv_.notify_one();
  }

  // Everything queued, waiting up to `timeout` for the first event; empty on timeout.
  std::vector<T> popAll(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait_for(lock, timeout, [this] { return !events_.empty(); });
    std::vector<T> out(std::make_move_iterator(events_.begin()),
                       std::make_move_iterator(events_.end()));
    events_.clear();
    return out;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<T> events_;
};

}  // namespace hvd::agent::service
