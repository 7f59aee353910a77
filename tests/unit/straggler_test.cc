// Stragglers: the analysis on synthetic waits (who is last, by what margin, how often, once per
// job), then engines as threads where one rank sleeps before each step's submits.
#include "engine/straggler.h"

#include <gtest/gtest.h>

#include <mutex>
#include <thread>

#include "engine_support.h"

namespace hvd {
namespace {

using engine::StragglerDetector;
using engine::StragglerOptions;
using engine::StragglerReport;
using namespace std::chrono_literals;

// Waits of `ranks` ranks for `ops` ops: every rank waits about `base` us (+- jitter), except
// that `late` waited `lag` us less in the ops where `lateAt(i)` holds (it arrived that late).
std::vector<std::vector<float>> waits(int ranks, int ops, int late, float lag,
                                      const std::function<bool(int)>& lateAt, float base = 30000) {
  std::vector<std::vector<float>> w(ranks, std::vector<float>(ops));
  for (int r = 0; r < ranks; ++r) {
    for (int i = 0; i < ops; ++i) {
      const float jitter = static_cast<float>(((r * 7 + i * 13) % 11) * 50);  // < 0.55 ms
      w[r][i] = base + jitter - (r == late && lateAt(i) ? lag : 0);
    }
  }
  return w;
}

TEST(StragglerDetector, ARankLastByAMarginInMostOpsIsReportedOnceWithItsShareAndLag) {
  StragglerDetector detector(StragglerOptions{});
  const auto w = waits(4, 100, 2, 20000, [](int i) { return i % 10 != 0; });  // 90 of 100
  const std::optional<StragglerReport> report = detector.analyze(w);
  ASSERT_TRUE(report);
  EXPECT_EQ(report->rank, 2);
  EXPECT_EQ(report->ops, 100);
  EXPECT_EQ(report->lastOps, 90);
  EXPECT_NEAR(report->medianLagMs, 20.0, 0.6);
  StragglerReport named = *report;
  named.host = "node-c";
  EXPECT_EQ(
      named.describe().rfind("rank 2 on node-c was the last to submit 90% of the last 100 ops", 0),
      0u)
      << named.describe();
  // Once per job: the same pattern again says nothing new.
  EXPECT_FALSE(detector.analyze(w));
}

TEST(StragglerDetector, JitterBelowTheMarginOrAnOccasionalLateRankIsNoStraggler) {
  StragglerDetector detector(StragglerOptions{});
  // Everyone within half a millisecond: the last rank differs by less than the 2 ms margin.
  EXPECT_FALSE(detector.analyze(waits(4, 100, 1, 0, [](int) { return false; })));
  // Late by a lot, but in only 30% of the ops.
  EXPECT_FALSE(detector.analyze(waits(4, 100, 1, 50000, [](int i) { return i % 10 < 3; })));
  // Two ranks: the one always later by 5 ms is a straggler, its lag the full difference.
  const auto report = detector.analyze(waits(2, 50, 1, 5000, [](int) { return true; }));
  ASSERT_TRUE(report);
  EXPECT_EQ(report->rank, 1);
  EXPECT_NEAR(report->medianLagMs, 5.0, 0.6);
}

TEST(StragglerDetector, OpsARankDidNotSubmitItselfAreLeftOut) {
  StragglerDetector detector(StragglerOptions{});
  auto w = waits(3, 40, 0, 10000, [](int) { return true; });
  for (int i = 0; i < 30; ++i) w[1][i] = -1;  // rank 1 had joined for these
  const auto report = detector.analyze(w);
  ASSERT_TRUE(report);
  EXPECT_EQ(report->ops, 10);
  EXPECT_EQ(report->lastOps, 10);
}

// Three engines; rank `slow` sleeps `sleep` before each step's submits. Returns rank 0's reports.
std::vector<StragglerReport> stragglersOf(int slow, std::chrono::milliseconds sleep) {
  std::mutex mutex;
  std::vector<StragglerReport> reports;
  {
    enginetest::Cluster cluster(3, [&](int r) {
      engine::EngineOptions o;
      o.stragglers.window = 48;  // 12 steps of 4 ops: one rank late by chance is not 6 of them
      o.hostName = "host" + std::to_string(r);
      o.onStraggler = [&](const StragglerReport& report) {
        std::lock_guard<std::mutex> lock(mutex);
        reports.push_back(report);
      };
      return o;
    });
    cluster.run([&](int r, engine::Engine& engine) {
      for (int step = 0; step < 24; ++step) {
        if (r == slow) std::this_thread::sleep_for(sleep);
        std::vector<std::vector<float>> grads(4, std::vector<float>(256, 1.0f));
        std::vector<Handle> handles;
        for (int k = 0; k < 4; ++k) {
          handles.push_back(engine.allreduce("g." + std::to_string(k), grads[k].data(),
                                             grads[k].data(), {256}, DataType::kFloat32,
                                             {ReduceOp::kSum}));
        }
        for (auto& h : handles) h.wait();
        for (const auto& g : grads) EXPECT_EQ(g[0], 3.0f);
      }
    });
  }
  return reports;
}

TEST(EngineStragglers, TheRankThatSleepsBeforeEachStepIsNamedOnceAndNoneWhenNoRankLags) {
  const auto reports = stragglersOf(2, 30ms);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].rank, 2);
  EXPECT_EQ(reports[0].host, "host2");
  EXPECT_EQ(reports[0].ops, 48);
  EXPECT_GE(reports[0].lastOps, 24);
  EXPECT_GT(reports[0].medianLagMs, 15.0);
  EXPECT_LT(reports[0].medianLagMs, 200.0);
  // Two windows of ranks that keep pace: nothing, run after run.
  for (int run = 0; run < 5; ++run) EXPECT_TRUE(stragglersOf(-1, 0ms).empty()) << run;
}

}  // namespace
}  // namespace hvd
