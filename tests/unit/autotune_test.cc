// Autotune: the Gaussian process it models scores with, the search on synthetic throughput
// (it ends within its budget, finds the optimum, keeps fixed knobs, writes Horovod's log), and
// the engine applying every decision on every rank after the same cycle while the ops stay exact.
#include "engine/autotune.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "engine/gaussian_process.h"
#include "engine_support.h"

namespace hvd {
namespace {

using engine::AutotuneOptions;
using engine::Autotuner;
using engine::Clock;
using engine::GaussianProcess;
using engine::Point;
using engine::TunedParams;
using namespace std::chrono_literals;

constexpr double kMiB = 1024.0 * 1024.0;

// --- The Gaussian process ----------------------------------------------------------------

TEST(GaussianProcess, InterpolatesItsPointsWithLittleNoiseAndIsUnsureFarFromThem) {
  GaussianProcess gp(1e-6);
  std::vector<Point> points;
  std::vector<double> scores;
  for (double x = 0; x <= 1.0001; x += 0.125) {
    points.push_back({x});
    scores.push_back(100 + 20 * std::sin(3 * x));
  }
  gp.fit(points, scores);
  for (size_t i = 0; i < points.size(); ++i) {
    EXPECT_NEAR(gp.predict(points[i]).mean, scores[i], 0.05) << "x " << points[i][0];
  }
  // Between the points, near the curve; the spread is small there and grows off the data.
  EXPECT_NEAR(gp.predict({0.3}).mean, 100 + 20 * std::sin(0.9), 0.5);
  GaussianProcess sparse(1e-6);
  sparse.fit({{0.0}, {0.1}}, {1.0, 2.0});
  EXPECT_LT(sparse.predict({0.05}).stddev, sparse.predict({0.9}).stddev);
}

TEST(GaussianProcess, NoiseAveragesRepeatedMeasurementsOfOnePoint) {
  GaussianProcess gp(0.8);
  gp.fit({{0.5}, {0.5}, {0.5}, {0.5}, {0.0}}, {10, 12, 11, 13, 2});
  // The mean of the four measurements, shrunk toward the overall mean by the noise, is closer
  // to 11.5 than any single measurement's extreme.
  const double m = gp.predict({0.5}).mean;
  EXPECT_GT(m, 9.0);
  EXPECT_LT(m, 12.0);
  // Noise 0 (Horovod accepts it) with one point measured twice stays finite.
  GaussianProcess exact(0);
  exact.fit({{0.5}, {0.5}, {0.0}}, {10, 12, 2});
  EXPECT_TRUE(std::isfinite(exact.predict({0.5}).mean));
  EXPECT_NEAR(exact.predict({0.5}).mean, 11, 0.5);
  EXPECT_TRUE(std::isfinite(exact.expectedImprovement({0.25}, 12)));
}

TEST(GaussianProcess, ExpectedImprovementIsHighestWhereTheModelPromisesMore) {
  GaussianProcess gp(0.01);
  gp.fit({{0.0, 0.0}, {0.5, 0.5}, {1.0, 1.0}, {0.6, 0.4}}, {1, 5, 1, 6});
  const double best = 6;
  EXPECT_GT(gp.expectedImprovement({0.65, 0.4}, best), gp.expectedImprovement({0.0, 0.05}, best));
  EXPECT_GE(gp.expectedImprovement({0.0, 0.0}, best), 0.0);
}

TEST(GaussianProcess, GridPointsCoverTheCubeCornersIncluded) {
  EXPECT_EQ(engine::gridPoint(0, 3, 2), (Point{0.0, 0.0}));
  EXPECT_EQ(engine::gridPoint(2, 3, 2), (Point{1.0, 0.0}));
  EXPECT_EQ(engine::gridPoint(5, 3, 2), (Point{1.0, 0.5}));
  EXPECT_EQ(engine::gridPoint(8, 3, 2), (Point{1.0, 1.0}));
}

// --- The search on synthetic throughput --------------------------------------------------

// Step time of a synthetic job in microseconds: best near 8 MiB of fusion and 2 ms cycles,
// worse with the cache off, unaffected by hierarchical allreduce unless `hierarchicalGain`.
double stepMicros(const TunedParams& p, double hierarchicalGain = 1.0) {
  const double mib = static_cast<double>(p.fusionThreshold) / kMiB;
  const double ms = static_cast<double>(p.cycleTime.count()) / 1000.0;
  const double f = std::log2(1 + mib) - std::log2(9.0);
  const double c = std::log(ms / 2.0);
  double t = 10000 * (1 + 0.08 * f * f + 0.15 * c * c);
  if (!p.cache) t *= 1.3;
  if (p.hierarchical) t /= hierarchicalGain;
  return t;
}

struct Trace {
  std::vector<TunedParams> applied;  // every change, in order
  int steps = 0;
};

// Feeds `tuner` steps of six named tensors (1 MiB in all) until it is done or `maxSteps` ran.
Trace drive(Autotuner& tuner, int maxSteps, double hierarchicalGain = 1.0, uint32_t noiseSeed = 0) {
  Trace run;
  Clock::time_point now{};
  uint32_t state = noiseSeed;
  for (; run.steps < maxSteps && !tuner.done(); ++run.steps) {
    double t = stepMicros(tuner.current(), hierarchicalGain);
    if (noiseSeed != 0) {
      state = state * 1664525u + 1013904223u;
      t *= 1.0 + 0.1 * (static_cast<double>(state >> 8) / double(1u << 24) - 0.5);  // +-5%
    }
    for (int k = 0; k < 6; ++k) {
      now += std::chrono::microseconds(static_cast<int64_t>(t / 6));
      const auto next = tuner.observe({"grad." + std::to_string(k)}, (1 << 20) / 6, now);
      if (next) {
        run.applied.push_back(*next);
        tuner.applied(now);
      }
    }
  }
  return run;
}

std::string tempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          (name + "." + std::to_string(::getpid()) + "." +
           ::testing::UnitTest::GetInstance()->current_test_info()->name()))
      .string();
}

