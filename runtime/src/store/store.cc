#include "store/store.h"

#include <algorithm>
#include <charconv>
#include <sstream>

#include "hvd/error.hpp"

namespace hvd::store {
namespace {

// A timeout message is read by a person; past a screenful of key names the list stops helping.
constexpr size_t kMaxListedKeys = 16;

}  // namespace

std::string timeoutMessage(const std::vector<std::string>& keys,
                           const std::vector<std::string>& missing, Timeout timeout) {
  std::ostringstream out;
  const size_t present = keys.size() >= missing.size() ? keys.size() - missing.size() : 0;
  out << "timed out after " << timeout.count() << " ms waiting for keys: " << present << " of "
      << keys.size() << " present; missing: ";
  const size_t listed = std::min(missing.size(), kMaxListedKeys);
  for (size_t i = 0; i < listed; ++i) {
    if (i > 0) out << ", ";
    out << missing[i];
  }
  if (missing.size() > listed) out << ", ... (" << missing.size() - listed << " more)";
  return out.str();
}

std::chrono::steady_clock::time_point deadlineAfter(Timeout timeout) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point now = Clock::now();
  if (timeout <= Timeout::zero()) return now;
  const auto headroom = std::chrono::duration_cast<Timeout>(Clock::time_point::max() - now);
  if (timeout >= headroom) return Clock::time_point::max();
  return now + std::chrono::duration_cast<Clock::duration>(timeout);
}

std::vector<Bytes> Store::getMany(const std::vector<std::string>& keys, Timeout timeout) {
  const auto deadline = deadlineAfter(timeout);
  wait(keys, timeout);
  std::vector<Bytes> values;
  values.reserve(keys.size());
  for (const auto& key : keys) {
    const auto left =
        std::chrono::duration_cast<Timeout>(deadline - std::chrono::steady_clock::now());
    values.push_back(get(key, std::max(left, Timeout(1))));
  }
  return values;
}

int64_t addToCounter(const std::string& key, const Bytes* current, int64_t delta) {
  int64_t value = 0;
  if (current != nullptr) {
    const char* begin = current->data();
    const char* end = begin + current->size();
    auto [ptr, ec] = std::from_chars(begin, end, value);
    if (ec != std::errc() || ptr != end || current->empty()) {
      throw InvalidArgumentError("store key '" + key +
                                 "' does not hold a decimal integer, so add cannot count on it");
    }
  }
  int64_t sum = 0;
  if (__builtin_add_overflow(value, delta, &sum)) {
    throw InvalidArgumentError("add of " + std::to_string(delta) + " to store key '" + key + "' (" +
                               std::to_string(value) + ") overflows a 64-bit counter");
  }
  return sum;
}

}  // namespace hvd::store
