#include "agent/elastic/blacklist.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>

#include "agent/elastic/discovery.h"
#include "hvd/error.hpp"

namespace hvd::agent::elastic {
namespace {

Blacklist::Uniform seededUniform() {
  auto engine = std::make_shared<std::mt19937_64>(std::random_device{}());
  return [engine] { return std::uniform_real_distribution<double>(0.0, 1.0)(*engine); };
}

}  // namespace

void checkCooldownRange(const std::pair<int, int>& seconds) {
  const auto [min, max] = seconds;
  const std::string given =
      "--blacklist-cooldown-range " + std::to_string(min) + " " + std::to_string(max);
  if (min < Blacklist::kMinCooldownSeconds || max > Blacklist::kMaxCooldownSeconds) {
    throw InvalidArgumentError(given + ": expected MIN and MAX seconds within " +
                               std::to_string(Blacklist::kMinCooldownSeconds) + ".." +
                               std::to_string(Blacklist::kMaxCooldownSeconds));
  }
  if (min > max) throw InvalidArgumentError(given + ": expected MIN <= MAX");
}

Blacklist::Blacklist(std::optional<std::pair<int, int>> cooldownSeconds, Clock now, Uniform uniform)
    : range_(cooldownSeconds),
      now_(now ? std::move(now) : Clock([] { return std::chrono::steady_clock::now(); })),
      uniform_(uniform ? std::move(uniform) : seededUniform()) {
  if (range_) checkCooldownRange(*range_);
}

bool Blacklist::blockedNow(const State& state, TimePoint now) const {
  return state.forever || now < state.returnsAt;
}

void Blacklist::failed(const std::string& host) {
  const TimePoint now = now_();
  State& state = hosts_[hostKey(host)];
  if (state.host.empty()) state.host = host;
  if (state.failures > 0 && blockedNow(state, now)) return;  // the same failure, seen again
  ++state.failures;
  if (!range_) {
    state.forever = true;
    return;
  }
  const double min = range_->first;
  const double max = range_->second;
  // ldexp(min, n) = min * 2^n; past n of about 12 the clamp to max (<= 3600 s) decides anyway,
  // and capping n keeps the double finite however often a host fails.
  const double delay = std::ldexp(min, std::min(state.failures, 62)) + uniform_() * min;
  const double seconds = std::max(min, std::min(max, delay));
  state.returnsAt = now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                              std::chrono::duration<double>(seconds));
}

bool Blacklist::blocked(const std::string& host) const {
  const auto it = hosts_.find(hostKey(host));
  return it != hosts_.end() && blockedNow(it->second, now_());
}

std::vector<Blacklist::Entry> Blacklist::blockedHosts() const {
  const TimePoint now = now_();
  std::vector<Entry> out;
  for (const auto& [key, state] : hosts_) {
    if (!blockedNow(state, now)) continue;
    Entry entry{state.host, state.failures, std::nullopt};
    if (!state.forever) entry.returnsAt = state.returnsAt;
    out.push_back(std::move(entry));
  }
  return out;
}

std::optional<Blacklist::TimePoint> Blacklist::nextReturn() const {
  std::optional<TimePoint> next;
  for (const Entry& entry : blockedHosts()) {
    if (entry.returnsAt && (!next || *entry.returnsAt < *next)) next = entry.returnsAt;
  }
  return next;
}

}  // namespace hvd::agent::elastic
