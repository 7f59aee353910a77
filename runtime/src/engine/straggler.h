// Stragglers: the rank that is consistently the last to submit the ops every rank runs.
//
// Every rank knows, for each op it ran, how long it waited: from its submit to the cycle in which
// every rank had submitted it. The rank that arrived last waited least; the others waited for it.
// Responses come out in the same order on every rank, so after every `window` ops the engine
// gathers each rank's waits for those ops (engine.cc), and rank 0 asks analyze() whether one rank
// was last by a margin in most of them:
//   * an op counts against rank r when r's wait is the smallest and the median of the other
//     ranks' waits exceeds it by at least `minLag` (differences below it are cycle jitter);
//   * r is a straggler when that holds for at least `minShare` of the window's ops that every
//     rank ran;
//   * its lag is the median, over those ops, of (the others' median wait - r's wait): how long
//     after the typical rank it submits.
// Each straggler is reported once per job (the engine logs it, marks it in the timeline and
// counts it in its stats). Pure logic, tested on synthetic waits.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace hvd::engine {

struct StragglerReport {
  int rank = -1;     // as the engine's messages name ranks (job ranks)
  std::string host;  // where it runs, when known
  int lastOps = 0;   // ops of the window it was last in, by the margin
  int ops = 0;       // ops of the window every rank ran
  double medianLagMs = 0;
  // "rank 3 on node-b was the last to submit 94% of the last 256 ops every rank ran (241), a
  // median 48.2 ms after the other ranks"
  std::string describe() const;
};

struct StragglerOptions {
  size_t window = 256;  // ops per analysis (HVD_STRAGGLER_WINDOW; 0: off)
  std::chrono::microseconds minLag{2000};
  double minShare = 0.5;
};

class StragglerDetector {
 public:
  explicit StragglerDetector(StragglerOptions options) : options_(options) {}

  const StragglerOptions& options() const { return options_; }

  // waits[r][i]: rank r's wait for op i of the window in microseconds, negative where rank r
  // had no op of its own (it had joined). Returns a straggler not reported before, if any; the
  // caller fills in the host and job rank.
  std::optional<StragglerReport> analyze(const std::vector<std::vector<float>>& waits);

 private:
  StragglerOptions options_;
  std::set<int> reported_;
};

}  // namespace hvd::engine
