#include "engine/autotune.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <sstream>

#include "hvd_support/logging.h"

namespace hvd::engine {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
// Where the Bayesian phase looks after the configured point: spread over the square so that the
// first fit sees both ends of each range (normalised fusion, cycle time).
const Point kDesign[] = {{0.5, 0.15}, {0.2, 0.4}, {0.8, 0.6}, {0.35, 0.0}};
// An on/off knob leaves its configured value only when the other value scores this much better:
// one sample against one sample is noisy, and the configured value is the user's (or hvd's)
// considered default.
constexpr double kKnobMargin = 1.03;
// Candidates per axis on which the acquisition is maximised.
constexpr size_t kGridPerAxis[] = {0, 129, 33};

const double kFusionSpan = std::log2(1 + kTuneFusionMaxMiB);
const double kCycleSpan = std::log(kTuneCycleMaxMs / kTuneCycleMinMs);

std::string number(double v) {
  std::ostringstream out;
  out << std::setprecision(6) << v;
  return out.str();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

std::string describe(const TunedParams& p) {
  return "fusion threshold " + number(static_cast<double>(p.fusionThreshold) / kMiB) +
         " MiB, cycle time " + number(static_cast<double>(p.cycleTime.count()) / 1000.0) +
         " ms, response cache " + (p.cache ? "on" : "off") + ", hierarchical allreduce " +
         (p.hierarchical ? "on" : "off");
}

Autotuner::Autotuner(AutotuneOptions options, TunedParams initial,
                     std::function<bool()> hierarchicalApplies)
    : options_(std::move(options)),
      current_(initial),
      best_(initial),
      hierarchicalApplies_(std::move(hierarchicalApplies)),
      warmupsLeft_(std::max(0, options_.warmupSamples)),
      gp_(options_.noise) {
  options_.stepsPerSample = std::max(1, options_.stepsPerSample);
  if (!options_.fusionFixed) dims_.push_back(0);
  if (!options_.cycleFixed) dims_.push_back(1);
  if (!options_.logPath.empty()) {
    log_ = std::make_unique<std::ofstream>(options_.logPath, std::ios::out | std::ios::trunc);
    if (!*log_) {
      logging::get("engine")->warn(
          "autotune: cannot write the log file '{}' ({}); tuning goes on without it (give "
          "--autotune-log-file a path in an existing directory rank 0 may write to)",
          options_.logPath, std::strerror(errno));
      log_.reset();
    } else {
      *log_ << "hierarchical_allreduce,hierarchical_allgather,torus_allreduce,cache_enabled,"
               "cycle_time_ms,tensor_fusion_threshold,score\n";
      log_->flush();
    }
  }
  if (warmupsLeft_ == 0) {
    phase_ = Phase::kBayes;
    if (dims_.empty() || options_.bayesOptMaxSamples < 1) startKnobs();
  }
}

int Autotuner::budget() const {
  int n = std::max(0, options_.warmupSamples);
  if (!dims_.empty()) n += std::max(0, options_.bayesOptMaxSamples);
  if (!options_.cacheFixed) n += 2;
  if (!options_.hierarchicalFixed && hierarchicalApplies_) n += 2;
  return n;
}

std::string Autotuner::progress() const {
  if (phase_ == Phase::kDone) return "done after " + std::to_string(samples_) + " samples";
  if (phase_ == Phase::kWarmup) {
    return "warm-up sample " + std::to_string(options_.warmupSamples - warmupsLeft_ + 1) + " of " +
           std::to_string(options_.warmupSamples);
  }
  return "sample " + std::to_string(samples_ + 1) + " of at most " + std::to_string(budget());
}

bool Autotuner::measure(const std::vector<std::string>& names, uint64_t bytes,
                        Clock::time_point now, double* score) {
  for (const std::string& name : names) {
    if (stepNames_.count(name) == 0) continue;
    // `name` ran already in this step: a new step starts with this batch.
    if (stepStarted_) {
      const double us = std::max<double>(
          1.0,
          static_cast<double>(
              std::chrono::duration_cast<std::chrono::microseconds>(now - stepStart_).count()));
      stepScores_.push_back(static_cast<double>(stepBytes_) / us);
    }
    stepStarted_ = true;
    stepStart_ = now;
    stepBytes_ = 0;
    stepNames_.clear();
    break;
  }
  stepNames_.insert(names.begin(), names.end());
  stepBytes_ += bytes;
  if (static_cast<int>(stepScores_.size()) < options_.stepsPerSample) return false;
  *score = median(stepScores_);
  stepScores_.clear();
  return true;
}

std::optional<TunedParams> Autotuner::observe(const std::vector<std::string>& names, uint64_t bytes,
                                              Clock::time_point now) {
  if (pending_ || phase_ == Phase::kDone) return std::nullopt;
  double score = 0;
  if (!measure(names, bytes, now, &score)) return std::nullopt;
  const TunedParams measured = current_;
  const std::string what = progress();
  ++samples_;
  const TunedParams following = next(score);
  auto log = logging::get("engine");
  log->info("autotune: {}: {}: {} B/us", what, describe(measured), number(score));
  if (phase_ == Phase::kDone) {
    log->info("autotune: {}; the job goes on with {}", progress(), describe(best_));
  }
  if (following == current_) return std::nullopt;  // measuring goes on, step by step
  current_ = following;
  pending_ = true;
  return following;
}

void Autotuner::applied(Clock::time_point now) {
  pending_ = false;
  // The change came mid-step: that step is not one configuration's, so it is not counted.
  stepNames_.clear();
  stepStarted_ = false;
  stepStart_ = now;
  stepBytes_ = 0;
  stepScores_.clear();
}

TunedParams Autotuner::next(double score) {
  switch (phase_) {
    case Phase::kWarmup:
      if (--warmupsLeft_ > 0) return current_;
      phase_ = Phase::kBayes;
      if (dims_.empty() || options_.bayesOptMaxSamples < 1) {
        startKnobs();
        return nextKnob();
      }
      return current_;  // the configured point is the first one scored
    case Phase::kBayes: {
      logRow(current_, score);
      points_.push_back(toPoint(current_));
      scores_.push_back(score);
      if (static_cast<int>(points_.size()) < options_.bayesOptMaxSamples) {
        return fromPoint(nextBayesPoint());
      }
      // The winner: the point the model rates best, which averages the noise of neighbours.
      gp_.fit(points_, scores_);
      size_t winner = 0;
      double winnerMean = gp_.predict(points_[0]).mean;
      for (size_t i = 1; i < points_.size(); ++i) {
        const double m = gp_.predict(points_[i]).mean;
        if (m > winnerMean) {
          winner = i;
          winnerMean = m;
        }
      }
      best_ = fromPoint(points_[winner]);
      bestScore_ = winnerMean;
      startKnobs();
      return nextKnob();
    }
    case Phase::kKnobs: {
      logRow(current_, score);
      if (knobTrial_ == 0) {
        knobBaseline_ = score;
        knobTrial_ = 1;
        TunedParams flipped = best_;
        flipped.*knobs_[knob_] = !(best_.*knobs_[knob_]);
        return flipped;
      }
      if (score > knobBaseline_ * kKnobMargin) {
        best_ = current_;
        bestScore_ = score;
      } else {
        bestScore_ = knobBaseline_;
      }
      ++knob_;
      knobTrial_ = 0;
      return nextKnob();
    }
    case Phase::kDone:
      break;
  }
  return current_;
}

void Autotuner::startKnobs() {
  phase_ = Phase::kKnobs;
  knobs_.clear();
  if (!options_.cacheFixed) knobs_.push_back(&TunedParams::cache);
  if (!options_.hierarchicalFixed && hierarchicalApplies_ && hierarchicalApplies_()) {
    knobs_.push_back(&TunedParams::hierarchical);
  }
  knob_ = 0;
  knobTrial_ = 0;
}

TunedParams Autotuner::nextKnob() {
  if (knob_ < knobs_.size()) return best_;
  phase_ = Phase::kDone;
  logRow(best_, bestScore_);
  return best_;
}

Point Autotuner::toPoint(const TunedParams& p) const {
  Point x;
  for (int d : dims_) {
    double v = d == 0
                   ? std::log2(1 + static_cast<double>(p.fusionThreshold) / kMiB) / kFusionSpan
                   : std::log(static_cast<double>(p.cycleTime.count()) / 1000.0 / kTuneCycleMinMs) /
                         kCycleSpan;
    x.push_back(std::clamp(v, 0.0, 1.0));
  }
  return x;
}

TunedParams Autotuner::fromPoint(const Point& x) const {
  TunedParams p = best_;
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (dims_[i] == 0) {
      const double mib = std::exp2(x[i] * kFusionSpan) - 1;
      // Whole 4 KiB pages: finer steps change nothing measurable.
      p.fusionThreshold = static_cast<size_t>(std::llround(mib * kMiB / 4096.0)) * 4096;
    } else {
      const double ms = kTuneCycleMinMs * std::exp(x[i] * kCycleSpan);
      p.cycleTime = std::chrono::microseconds(std::llround(ms * 100.0) * 10);
    }
  }
  return p;
}

Point Autotuner::nextBayesPoint() {
  const size_t k = points_.size();  // points scored, the configured one first
  if (k >= 1 && k - 1 < std::size(kDesign)) {
    Point x;
    for (int d : dims_) x.push_back(kDesign[k - 1][d]);
    return x;
  }
  gp_.fit(points_, scores_);
  double best = gp_.predict(points_[0]).mean;
  for (const Point& p : points_) best = std::max(best, gp_.predict(p).mean);
  const size_t perAxis = kGridPerAxis[dims_.size()];
  size_t total = 1;
  for (size_t d = 0; d < dims_.size(); ++d) total *= perAxis;
  Point choice = gridPoint(0, perAxis, dims_.size());
  double choiceGain = -1;
  for (size_t n = 0; n < total; ++n) {
    const Point x = gridPoint(n, perAxis, dims_.size());
    const double gain = gp_.expectedImprovement(x, best);
    if (gain > choiceGain) {
      choice = x;
      choiceGain = gain;
    }
  }
  return choice;
}

void Autotuner::logRow(const TunedParams& p, double score) {
  if (!log_) return;
  // Horovod's columns; hvd has no hierarchical allgather and no torus allreduce (always 0).
  *log_ << (p.hierarchical ? 1 : 0) << ",0,0," << (p.cache ? 1 : 0) << ","
        << number(static_cast<double>(p.cycleTime.count()) / 1000.0) << ","
        << number(static_cast<double>(p.fusionThreshold) / kMiB) << "," << number(score) << "\n";
  log_->flush();
}

}  // namespace hvd::engine
