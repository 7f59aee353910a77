#include "agent/rpc/denial_log.h"

#include <spdlog/spdlog.h>

#include "hvd_support/logging.h"

namespace hvd::agent::rpc {
namespace {

// The caller's address without its port ("ipv4:10.0.0.1:4242" -> "ipv4:10.0.0.1",
// "ipv6:[::1]:4242" -> "ipv6:[::1]"): a client reconnects from a new port for every retry, and
// is still one caller.
std::string peerHost(const std::string& peer) {
  const size_t colon = peer.rfind(':');
  const size_t scheme = peer.find(':');
  if (colon == std::string::npos || colon == scheme) return peer;
  return peer.substr(0, colon);
}

std::string secondsText(std::chrono::milliseconds d) {
  const long long ms = d.count();
  return ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms";
}

}  // namespace

DenialLog::DenialLog(auth::Clock* clock, std::chrono::milliseconds interval)
    : clock_(clock), interval_(interval) {}

DenialLog::~DenialLog() {
  std::optional<std::string> summary;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    summary = takeSummaryLocked();
  }
  if (summary) hvd::logging::program("auth")->warn("{}", *summary);
}

void DenialLog::record(std::string_view method, const std::string& peer,
                       const std::string& reason) {
  const std::chrono::system_clock::time_point now = clock_->now();
  std::optional<std::string> summary;
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++total_;
    // A clock set back starts a new interval too: better a line too many than none for long.
    if (!open_ || now >= open_->start + interval_ || now < open_->start) {
      summary = takeSummaryLocked();
      open_.emplace();
      open_->start = now;
      open_->reasonsLogged.insert(reason);
      first = true;
      ++logged_;
    } else if (open_->reasonsLogged.insert(reason).second) {
      first = true;  // a reason new in this interval is worth its own line
      ++logged_;
    } else {
      ++open_->count;
      ++open_->byReason[reason];
      const std::string host = peerHost(peer);
      if (open_->peers.count(host) == 0) {
        if (open_->peers.size() < kMaxPeersPerInterval) {
          open_->peers.insert(host);
        } else {
          ++open_->morePeers;
        }
      }
      hasPending_.store(true, std::memory_order_relaxed);
    }
  }
  if (summary) hvd::logging::program("auth")->warn("{}", *summary);
  if (first) {
    hvd::logging::program("auth")->warn(
        "denied {} from {}: {} (further refusals in the next {} are counted "
        "and summarised)",
        method, peer, reason, secondsText(interval_));
  }
}

void DenialLog::flushIfDue() {
  if (!hasPending_.load(std::memory_order_relaxed)) return;
  const std::chrono::system_clock::time_point now = clock_->now();
  std::optional<std::string> summary;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!open_ || (now >= open_->start && now < open_->start + interval_)) return;
    summary = takeSummaryLocked();
    open_.reset();  // over: the next refusal is logged at once
  }
  if (summary) hvd::logging::program("auth")->warn("{}", *summary);
}

std::optional<std::string> DenialLog::takeSummaryLocked() {
  if (!open_ || open_->count == 0) return std::nullopt;
  const Interval& i = *open_;
  std::string reasons;
  for (const auto& [reason, n] : i.byReason) {
    reasons += (reasons.empty() ? "" : ", ") + reason + " x" + std::to_string(n);
  }
  // Past the bound a caller may be counted more than once, so only "more than" is known.
  const std::string callers = i.morePeers > 0
                                  ? "more than " + std::to_string(i.peers.size()) + " callers"
                                  : std::to_string(i.peers.size()) + " caller(s)";
  std::string line = "denied " + std::to_string(i.count) + " more call(s) from " + callers +
                     " in the " + secondsText(interval_) + " after the last one logged: " + reasons;
  open_->count = 0;
  open_->byReason.clear();
  open_->peers.clear();
  open_->morePeers = 0;
  hasPending_.store(false, std::memory_order_relaxed);
  ++summaries_;
  return line;
}

size_t DenialLog::total() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return total_;
}

size_t DenialLog::logged() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return logged_;
}

size_t DenialLog::summaries() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return summaries_;
}

size_t DenialLog::pending() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return open_ ? open_->count : 0;
}

}  // namespace hvd::agent::rpc
