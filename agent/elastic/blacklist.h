// Hosts an elastic job holds back after a failure there (Horovod's HostState blacklist).
//
// Without --blacklist-cooldown-range a failed host never returns, as in Horovod. With it, the
// host returns after a cooldown that doubles with each of its failures, so a host that keeps
// failing costs fewer and fewer rounds, and random jitter keeps hosts that failed together from
// returning (and failing again) together. Horovod's rule, kept exactly: on the n-th cooldown of
// a host (n = 1, 2, ...)
//
//     seconds = clamp(min * 2^n + uniform(0, 1) * min, min, max)
//
// A failure reported while the host is still cooling down changes nothing: the several workers
// of one host that fail together count as one failure. The count is never reset, so a host that
// returned and fails again waits longer than the first time.
//
// Pure logic over an injected clock and random source. Not thread-safe: one owner (the leader's
// elastic driver) calls it.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hvd::agent::elastic {

class Blacklist {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  using Clock = std::function<TimePoint()>;
  // Returns a number drawn uniformly from [0, 1).
  using Uniform = std::function<double()>;

  // Horovod's bounds for the range (DEFAULT_COOLDOWN_LOWER/UPPER_LIMIT_SECONDS).
  static constexpr int kMinCooldownSeconds = 1;
  static constexpr int kMaxCooldownSeconds = 3600;

  // `cooldownSeconds`: ElasticSpec::cooldownSeconds ({min, max}); nullopt: never return.
  // `now`/`uniform` empty: the steady clock and a randomly seeded generator. Throws
  // hvd::InvalidArgumentError (checkCooldownRange) for a bad range.
  explicit Blacklist(std::optional<std::pair<int, int>> cooldownSeconds, Clock now = {},
                     Uniform uniform = {});

  // A worker on `host` failed: the host is blocked from now on, for a cooldown or for good.
  void failed(const std::string& host);
  bool blocked(const std::string& host) const;

  struct Entry {
    std::string host;  // as first reported
    int failures = 0;  // failures that started a cooldown (Horovod's blacklist count)
    std::optional<TimePoint> returnsAt;  // nullopt: never
  };
  // The hosts blocked now, by host name, for logs and status.
  std::vector<Entry> blockedHosts() const;
  // When the next blocked host returns (the driver polls discovery again then); nullopt if none
  // will.
  std::optional<TimePoint> nextReturn() const;

 private:
  struct State {
    std::string host;
    int failures = 0;
    bool forever = false;
    TimePoint returnsAt{};
  };
  bool blockedNow(const State& state, TimePoint now) const;

  std::optional<std::pair<int, int>> range_;
  Clock now_;
  Uniform uniform_;
  std::map<std::string, State> hosts_;  // by hostKey
};

// Throws hvd::InvalidArgumentError naming --blacklist-cooldown-range unless
// kMinCooldownSeconds <= min <= max <= kMaxCooldownSeconds.
void checkCooldownRange(const std::pair<int, int>& seconds);

}  // namespace hvd::agent::elastic
