#include "dataset.h"

#include <cstring>
#include <stdexcept>
#include <utility>

#include "rng.h"

namespace hvd_train {

Dataset makeClusters(int samples, int features, int classes, uint64_t seed, int clustersPerClass,
                     double spread) {
  if (samples <= 0 || features <= 0 || classes <= 1 || clustersPerClass <= 0) {
    throw std::invalid_argument(
        "makeClusters: samples, features, clusters must be positive and "
        "classes at least 2");
  }
  Dataset d;
  d.samples = samples;
  d.features = features;
  d.classes = classes;
  const int centres = classes * clustersPerClass;
  std::vector<float> centre(static_cast<size_t>(centres) * features);
  Rng centreRng(mixSeed(seed, 1));
  for (float& c : centre) c = static_cast<float>(spread * centreRng.normal());

  d.x.resize(static_cast<size_t>(samples) * features);
  d.y.resize(samples);
  Rng sampleRng(mixSeed(seed, 2));
  for (int i = 0; i < samples; ++i) {
    const int label = static_cast<int>(sampleRng.below(classes));
    const int cluster = static_cast<int>(sampleRng.below(clustersPerClass));
    const float* c =
        centre.data() + static_cast<size_t>(label * clustersPerClass + cluster) * features;
    float* x = d.x.data() + static_cast<size_t>(i) * features;
    for (int f = 0; f < features; ++f) x[f] = c[f] + static_cast<float>(sampleRng.normal());
    d.y[i] = label;
  }
  return d;
}

std::vector<int32_t> epochOrder(int samples, uint64_t seed, int epoch) {
  std::vector<int32_t> order(samples);
  for (int i = 0; i < samples; ++i) order[i] = i;
  Rng rng(mixSeed(seed, 1000 + static_cast<uint64_t>(epoch)));
  for (int i = samples - 1; i > 0; --i) {  // Fisher-Yates
    std::swap(order[i], order[rng.below(static_cast<uint64_t>(i) + 1)]);
  }
  return order;
}

int stepsPerEpoch(int samples, int globalBatch) {
  return globalBatch > 0 ? samples / globalBatch : 0;
}

size_t shardBegin(int step, int rank, int ranks, int batch) {
  return (static_cast<size_t>(step) * ranks + rank) * batch;
}

void gatherRows(const Dataset& data, const std::vector<int32_t>& order, size_t begin, int rows,
                float* x, int32_t* y) {
  const size_t rowBytes = sizeof(float) * data.features;
  for (int i = 0; i < rows; ++i) {
    const int32_t sample = order.at(begin + i);
    std::memcpy(x + static_cast<size_t>(i) * data.features, data.row(sample), rowBytes);
    y[i] = data.y[sample];
  }
}

}  // namespace hvd_train
