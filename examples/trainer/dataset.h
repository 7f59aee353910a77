// The trainer's synthetic classification data set and how it is cut into batches and shards.
//
// Every rank generates the whole data set from the same seed (it is small), shuffles it with
// the same per-epoch permutation, and takes its own rows of each global batch: with `ranks`
// ranks of `batch` rows each, global batch g covers positions [g*ranks*batch, (g+1)*ranks*batch)
// of the epoch's order and rank r takes [g*ranks*batch + r*batch, ... + batch). The union over
// the ranks is exactly the batch a single process with batch ranks*batch would take.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace hvd_train {

struct Dataset {
  int samples = 0;
  int features = 0;
  int classes = 0;
  std::vector<float> x;    // [samples, features], row-major
  std::vector<int32_t> y;  // [samples], 0..classes-1

  const float* row(size_t i) const { return x.data() + i * static_cast<size_t>(features); }
};

// Gaussian clusters: each class owns `clustersPerClass` centres drawn from N(0, spread^2) per
// feature; a sample picks a class and one of its centres uniformly and adds N(0, 1) noise per
// feature. Deterministic in `seed`.
Dataset makeClusters(int samples, int features, int classes, uint64_t seed,
                     int clustersPerClass = 2, double spread = 0.6);

// The order in which epoch `epoch` visits the samples: a permutation of 0..samples-1 that
// depends only on (seed, epoch).
std::vector<int32_t> epochOrder(int samples, uint64_t seed, int epoch);

// Whole global batches per epoch (the remainder is dropped, the same for every process count
// with the same global batch).
int stepsPerEpoch(int samples, int globalBatch);

// First position in the epoch order of rank `rank`'s rows of global batch `step`.
size_t shardBegin(int step, int rank, int ranks, int batch);

// Copies the samples at order[begin, begin + rows) into contiguous x [rows, features] and y.
void gatherRows(const Dataset& data, const std::vector<int32_t>& order, size_t begin, int rows,
                float* x, int32_t* y);

}  // namespace hvd_train
