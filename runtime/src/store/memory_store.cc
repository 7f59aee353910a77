#include "store/memory_store.h"

#include "hvd/error.hpp"

namespace hvd::store {

void MemoryStore::set(const std::string& key, const Bytes& value) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    data_[key] = value;
  }
  changed_.notify_all();
}

Bytes MemoryStore::get(const std::string& key, Timeout timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  waitLocked(lock, {key}, timeout);
  return data_.at(key);
}

int64_t MemoryStore::add(const std::string& key, int64_t delta) {
  int64_t result = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = data_.find(key);
    result = addToCounter(key, it == data_.end() ? nullptr : &it->second, delta);
    data_[key] = std::to_string(result);
  }
  changed_.notify_all();
  return result;
}

Bytes MemoryStore::compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) {
  Bytes result;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = data_.find(key);
    if (it == data_.end()) {
      if (!expected.empty()) return Bytes();
      data_.emplace(key, desired);
      result = desired;
    } else if (it->second == expected) {
      it->second = desired;
      result = desired;
    } else {
      return it->second;
    }
  }
  changed_.notify_all();
  return result;
}

void MemoryStore::wait(const std::vector<std::string>& keys, Timeout timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  waitLocked(lock, keys, timeout);
}

bool MemoryStore::check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mutex_);
  return missingLocked(keys).empty();
}

void MemoryStore::erase(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  data_.erase(key);
}

std::vector<std::string> MemoryStore::missingLocked(const std::vector<std::string>& keys) const {
  std::vector<std::string> missing;
  for (const auto& key : keys) {
    if (data_.count(key) == 0) missing.push_back(key);
  }
  return missing;
}

void MemoryStore::waitLocked(std::unique_lock<std::mutex>& lock,
                             const std::vector<std::string>& keys, Timeout timeout) {
  const auto deadline = deadlineAfter(timeout);
  while (true) {
    std::vector<std::string> missing = missingLocked(keys);
    if (missing.empty()) return;
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout) {
      missing = missingLocked(keys);
      if (missing.empty()) return;
      throw TimeoutError(timeoutMessage(keys, missing, timeout));
    }
  }
}

}  // namespace hvd::store
