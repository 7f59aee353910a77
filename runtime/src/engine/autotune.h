// Autotune (HVD_AUTOTUNE, Horovod's HOROVOD_AUTOTUNE / horovodrun --autotune): the engine tunes
// its own knobs — fusion threshold, cycle time, response cache on or off, hierarchical allreduce
// — for the job it runs, by the throughput it measures. docs/autotune.md is the user's view.
//
// Who does what. Rank 0's engine alone measures and decides (every rank runs the same
// collectives, so one rank's throughput is the job's); the others only apply what it decides.
// A decision reaches every rank through the negotiation: rank 0 raises a flag in a cycle's bit
// vector, that cycle broadcasts the new parameters, and every rank applies them at the end of
// that same cycle (engine.cc), so all ranks fuse, cache and time their cycles alike from the
// same cycle on.
//
// Measuring. A training step reduces each gradient once, under the same name every step; so a
// name that ran already in the current step starts the next one (as Horovod counts steps). A
// sample is `stepsPerSample` whole steps under one configuration (the partial step in which the
// configuration changed is skipped); its score is the median over those steps of bytes reduced
// per microsecond of the step (Horovod's unit; the median, so that one step slowed by something
// else on a shared machine does not decide).
//
// Searching, in this order (the budget: warmup + bayesOptMaxSamples + 2 per on/off knob tuned):
//  1. `warmupSamples` samples under the configured values, discarded (caches, allocators and
//     connections settle);
//  2. Bayesian optimisation of fusion threshold (0-128 MiB, on a log scale) and cycle time
//     (1-100 ms, log scale) for `bayesOptMaxSamples` samples: the configured point, four spread
//     points, then each next point where a Gaussian process of the scores so far
//     (engine/gaussian_process.h) expects the most improvement. Why this method: a sample costs
//     seconds of real training and its score is noisy, so the search must spend few samples and
//     average noise over neighbouring points rather than trust single measurements, which a
//     noise-aware Gaussian process does and a grid or a hill climb does not. The winner is the
//     sampled point with the best posterior mean (not the luckiest single score);
//  3. each on/off knob in turn (response cache; hierarchical allreduce, only where the job can
//     use it), at the winner: one sample as it is and one flipped; the flipped value stays only
//     when it scores 3% better (one sample against one is noisy: the configured value wins ties);
//  4. the best configuration is applied for the rest of the job, and tuning stops.
// A knob set explicitly (HVD_FUSION_THRESHOLD, HVD_CYCLE_TIME, HVD_CACHE_CAPACITY,
// HVD_HIERARCHICAL_ALLREDUCE or their HOROVOD_* names) is fixed, as in Horovod.
//
// The log file (HVD_AUTOTUNE_LOG, rank 0) has Horovod's columns: one row per scored sample after
// the warm-up, then the best configuration's row.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "engine/gaussian_process.h"
#include "engine/stall.h"

namespace hvd::engine {

// The knobs autotune sets, as every rank applies them.
struct TunedParams {
  size_t fusionThreshold = 0;  // bytes
  std::chrono::microseconds cycleTime{1000};
  bool cache = true;
  bool hierarchical = false;
  bool operator==(const TunedParams& o) const {
    return fusionThreshold == o.fusionThreshold && cycleTime == o.cycleTime && cache == o.cache &&
           hierarchical == o.hierarchical;
  }
  bool operator!=(const TunedParams& o) const { return !(*this == o); }
};

// "fusion threshold 4.5 MiB, cycle time 2.5 ms, response cache on, hierarchical allreduce off"
std::string describe(const TunedParams& p);

struct AutotuneOptions {
  bool enabled = false;
  std::string logPath;          // HVD_AUTOTUNE_LOG: rank 0 writes the CSV there; "" none
  int warmupSamples = 3;        // HVD_AUTOTUNE_WARMUP_SAMPLES
  int stepsPerSample = 10;      // HVD_AUTOTUNE_STEPS_PER_SAMPLE
  int bayesOptMaxSamples = 20;  // HVD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES
  double noise = 0.8;           // HVD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE
  // Knobs the user set explicitly: kept as configured.
  bool fusionFixed = false;
  bool cycleFixed = false;
  bool cacheFixed = false;
  bool hierarchicalFixed = false;
};

// Ranges of the search (Horovod's cycle time range; the fusion range reaches hvd's default).
inline constexpr double kTuneFusionMaxMiB = 128;
inline constexpr double kTuneCycleMinMs = 1;
inline constexpr double kTuneCycleMaxMs = 100;

// Rank 0's search. Not thread-safe: the engine thread owns it.
class Autotuner {
 public:
  // `initial`: the configured values (the warm-up and the first point run under them).
  // `hierarchicalApplies`: asked once, when the on/off knobs' turn comes, whether hierarchical
  // allreduce can serve this job (device buffers ran, and the hosts allow it).
  Autotuner(AutotuneOptions options, TunedParams initial,
            std::function<bool()> hierarchicalApplies = {});

  // Responses that ran (their names) and the payload bytes they moved, at `now`. Returns the
  // parameters every rank should apply next when the search moves on (the engine broadcasts
  // them, then calls applied()); nullopt otherwise. Ignored while a change is pending or once
  // tuning is done.
  std::optional<TunedParams> observe(const std::vector<std::string>& names, uint64_t bytes,
                                     Clock::time_point now);
  // The parameters returned by observe() took effect on every rank at `now`.
  void applied(Clock::time_point now);

  bool done() const { return phase_ == Phase::kDone; }
  bool pending() const { return pending_; }
  const TunedParams& current() const { return current_; }
  // Samples scored so far, warm-up included.
  int samples() const { return samples_; }
  // The most samples this search can take.
  int budget() const;
  // What the search is doing, for the log: "warm-up sample 2 of 3", "sample 7 of 27".
  std::string progress() const;

 private:
  enum class Phase { kWarmup, kBayes, kKnobs, kDone };
  using Knob = bool TunedParams::*;  // an on/off knob

  // Step and sample accounting; true when a sample's score is ready in `score`.
  bool measure(const std::vector<std::string>& names, uint64_t bytes, Clock::time_point now,
               double* score);
  // The search's next configuration after a sample scored `score`.
  TunedParams next(double score);
  void startKnobs();
  TunedParams nextKnob();
  Point toPoint(const TunedParams& p) const;
  TunedParams fromPoint(const Point& x) const;
  Point nextBayesPoint();
  void logRow(const TunedParams& p, double score);

  AutotuneOptions options_;
  TunedParams current_;
  TunedParams best_;
  double bestScore_ = 0;
  std::function<bool()> hierarchicalApplies_;
  Phase phase_ = Phase::kWarmup;
  bool pending_ = false;
  int samples_ = 0;
  int warmupsLeft_ = 0;

  // Steps of the current sample.
  std::set<std::string> stepNames_;
  bool stepStarted_ = false;  // the first boundary after a change was seen
  Clock::time_point stepStart_;
  uint64_t stepBytes_ = 0;
  std::vector<double> stepScores_;

  // Bayesian phase: the free dimensions (0: fusion, 1: cycle time), points and scores.
  std::vector<int> dims_;
  std::vector<Point> points_;
  std::vector<double> scores_;
  GaussianProcess gp_;
  // On/off knobs still to try, and the trial under way.
  std::vector<Knob> knobs_;
  size_t knob_ = 0;
  int knobTrial_ = 0;        // 0: as it is, 1: flipped
  double knobBaseline_ = 0;  // trial 0's score

  std::unique_ptr<std::ofstream> log_;
};

}  // namespace hvd::engine