std::vector<std::string> lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(Autotuner, FindsTheOptimumWithinItsSampleBudgetAndWritesHorovodsColumns) {
  AutotuneOptions o;
  o.enabled = true;
  o.logPath = tempPath("autotune.csv");
  o.warmupSamples = 2;
  o.stepsPerSample = 3;
  o.bayesOptMaxSamples = 16;
  TunedParams initial;
  initial.fusionThreshold = size_t{128} << 20;
  initial.cycleTime = 1000us;
  Autotuner tuner(o, initial);
  EXPECT_EQ(tuner.budget(), 2 + 16 + 2);
  const Trace run = drive(tuner, 10000, 1.0, 12345);
  ASSERT_TRUE(tuner.done()) << tuner.progress();
  EXPECT_LE(tuner.samples(), tuner.budget());
  // Each sample is stepsPerSample whole steps, plus at most one partial step per change.
  EXPECT_LE(run.steps, tuner.budget() * (o.stepsPerSample + 1) + 1);
  // The choice is within 10% of the best step time the synthetic job allows (10000 us).
  const TunedParams best = run.applied.back();
  EXPECT_EQ(best, tuner.current());
  EXPECT_LT(stepMicros(best), 11000) << engine::describe(best);
  EXPECT_TRUE(best.cache);

  const auto rows = lines(o.logPath);
  ASSERT_GE(rows.size(), 3u);
  EXPECT_EQ(rows[0],
            "hierarchical_allreduce,hierarchical_allgather,torus_allreduce,cache_enabled,"
            "cycle_time_ms,tensor_fusion_threshold,score");
  // One row per scored sample after the warm-up, then the chosen configuration's.
  EXPECT_EQ(rows.size(), static_cast<size_t>(1 + tuner.samples() - o.warmupSamples + 1));
  for (size_t i = 1; i < rows.size(); ++i) {
    std::vector<double> fields;
    std::istringstream in(rows[i]);
    for (std::string field; std::getline(in, field, ',');) fields.push_back(std::stod(field));
    ASSERT_EQ(fields.size(), 7u) << rows[i];
    EXPECT_TRUE(fields[0] == 0 || fields[0] == 1) << rows[i];
    EXPECT_EQ(fields[1], 0) << rows[i];
    EXPECT_EQ(fields[2], 0) << rows[i];
    EXPECT_TRUE(fields[3] == 0 || fields[3] == 1) << rows[i];
    EXPECT_GE(fields[4], 1.0) << rows[i];
    EXPECT_LE(fields[4], 100.0) << rows[i];
    EXPECT_GE(fields[5], 0.0) << rows[i];
    EXPECT_LE(fields[5], 128.0) << rows[i];
    EXPECT_GT(fields[6], 0.0) << rows[i];
  }
  // The last row is the choice: its knobs are the ones applied last.
  std::istringstream last(rows.back());
  std::vector<double> f;
  for (std::string field; std::getline(last, field, ',');) f.push_back(std::stod(field));
  EXPECT_NEAR(f[4], static_cast<double>(best.cycleTime.count()) / 1000.0, 1e-3);
  EXPECT_NEAR(f[5], static_cast<double>(best.fusionThreshold) / kMiB, 1e-3);
  std::filesystem::remove(o.logPath);
}

