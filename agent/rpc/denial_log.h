// The log of refused calls, rate-limited. A refusal is worth a line: a wrong key on a new node,
// a clock out of sync, someone probing the port. But a client retrying with a bad key, or a
// scanner, refuses thousands of calls a minute, and a line for each would bury everything else
// (and fill the disk). So the first refusal of each reason in an interval is logged at once, with
// its method, peer and reason (a replay must not hide behind a bad key); later ones of that
// reason in the same interval are only counted, and their summary (counts
// per reason, how many callers) is logged as one line when the interval is over: at the next
// refusal, at the next call checked after it (CallGuard asks), or when the log is destroyed.
//
// Lines name the method, the peer and the verifier's reason, never metadata values (signatures,
// nonces, timestamps).
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "agent/auth/request_signer.h"

namespace hvd::agent::rpc {

class DenialLog {
 public:
  static constexpr std::chrono::milliseconds kDefaultInterval{60'000};
  // Distinct callers remembered for an interval's summary; past it they are counted as "more".
  static constexpr size_t kMaxPeersPerInterval = 1024;

  // `clock` must outlive the log.
  explicit DenialLog(auth::Clock* clock, std::chrono::milliseconds interval = kDefaultInterval);
  ~DenialLog();  // logs the summary of what the last interval still holds

  DenialLog(const DenialLog&) = delete;
  DenialLog& operator=(const DenialLog&) = delete;

  // One refused call of `method` from `peer` (gRPC's "ipv4:10.0.0.1:4242" form) for `reason`.
  void record(std::string_view method, const std::string& peer, const std::string& reason);

  // Logs the summary if the interval that holds unreported refusals is over. Cheap when there
  // is nothing to report (one atomic load), so it can run on every call.
  void flushIfDue();

  // For tests and diagnostics.
  size_t total() const;      // refusals recorded
  size_t logged() const;     // refusals logged on a line of their own
  size_t summaries() const;  // summary lines logged
  size_t pending() const;    // refusals counted in the open interval, not yet in a summary

 private:
  struct Interval {
    std::chrono::system_clock::time_point start;
    std::map<std::string, size_t> byReason;  // refusals after the first, per reason
    std::set<std::string> peers;             // their callers without ports, bounded
    size_t morePeers = 0;                    // refusals from callers past the bound
    size_t count = 0;
    std::set<std::string> reasonsLogged;  // reasons whose first refusal was logged at once
  };

  // The summary line of open_ (nullopt when it holds nothing to report); resets the counts.
  std::optional<std::string> takeSummaryLocked();

  auth::Clock* const clock_;
  const std::chrono::milliseconds interval_;
  mutable std::mutex mutex_;
  std::optional<Interval> open_;
  std::atomic<bool> hasPending_{false};
  size_t total_ = 0;
  size_t logged_ = 0;
  size_t summaries_ = 0;
};

}  // namespace hvd::agent::rpc
