// Relay trees whose calls nobody waits for any more: a relaying agent's Stop and Unreserve of its
// branch (it answers its own caller at once), and a finished attempt's hosts at the leader (its
// launch streams already closed, its last Stops and Unreserves still in flight). They are kept
// here until their calls are answered (each ends by its deadline), then destroyed on a thread of
// their own, so a frozen host delays no one: not a relaying agent's handler, not the end of the
// job that the leader reports.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "agent/relay/tree_hosts.h"

namespace hvd::agent::relay {

class DetachedTrees {
 public:
  DetachedTrees() : reaper_([this] { reap(); }) {}
  // Waits for every kept tree's calls.
  ~DetachedTrees() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      closing_ = true;
    }
    changed_.notify_all();
    reaper_.join();
  }
  DetachedTrees(const DetachedTrees&) = delete;
  DetachedTrees& operator=(const DetachedTrees&) = delete;

  void keep(std::unique_ptr<TreeHosts> tree) {
    if (!tree) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      trees_.push_back(std::move(tree));
    }
    changed_.notify_all();
  }

 private:
  void reap() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      changed_.wait(lock, [this] { return closing_ || !trees_.empty(); });
      if (trees_.empty()) return;  // closing, nothing left
      std::unique_ptr<TreeHosts> tree = std::move(trees_.front());
      trees_.pop_front();
      lock.unlock();
      tree.reset();  // waits for its calls in flight
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::unique_ptr<TreeHosts>> trees_;
  bool closing_ = false;
  std::thread reaper_;  // last: starts once the rest exists
};

}  // namespace hvd::agent::relay
