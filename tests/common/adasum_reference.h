// Adasum as the tests define it, independently of the runtime's code (collectives/adasum.cc):
// the pairwise rule on whole vectors, in long double, and the tree of collectives/adasum.h
// (the extra ranks folded into the first ones, then the balanced binary tree over ranks
// 0..2^k-1 in rank order) written as a plain recursion. Every pairwise result is rounded to
// the element type, as the runtime stores it; the runtime splits the sums into pieces and adds
// them in another order, so results agree within adasumTolerance(), not bit for bit.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "common/element.h"
#include "hvd/types.hpp"

namespace hvd::test {

// x as a buffer of `type` stores it.
inline double roundTo(DataType type, double x) {
  uint8_t bytes[8];
  storeElement(type, bytes, 0, x);
  return loadElement(type, bytes, 0);
}

// adasum(a, b) = (1 - a.b / 2|a|^2) a + (1 - a.b / 2|b|^2) b, a coefficient being 1 where its
// vector's squared norm is below 1e-8 (Horovod's rule for zero vectors).
inline std::vector<double> adasumPairReference(DataType type, const std::vector<double>& a,
                                               const std::vector<double>& b) {
  long double dot = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    dot += static_cast<long double>(a[i]) * b[i];
    aa += static_cast<long double>(a[i]) * a[i];
    bb += static_cast<long double>(b[i]) * b[i];
  }
  const long double ca = aa >= 1e-8L ? 1 - dot / (2 * aa) : 1;
  const long double cb = bb >= 1e-8L ? 1 - dot / (2 * bb) : 1;
  std::vector<double> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    out[i] = roundTo(type, static_cast<double>(ca * a[i] + cb * b[i]));
  }
  return out;
}

// The tree over leaves [lo, hi) (hi - lo a power of two): the lower half's result first.
inline std::vector<double> adasumSubtree(DataType type, const std::vector<std::vector<double>>& x,
                                         size_t lo, size_t hi) {
  if (hi - lo == 1) return x[lo];
  const size_t mid = lo + (hi - lo) / 2;
  return adasumPairReference(type, adasumSubtree(type, x, lo, mid),
                             adasumSubtree(type, x, mid, hi));
}

// The Adasum of one tensor over n ranks (inputs[r] is rank r's, already of `type`): with
// n = p + e (p the largest power of two <= n), leaf i is adasum(x_i, x_{p+i}) for i < e and x_i
// otherwise, and the result is the balanced tree over the p leaves.
inline std::vector<double> adasumTreeReference(DataType type,
                                               const std::vector<std::vector<double>>& inputs) {
  const size_t n = inputs.size();
  size_t p = 1;
  while (p * 2 <= n) p *= 2;
  std::vector<std::vector<double>> leaves(inputs.begin(), inputs.begin() + p);
  for (size_t i = 0; i + p < n; ++i)
    leaves[i] = adasumPairReference(type, inputs[i], inputs[p + i]);
  return adasumSubtree(type, leaves, 0, p);
}

// How far the runtime may be from the reference, relative to the largest magnitude involved:
// a few roundings of the type per tree level.
inline double adasumTolerance(DataType type) {
  switch (type) {
    case DataType::kFloat16:
      return 8 * std::ldexp(1.0, -11);
    case DataType::kBFloat16:
      return 8 * std::ldexp(1.0, -8);
    case DataType::kFloat32:
      return 8 * std::ldexp(1.0, -24);
    default:
      return 1e-12;
  }
}

// The largest |v| over vectors (the scale the tolerance applies to).
inline double largestMagnitude(const std::vector<std::vector<double>>& vectors) {
  double m = 0;
  for (const auto& v : vectors) {
    for (double x : v) m = std::max(m, std::fabs(x));
  }
  return m;
}

}  // namespace hvd::test