TEST(Autotuner, KnobsSetExplicitlyStayAsConfigured) {
  AutotuneOptions o;
  o.warmupSamples = 1;
  o.stepsPerSample = 2;
  o.bayesOptMaxSamples = 8;
  o.fusionFixed = true;
  o.cacheFixed = true;
  TunedParams initial;
  initial.fusionThreshold = 3 << 20;
  initial.cycleTime = 40000us;
  Autotuner tuner(o, initial);
  EXPECT_EQ(tuner.budget(), 1 + 8);
  const Trace run = drive(tuner, 5000);
  ASSERT_TRUE(tuner.done());
  ASSERT_FALSE(run.applied.empty());
  for (const TunedParams& p : run.applied) {
    EXPECT_EQ(p.fusionThreshold, size_t{3} << 20);
    EXPECT_TRUE(p.cache);
  }
  // Only the cycle time moved, from 40 ms to within 5% of the best step time the fixed fusion
  // threshold allows (at the synthetic optimum of 2 ms).
  EXPECT_NE(tuner.current().cycleTime, 40000us);
  TunedParams optimum = initial;
  optimum.cycleTime = 2000us;
  EXPECT_LT(stepMicros(tuner.current()), 1.05 * stepMicros(optimum))
      << engine::describe(tuner.current());
}

TEST(Autotuner, EveryKnobFixedMeansNothingChanges) {
  AutotuneOptions o;
  o.warmupSamples = 1;
  o.stepsPerSample = 2;
  o.fusionFixed = o.cycleFixed = o.cacheFixed = o.hierarchicalFixed = true;
  Autotuner tuner(o, TunedParams{});
  EXPECT_EQ(tuner.budget(), 1);
  const Trace run = drive(tuner, 100);
  EXPECT_TRUE(tuner.done());
  EXPECT_TRUE(run.applied.empty());
  EXPECT_EQ(tuner.samples(), 1);
}

TEST(Autotuner, TheOnOffKnobsAreTriedAtTheWinnerAndKeptOnlyWhenFaster) {
  AutotuneOptions o;
  o.warmupSamples = 0;
  o.stepsPerSample = 2;
  o.bayesOptMaxSamples = 5;
  int asked = 0;
  TunedParams initial;
  initial.fusionThreshold = 8 << 20;
  initial.cycleTime = 2000us;
  // Hierarchical allreduce halves the step time here: it is kept; the cache stays on.
  Autotuner faster(o, initial, [&] {
    ++asked;
    return true;
  });
  EXPECT_EQ(faster.budget(), 5 + 2 + 2);
  drive(faster, 5000, 2.0);
  ASSERT_TRUE(faster.done());
  EXPECT_EQ(asked, 1);
  EXPECT_TRUE(faster.current().hierarchical);
  EXPECT_TRUE(faster.current().cache);
  EXPECT_EQ(faster.samples(), 9);

  // Where the job cannot use it, it is never tried.
  Autotuner unusable(o, initial, [] { return false; });
  const Trace run = drive(unusable, 5000, 2.0);
  ASSERT_TRUE(unusable.done());
  for (const TunedParams& p : run.applied) EXPECT_FALSE(p.hierarchical);
  EXPECT_EQ(unusable.samples(), 7);
}

