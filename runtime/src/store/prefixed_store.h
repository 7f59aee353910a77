#pragma once

#include <string>
#include <vector>

#include "store/store.h"

namespace hvd::store {

// A view of a store whose keys all carry a prefix: one init cycle's keys live under
// "g<generation>/", the engine's under "engine/" below it, a process set's under "ps<id>/".
class PrefixedStore final : public Store {
 public:
  PrefixedStore(Store& inner, std::string prefix) : inner_(inner), prefix_(std::move(prefix)) {}
  void set(const std::string& key, const Bytes& value) override {
    inner_.set(prefix_ + key, value);
  }
  Bytes get(const std::string& key, Timeout timeout) override {
    return inner_.get(prefix_ + key, timeout);
  }
  int64_t add(const std::string& key, int64_t delta) override {
    return inner_.add(prefix_ + key, delta);
  }
  Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    return inner_.compareSet(prefix_ + key, expected, desired);
  }
  void wait(const std::vector<std::string>& keys, Timeout timeout) override {
    inner_.wait(prefixed(keys), timeout);
  }
  std::vector<Bytes> getMany(const std::vector<std::string>& keys, Timeout timeout) override {
    return inner_.getMany(prefixed(keys), timeout);
  }
  bool check(const std::vector<std::string>& keys) override { return inner_.check(prefixed(keys)); }
  void erase(const std::string& key) override { inner_.erase(prefix_ + key); }

 private:
  std::vector<std::string> prefixed(const std::vector<std::string>& keys) const {
    std::vector<std::string> out;
    out.reserve(keys.size());
    for (const auto& k : keys) out.push_back(prefix_ + k);
    return out;
  }
  Store& inner_;
  std::string prefix_;
};

}  // namespace hvd::store
