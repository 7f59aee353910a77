#include "engine/straggler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace hvd::engine {
namespace {

double medianOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

std::string StragglerReport::describe() const {
  char text[256];
  std::snprintf(text, sizeof(text),
                "rank %d%s%s was the last to submit %.0f%% of the last %d ops every rank ran "
                "(%d), a median %.1f ms after the other ranks",
                rank, host.empty() ? "" : " on ", host.c_str(),
                ops > 0 ? 100.0 * lastOps / ops : 0.0, ops, lastOps, medianLagMs);
  return text;
}

std::optional<StragglerReport> StragglerDetector::analyze(
    const std::vector<std::vector<float>>& waits) {
  const size_t ranks = waits.size();
  if (ranks < 2) return std::nullopt;
  size_t count = waits[0].size();
  for (const auto& w : waits) count = std::min(count, w.size());
  const double minLag = static_cast<double>(options_.minLag.count());
  std::vector<int> lastCount(ranks, 0);
  std::vector<std::vector<double>> lags(ranks);
  int ops = 0;
  std::vector<double> column(ranks);
  for (size_t i = 0; i < count; ++i) {
    bool everyRank = true;
    for (size_t r = 0; r < ranks; ++r) {
      column[r] = waits[r][i];
      everyRank = everyRank && column[r] >= 0;
    }
    if (!everyRank) continue;
    ++ops;
    const size_t last =
        static_cast<size_t>(std::min_element(column.begin(), column.end()) - column.begin());
    std::vector<double> others;
    for (size_t r = 0; r < ranks; ++r) {
      if (r != last) others.push_back(column[r]);
    }
    const double lag = medianOf(others) - column[last];
    if (lag >= minLag) {
      ++lastCount[last];
      lags[last].push_back(lag);
    }
  }
  if (ops == 0) return std::nullopt;
  for (size_t r = 0; r < ranks; ++r) {
    if (reported_.count(static_cast<int>(r)) > 0) continue;
    if (static_cast<double>(lastCount[r]) < options_.minShare * ops || lastCount[r] == 0) continue;
    reported_.insert(static_cast<int>(r));
    StragglerReport report;
    report.rank = static_cast<int>(r);
    report.lastOps = lastCount[r];
    report.ops = ops;
    report.medianLagMs = medianOf(lags[r]) / 1000.0;
    return report;
  }
  return std::nullopt;
}

}  // namespace hvd::engine