TEST(Autotuner, AStepIsTheRunBetweenTwoUsesOfOneNameAndThePartialStepAfterAChangeIsSkipped) {
  AutotuneOptions o;
  o.warmupSamples = 1;
  o.stepsPerSample = 4;
  o.bayesOptMaxSamples = 3;
  Autotuner tuner(o, TunedParams{});
  Clock::time_point now{};
  int batches = 0;
  // Steps of three names; a sample needs 4 whole steps after the first boundary: the first
  // step's names start nothing, step 2's first name is the first boundary.
  auto step = [&] {
    std::optional<TunedParams> out;
    for (const char* name : {"a", "b", "c"}) {
      now += 1ms;
      ++batches;
      if (auto next = tuner.observe({name}, 100, now)) out = next;
    }
    return out;
  };
  for (int s = 0; s < 5; ++s) EXPECT_FALSE(step()) << s;
  EXPECT_EQ(tuner.samples(), 0);
  EXPECT_EQ(batches, 15);
  // The sixth step's first batch closes the fourth whole step (steps 2 to 5): the warm-up
  // sample ends, and the first Bayesian point is the configured one, so nothing changes yet.
  EXPECT_FALSE(step());
  EXPECT_EQ(tuner.samples(), 1);
}

// --- The engine: every rank applies the same parameters after the same cycle -------------

TEST(EngineAutotune, EveryRankAppliesEveryDecisionAfterTheSameCycleAndResultsStayExact) {
  for (int np : {2, 3}) {
    SCOPED_TRACE("np " + std::to_string(np));
    std::mutex mutex;
    std::vector<std::vector<std::pair<uint64_t, TunedParams>>> seen(np);
    const std::string log = tempPath("engine-autotune-" + std::to_string(np) + ".csv");
    {
      enginetest::Cluster cluster(np, [&](int r) {
        engine::EngineOptions o;
        o.autotune.enabled = true;
        o.autotune.logPath = log;
        o.autotune.warmupSamples = 1;
        o.autotune.stepsPerSample = 1;
        o.autotune.bayesOptMaxSamples = 12;
        o.onTuned = [&mutex, &seen, r](const TunedParams& p, uint64_t cycle) {
          std::lock_guard<std::mutex> lock(mutex);
          seen[r].emplace_back(cycle, p);
        };
        return o;
      });
      // A synthetic gradient pattern: 12 tensors of different sizes, each step in backward
      // order, waited on together, for many more steps than the search takes.
      constexpr int kTensors = 12;
      constexpr int kSteps = 80;
      cluster.run([&](int r, engine::Engine& engine) {
        for (int s = 0; s < kSteps; ++s) {
          std::vector<std::vector<float>> grads(kTensors);
          std::vector<Handle> handles;
          for (int k = kTensors - 1; k >= 0; --k) {
            grads[k].assign(64 << (k % 6), static_cast<float>(r + s + k));
            handles.push_back(engine.allreduce(
                "grad." + std::to_string(k), grads[k].data(), grads[k].data(),
                {static_cast<int64_t>(grads[k].size())}, DataType::kFloat32, {ReduceOp::kSum}));
          }
          for (auto& h : handles) h.wait();
          for (int k = 0; k < kTensors; ++k) {
            float want = 0;
            for (int q = 0; q < np; ++q) want += static_cast<float>(q + s + k);
            for (float v : grads[k]) {
              if (v != want) throw std::runtime_error("wrong sum at step " + std::to_string(s));
            }
          }
        }
      });
    }  // every engine stopped: the changes and the log are complete
    ASSERT_GE(seen[0].size(), 3u) << "the search hardly moved";
    for (int r = 1; r < np; ++r) {
      ASSERT_EQ(seen[r].size(), seen[0].size()) << "rank " << r;
      for (size_t i = 0; i < seen[0].size(); ++i) {
        EXPECT_EQ(seen[r][i].first, seen[0][i].first) << "rank " << r << " change " << i;
        EXPECT_EQ(seen[r][i].second, seen[0][i].second) << "rank " << r << " change " << i;
      }
    }
    // Changes never outnumber the samples the search may take (1 + 12 + 2 for the cache).
    EXPECT_LE(seen[0].size(), 15u);
    const auto rows = lines(log);
    ASSERT_GE(rows.size(), 2u);
    EXPECT_EQ(rows[0].rfind("hierarchical_allreduce,", 0), 0u);
    EXPECT_LE(rows.size(), 1u + 12 + 2 + 1);
    std::filesystem::remove(log);
  }
}

}  // namespace
}  // namespace hvd
