// An in-process Store: a map behind one mutex, with a condition variable that wakes waiters on
// every change. Used by unit tests and by ranks-as-threads setups that share one process.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "store/store.h"

namespace hvd::store {

class MemoryStore : public Store {
 public:
  MemoryStore() = default;
  MemoryStore(const MemoryStore&) = delete;
  MemoryStore& operator=(const MemoryStore&) = delete;

  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, Timeout timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  void wait(const std::vector<std::string>& keys, Timeout timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  void erase(const std::string& key) override;

 private:
  // Keys of `keys` not in data_; requires mutex_.
  std::vector<std::string> missingLocked(const std::vector<std::string>& keys) const;
  // Blocks until every key exists; throws TimeoutError naming the missing ones.
  void waitLocked(std::unique_lock<std::mutex>& lock, const std::vector<std::string>& keys,
                  Timeout timeout);

  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, Bytes> data_;
};

}  // namespace hvd::store
