// Gaussian-process regression and expected improvement: the model behind the autotuner's search
// (engine/autotune.h). Pure arithmetic on a handful of points, so it is exact to test.
//
// Points live in the unit cube [0, 1]^d (the caller maps its parameters there). Scores are
// standardised (mean 0, standard deviation 1) before fitting, so `noise` is the variance of one
// observation's noise relative to the spread of the scores: Horovod's
// HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE (default 0.8) keeps that meaning. The kernel is a
// squared exponential with unit variance; its length scale is the one of a small fixed set that
// maximises the marginal likelihood of the points seen (refit on every fit()).
#pragma once

#include <cstddef>
#include <vector>

namespace hvd::engine {

using Point = std::vector<double>;

class GaussianProcess {
 public:
  explicit GaussianProcess(double noise) : noise_(noise) {}

  // Fits the model to `points` (each of one dimension) and their `scores`; at least one point.
  void fit(const std::vector<Point>& points, const std::vector<double>& scores);

  // Posterior mean and standard deviation of the (noise-free) score at `x`, in score units.
  struct Prediction {
    double mean = 0;
    double stddev = 0;
  };
  Prediction predict(const Point& x) const;

  // Expected improvement at `x` over `best` (a score), with exploration margin `xi` (in
  // standardised units).
  double expectedImprovement(const Point& x, double best, double xi = 0.01) const;

  double lengthScale() const { return lengthScale_; }

 private:
  double kernel(const Point& a, const Point& b) const;
  // Cholesky factor of K + noise I for `lengthScale_`; false when not positive definite.
  bool factor();
  double logLikelihood() const;

  double noise_;
  double lengthScale_ = 0.3;
  std::vector<Point> points_;
  std::vector<double> y_;        // standardised scores
  double mean_ = 0, scale_ = 1;  // score = mean_ + scale_ * standardised
  std::vector<double> chol_;     // lower triangular, row-major n x n
  std::vector<double> alpha_;    // (K + noise I)^-1 y
};

// The n-th point of a regular grid of `perAxis` points per axis over [0, 1]^dims (perAxis >= 2),
// for n in [0, perAxis^dims): the candidates the search scores its acquisition on.
Point gridPoint(size_t n, size_t perAxis, size_t dims);

}  // namespace hvd::engine
