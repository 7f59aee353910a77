// A queue between the threads that produce a job's events (process supervisors, remote agents'
// stream readers, the coordinator) and the one gRPC handler thread that writes them to the
// caller's stream. Producers never block on the network: a slow caller holds up only its own
// handler, never a rank's output pipe or another job.
//
// Output is bounded: a caller that reads more slowly than its ranks print would otherwise grow
// the agent's memory without limit. OutputBudget admits a line only while the queue holds less
// than kMaxQueuedOutputBytes of output, counts the lines it refuses per rank, and when room
// returns the producer first emits one notice saying how many lines were dropped — output is
// lost only visibly, never silently. Exits and the job's end are never dropped.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace hvd::agent::jobs {

inline constexpr size_t kMaxQueuedOutputBytes = size_t{64} << 20;

template <typename T>
class EventQueue {
 public:
  // `bytes`: what the event counts against the output budget (0 for exits and ends).
  void push(T event, size_t bytes = 0) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      events_.emplace_back(std::move(event), bytes);
      queuedBytes_ += bytes;
    }
    cv_.notify_one();
  }

  // Everything queued, waiting up to `timeout` for the first event; empty on timeout.
  std::vector<T> popAll(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait_for(lock, timeout, [this] { return !events_.empty(); });
    std::vector<T> out;
    out.reserve(events_.size());
    for (auto& [event, bytes] : events_) out.push_back(std::move(event));
    events_.clear();
    queuedBytes_ = 0;
    return out;
  }

  size_t queuedBytes() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return queuedBytes_;
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::pair<T, size_t>> events_;
  size_t queuedBytes_ = 0;
};

// Per-rank accounting of output lines that did not fit (see the file comment). Used from the
// producers' threads; thread-safe.
class OutputBudget {
 public:
  explicit OutputBudget(size_t maxBytes = kMaxQueuedOutputBytes) : maxBytes_(maxBytes) {}

  // Whether a line of `bytes` may be queued behind `queuedBytes`. When it may, `*droppedBefore`
  // receives how many of this rank's lines were dropped since the last admitted one (the
  // producer then queues a notice first); when not, the line is counted as dropped.
  bool admit(int rank, size_t bytes, size_t queuedBytes, size_t* droppedBefore) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (queuedBytes + bytes > maxBytes_) {
      ++dropped_[rank];
      return false;
    }
    *droppedBefore = take(rank);
    return true;
  }

  // Lines of `rank` dropped and not yet reported; resets the count (called at the rank's exit).
  size_t takeDropped(int rank) {
    std::lock_guard<std::mutex> lock(mutex_);
    return take(rank);
  }

  // The notice queued in place of dropped lines.
  static std::string notice(size_t lines) {
    return "[hvd] " + std::to_string(lines) +
           " line(s) of this rank's output were dropped: the client read them too slowly";
  }

 private:
  size_t take(int rank) {
    auto it = dropped_.find(rank);
    if (it == dropped_.end()) return 0;
    const size_t n = it->second;
    dropped_.erase(it);
    return n;
  }

  const size_t maxBytes_;
  std::mutex mutex_;
  std::map<int, size_t> dropped_;
};

}  // namespace hvd::agent::jobs
