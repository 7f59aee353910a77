#include "engine/gaussian_process.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace hvd::engine {
namespace {

// Length scales tried on every fit (the cube's side is 1): from "neighbouring grid points
// differ" to "the whole range is one smooth trend".
constexpr double kLengthScales[] = {0.1, 0.2, 0.3, 0.5, 0.8};
constexpr double kPi = 3.14159265358979323846;

double normalPdf(double z) { return std::exp(-0.5 * z * z) / std::sqrt(2 * kPi); }
double normalCdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

}  // namespace

double GaussianProcess::kernel(const Point& a, const Point& b) const {
  double d2 = 0;
  for (size_t i = 0; i < a.size(); ++i) d2 += (a[i] - b[i]) * (a[i] - b[i]);
  return std::exp(-d2 / (2 * lengthScale_ * lengthScale_));
}

bool GaussianProcess::factor() {
  const size_t n = points_.size();
  chol_.assign(n * n, 0.0);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j <= i; ++j) {
      double s = kernel(points_[i], points_[j]) + (i == j ? noise_ + 1e-6 : 0.0);
      for (size_t k = 0; k < j; ++k) s -= chol_[i * n + k] * chol_[j * n + k];
      if (i == j) {
        if (s <= 0) return false;
        chol_[i * n + i] = std::sqrt(s);
      } else {
        chol_[i * n + j] = s / chol_[j * n + j];
      }
    }
  }
  // alpha = L^-T L^-1 y.
  std::vector<double> z(n);
  for (size_t i = 0; i < n; ++i) {
    double s = y_[i];
    for (size_t k = 0; k < i; ++k) s -= chol_[i * n + k] * z[k];
    z[i] = s / chol_[i * n + i];
  }
  alpha_.assign(n, 0.0);
  for (size_t i = n; i-- > 0;) {
    double s = z[i];
    for (size_t k = i + 1; k < n; ++k) s -= chol_[k * n + i] * alpha_[k];
    alpha_[i] = s / chol_[i * n + i];
  }
  return true;
}

double GaussianProcess::logLikelihood() const {
  const size_t n = points_.size();
  double fit = 0, logDet = 0;
  for (size_t i = 0; i < n; ++i) {
    fit += y_[i] * alpha_[i];
    logDet += std::log(chol_[i * n + i]);
  }
  return -0.5 * fit - logDet - 0.5 * static_cast<double>(n) * std::log(2 * kPi);
}

void GaussianProcess::fit(const std::vector<Point>& points, const std::vector<double>& scores) {
  if (points.empty() || points.size() != scores.size()) {
    throw std::invalid_argument("GaussianProcess::fit: needs as many scores as points, and one");
  }
  points_ = points;
  const double n = static_cast<double>(scores.size());
  mean_ = 0;
  for (double s : scores) mean_ += s / n;
  double var = 0;
  for (double s : scores) var += (s - mean_) * (s - mean_) / n;
  scale_ = var > 1e-24 ? std::sqrt(var) : 1.0;
  y_.clear();
  for (double s : scores) y_.push_back((s - mean_) / scale_);

  double best = -std::numeric_limits<double>::infinity();
  double bestScale = kLengthScales[0];
  for (double l : kLengthScales) {
    lengthScale_ = l;
    if (!factor()) continue;
    const double ll = logLikelihood();
    if (ll > best) {
      best = ll;
      bestScale = l;
    }
  }
  lengthScale_ = bestScale;
  factor();
}

GaussianProcess::Prediction GaussianProcess::predict(const Point& x) const {
  const size_t n = points_.size();
  std::vector<double> k(n);
  for (size_t i = 0; i < n; ++i) k[i] = kernel(points_[i], x);
  double m = 0;
  for (size_t i = 0; i < n; ++i) m += k[i] * alpha_[i];
  // v = L^-1 k; variance = k(x, x) - v.v
  std::vector<double> v(n);
  double vv = 0;
  for (size_t i = 0; i < n; ++i) {
    double s = k[i];
    for (size_t j = 0; j < i; ++j) s -= chol_[i * n + j] * v[j];
    v[i] = s / chol_[i * n + i];
    vv += v[i] * v[i];
  }
  const double var = std::max(1.0 - vv, 1e-12);
  return {mean_ + scale_ * m, scale_ * std::sqrt(var)};
}

double GaussianProcess::expectedImprovement(const Point& x, double best, double xi) const {
  const Prediction p = predict(x);
  const double gain = (p.mean - best) / scale_ - xi;
  const double s = p.stddev / scale_;
  if (s <= 1e-12) return std::max(gain, 0.0);
  const double z = gain / s;
  return gain * normalCdf(z) + s * normalPdf(z);
}

Point gridPoint(size_t n, size_t perAxis, size_t dims) {
  Point p(dims);
  for (size_t d = 0; d < dims; ++d) {
    p[d] = static_cast<double>(n % perAxis) / static_cast<double>(perAxis - 1);
    n /= perAxis;
  }
  return p;
}

}  // namespace hvd::engine
