// Adasum, adaptive summation (Maheswaran et al., "Adaptive Summation for Gradient Descent";
// Horovod's hvd.Adasum): a reduction that adds orthogonal gradients and averages parallel ones.
//
// The pairwise rule, per tensor (each tensor of a call is its own vector):
//   adasum(a, b) = (1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b
// It is symmetric but not associative, so the result depends on the tree that combines the
// ranks' vectors; adasumAllreduce fixes that tree (see adasum.cc):
//  * n = 2^k + e ranks: extra rank 2^k + i first sends its vector to rank i, which keeps
//    adasum(x_i, x_{2^k+i});
//  * the first 2^k ranks then combine by recursive halving: at distance d = 1, 2, ..., 2^(k-1)
//    the blocks of d ranks pair up, lower block first, adasum(lower, upper), so the tree is the
//    balanced binary tree over ranks 0..2^k-1 in rank order (vector halving, distance
//    doubling: Horovod's VHDD);
//  * the result goes back to the extra ranks.
// Dot products and squared norms are accumulated in float64 (float16/bfloat16 elements are
// widened through float32); the scaled add runs in float64 for float32/float64 and in float32
// for float16/bfloat16, rounded once per element. A squared norm below kAdasumZeroNormSq counts
// as zero: its coefficient is 1 (Horovod's rule), so adasum(a, 0) = a.
#pragma once

#include <cstddef>
#include <vector>

#include "collectives/collectives.h"
#include "hvd/types.hpp"

namespace hvd::coll {

inline constexpr double kAdasumZeroNormSq = 1e-8;

// The three sums the rule needs, over some elements of a and b.
struct AdasumSums {
  double dot = 0;  // a.b
  double aa = 0;   // |a|^2
  double bb = 0;   // |b|^2
};

// The coefficients of a and b in adasum(a, b), from the sums over the whole vectors.
struct AdasumCoefficients {
  double a = 1;
  double b = 1;
};

// float16, bfloat16, float32 and float64: the types Adasum reduces.
bool adasumSupports(DataType type);

AdasumSums adasumSums(DataType type, const void* a, const void* b, size_t count);
AdasumCoefficients adasumCoefficients(const AdasumSums& sums);
// a[i] = ca * a[i] + cb * b[i] for `count` elements (a and b do not overlap).
void adasumScaledAdd(DataType type, void* a, const void* b, size_t count,
                     const AdasumCoefficients& c);
// a = adasum(a, b), one vector of `count` elements.
void adasumPair(DataType type, void* a, const void* b, size_t count);

// The collective (allreduce with ReduceOp::kAdasum): every segment is one tensor, reduced as its
// own vector; `count` is their total. Agrees with the peers first, like every collective. Every
// element's result is computed by one rank and copied to the others, and the scalars each rank
// uses are the same bits on all ranks that share them, so results are bit-identical everywhere.
void adasumAllreduce(Context& ctx, const std::vector<AllreduceSegment>& segments, size_t count,
                     DataType type);

}  // namespace hvd::coll
