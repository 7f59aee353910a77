// How many times an elastic job may change its workers (hvdrun --reset-limit; Horovod's
// WorkerStateRegistry). Every round after the first is a reset, whether a worker failed or hosts
// came or went.
//
// Horovod's rule, kept exactly: before each reset it checks `resets so far >= limit`, and if so
// ends the job with RESET_LIMIT_EXCEEDED_MESSAGE (contract::resetLimitMessage) instead. So a limit
// of N allows N resets and fails the (N+1)-th attempt; a limit of 0 allows none; no limit (the
// default, Horovod's None) allows any number. Note that ElasticSpec::resetLimit spells "no
// limit" as 0, so its caller passes nullopt for 0.
#pragma once

#include <optional>
#include <string>

namespace hvd::agent::elastic {

class ResetCounter {
 public:
  // Throws hvd::InvalidArgumentError naming --reset-limit for a negative limit.
  explicit ResetCounter(std::optional<int> limit);

  // Whether the reset about to happen is one too many: the job ends with message() instead.
  bool exceeded() const { return limit_ && resets_ >= *limit_; }
  // A reset happened (a new round began after the first).
  void recordReset() { ++resets_; }
  int resets() const { return resets_; }
  std::optional<int> limit() const { return limit_; }
  // Horovod's words for the job's error (contract::resetLimitMessage); "" without a limit.
  std::string message() const;

 private:
  std::optional<int> limit_;
  int resets_ = 0;
};

}  // namespace hvd::agent::elastic
