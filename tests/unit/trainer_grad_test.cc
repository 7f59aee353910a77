// The trainer's math (examples/trainer): the MLP's backward pass against finite differences,
// the data-parallel identity it relies on (the mean of the shards' gradients is the gradient of
// the whole batch), the data set, the sharding, the optimizer and the command line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "dataset.h"
#include "mlp.h"
#include "options.h"
#include "rng.h"

namespace hvd_train {
namespace {

template <typename T>
struct Batch {
  std::vector<T> x;
  std::vector<int32_t> y;
};

template <typename T>
Batch<T> randomBatch(int rows, int features, int classes, uint64_t seed) {
  Batch<T> b;
  Rng rng(seed);
  for (int i = 0; i < rows * features; ++i) b.x.push_back(static_cast<T>(rng.normal()));
  for (int i = 0; i < rows; ++i) b.y.push_back(static_cast<int32_t>(rng.below(classes)));
  return b;
}

TEST(TrainerMlp, TensorsAreNamedAndShapedPerLayer) {
  Mlp<float> m({32, 64, 64, 10});
  ASSERT_EQ(m.numTensors(), 6u);
  EXPECT_EQ(m.tensorName(0), "fc1.weight");
  EXPECT_EQ(m.tensorName(5), "fc3.bias");
  EXPECT_EQ(m.tensorShape(0), (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(m.tensorShape(3), (std::vector<int64_t>{64}));
  EXPECT_EQ(m.numParameters(), 32u * 64 + 64 + 64 * 64 + 64 + 64 * 10 + 10);
  EXPECT_THROW(Mlp<float>({5}), std::invalid_argument);
  EXPECT_THROW(Mlp<float>({5, 0, 3}), std::invalid_argument);
}

TEST(TrainerMlp, ZeroModelLossIsLogClasses) {
  Mlp<double> m({4, 3, 5});  // all parameters zero: uniform softmax
  const auto b = randomBatch<double>(7, 4, 5, 11);
  EXPECT_NEAR(m.forward(b.x.data(), b.y.data(), 7), std::log(5.0), 1e-12);
}

// Central differences in double: every parameter of a 3-layer model, for each activation.
class TrainerMlpGradient : public ::testing::TestWithParam<Activation> {};

TEST_P(TrainerMlpGradient, BackwardMatchesFiniteDifferences) {
  Mlp<double> m({5, 7, 6, 4}, GetParam());
  m.init(42);
  for (size_t t = 1; t < m.numTensors(); t += 2) {  // non-zero biases exercise their gradient
    for (size_t i = 0; i < m.param(t).size(); ++i) m.param(t)[i] = 0.05 * ((i % 5) - 2.0);
  }
  const int rows = 6;
  const auto b = randomBatch<double>(rows, 5, 4, 7);
  m.forward(b.x.data(), b.y.data(), rows);
  m.backward();
  std::vector<std::vector<double>> analytic;
  for (size_t t = 0; t < m.numTensors(); ++t) analytic.push_back(m.grad(t));

  const double eps = 1e-6;
  size_t checked = 0;
  for (size_t t = 0; t < m.numTensors(); ++t) {
    for (size_t i = 0; i < m.param(t).size(); ++i) {
      const double saved = m.param(t)[i];
      m.param(t)[i] = saved + eps;
      const double up = m.forward(b.x.data(), b.y.data(), rows);
      m.param(t)[i] = saved - eps;
      const double down = m.forward(b.x.data(), b.y.data(), rows);
      m.param(t)[i] = saved;
      const double numeric = (up - down) / (2 * eps);
      EXPECT_NEAR(analytic[t][i], numeric, 1e-7 + 1e-5 * std::fabs(numeric))
          << m.tensorName(t) << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_EQ(checked, m.numParameters());
}

INSTANTIATE_TEST_SUITE_P(Activations, TrainerMlpGradient,
                         ::testing::Values(Activation::kRelu, Activation::kTanh),
                         [](const auto& info) { return std::string(activationName(info.param)); });

TEST(TrainerMlp, ActivationNames) {
  EXPECT_EQ(parseActivation("tanh"), Activation::kTanh);
  EXPECT_EQ(parseActivation("relu"), Activation::kRelu);
  EXPECT_STREQ(activationName(Activation::kTanh), "tanh");
  EXPECT_THROW(parseActivation("gelu"), std::invalid_argument);
}

// The float model (what the trainer runs) computes the same gradients as the double one.
TEST_P(TrainerMlpGradient, FloatGradientsAgreeWithDouble) {
  const std::vector<int> widths{32, 64, 64, 10};
  Mlp<float> f(widths, GetParam());
  Mlp<double> d(widths, GetParam());
  f.init(3);
  for (size_t t = 0; t < f.numTensors(); ++t) {
    d.param(t).assign(f.param(t).begin(), f.param(t).end());
  }
  const auto bd = randomBatch<double>(16, 32, 10, 5);
  std::vector<float> xf(bd.x.begin(), bd.x.end());
  std::vector<double> xd(xf.begin(), xf.end());  // identical inputs
  EXPECT_NEAR(f.forward(xf.data(), bd.y.data(), 16), d.forward(xd.data(), bd.y.data(), 16), 1e-5);
  f.backward();
  d.backward();
  for (size_t t = 0; t < f.numTensors(); ++t) {
    double scale = 0;
    for (double g : d.grad(t)) scale = std::max(scale, std::fabs(g));
    for (size_t i = 0; i < f.grad(t).size(); ++i) {
      ASSERT_NEAR(f.grad(t)[i], d.grad(t)[i], 1e-5 * std::max(1e-3, scale))
          << f.tensorName(t) << "[" << i << "]";
    }
  }
}

// ready(l) comes last layer first, and the tensors it hands over are already final: the
// trainer may allreduce them in place while the backward pass continues.
TEST(TrainerMlp, ReadyCallbackOrderAndFinalGradients) {
  Mlp<float> m({8, 16, 16, 16, 3});
  m.init(9);
  const auto b = randomBatch<float>(10, 8, 3, 4);
  m.forward(b.x.data(), b.y.data(), 10);
  std::vector<int> order;
  std::vector<std::vector<float>> snapshot(m.numTensors());
  m.backward([&](int layer) {
    order.push_back(layer);
    snapshot[2 * layer] = m.grad(2 * layer);
    snapshot[2 * layer + 1] = m.grad(2 * layer + 1);
    // Scribble over what the caller now owns: later layers must not read it.
    std::fill(m.grad(2 * layer).begin(), m.grad(2 * layer).end(), 1e30f);
  });
  EXPECT_EQ(order, (std::vector<int>{3, 2, 1, 0}));
  Mlp<float> again = m;
  again.forward(b.x.data(), b.y.data(), 10);
  again.backward();
  for (size_t t = 0; t < m.numTensors(); ++t) EXPECT_EQ(snapshot[t], again.grad(t)) << t;
}

// The identity data parallelism rests on: with equal shards, the mean over ranks of each
// shard's mean-loss gradient equals the gradient of the whole batch's mean loss.
TEST(TrainerDataParallel, MeanOfShardGradientsIsBatchGradient) {
  const int ranks = 4, batch = 8, features = 6, classes = 3;
  Mlp<double> m({features, 10, classes});
  m.init(21);
  const auto whole = randomBatch<double>(ranks * batch, features, classes, 8);
  m.forward(whole.x.data(), whole.y.data(), ranks * batch);
  m.backward();
  std::vector<std::vector<double>> full;
  for (size_t t = 0; t < m.numTensors(); ++t) full.push_back(m.grad(t));

  std::vector<std::vector<double>> mean(m.numTensors());
  for (size_t t = 0; t < m.numTensors(); ++t) mean[t].assign(full[t].size(), 0.0);
  for (int r = 0; r < ranks; ++r) {
    m.forward(whole.x.data() + r * batch * features, whole.y.data() + r * batch, batch);
    m.backward();
    for (size_t t = 0; t < m.numTensors(); ++t) {
      for (size_t i = 0; i < full[t].size(); ++i) mean[t][i] += m.grad(t)[i] / ranks;
    }
  }
  for (size_t t = 0; t < m.numTensors(); ++t) {
    for (size_t i = 0; i < full[t].size(); ++i) EXPECT_NEAR(mean[t][i], full[t][i], 1e-14);
  }
}

TEST(TrainerDataParallel, ShardsTileTheGlobalBatch) {
  const int samples = 1000, batch = 7;
  for (int ranks : {1, 2, 3, 4}) {
    const int steps = stepsPerEpoch(samples, ranks * batch);
    EXPECT_EQ(steps, samples / (ranks * batch));
    std::vector<size_t> positions;
    for (int s = 0; s < steps; ++s) {
      for (int r = 0; r < ranks; ++r) {
        const size_t begin = shardBegin(s, r, ranks, batch);
        for (int i = 0; i < batch; ++i) positions.push_back(begin + i);
      }
      // The global batch s of np ranks is positions [s*np*b, (s+1)*np*b): what one process
      // with batch np*b takes at step s.
      for (int i = 0; i < ranks * batch; ++i) {
        ASSERT_EQ(positions[static_cast<size_t>(s) * ranks * batch + i],
                  static_cast<size_t>(s) * ranks * batch + i);
      }
    }
  }
}

TEST(TrainerData, DeterministicClustersAndPermutations) {
  const Dataset a = makeClusters(500, 8, 4, 17);
  const Dataset b = makeClusters(500, 8, 4, 17);
  const Dataset c = makeClusters(500, 8, 4, 18);
  EXPECT_EQ(a.x, b.x);
  EXPECT_EQ(a.y, b.y);
  EXPECT_NE(a.x, c.x);
  std::set<int32_t> labels(a.y.begin(), a.y.end());
  EXPECT_EQ(labels, (std::set<int32_t>{0, 1, 2, 3}));

  const auto o1 = epochOrder(500, 17, 0);
  auto sorted = o1;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int32_t> iota(500);
  std::iota(iota.begin(), iota.end(), 0);
  EXPECT_EQ(sorted, iota);
  EXPECT_EQ(o1, epochOrder(500, 17, 0));
  EXPECT_NE(o1, epochOrder(500, 17, 1));

  std::vector<float> x(3 * 8);
  std::vector<int32_t> y(3);
  gatherRows(a, o1, 10, 3, x.data(), y.data());
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(y[i], a.y[o1[10 + i]]);
    EXPECT_EQ(x[i * 8 + 5], a.row(o1[10 + i])[5]);
  }
}

// The whole single-process training path: the loss falls and the model learns the clusters.
TEST(TrainerTraining, LossFallsOnTheSyntheticData) {
  const Dataset data = makeClusters(4096, 32, 10, 1);
  Mlp<float> m({32, 64, 64, 10});
  m.init(1);
  Sgd<float> sgd(0.05, 0.9);
  const int batch = 64;
  std::vector<float> x(batch * 32);
  std::vector<int32_t> y(batch);
  std::vector<double> epochLoss;
  for (int epoch = 0; epoch < 4; ++epoch) {
    const auto order = epochOrder(data.samples, 1, epoch);
    double sum = 0;
    const int steps = stepsPerEpoch(data.samples, batch);
    for (int s = 0; s < steps; ++s) {
      gatherRows(data, order, shardBegin(s, 0, 1, batch), batch, x.data(), y.data());
      sum += m.forward(x.data(), y.data(), batch);
      m.backward();
      sgd.step(m);
    }
    epochLoss.push_back(sum / steps);
  }
  EXPECT_LT(epochLoss.back(), 0.7 * epochLoss.front());
  const auto predicted = m.predict(data.x.data(), data.samples);
  int hits = 0;
  for (int i = 0; i < data.samples; ++i) hits += predicted[i] == data.y[i];
  EXPECT_GT(hits, data.samples / 2);
}

TEST(TrainerSgd, MomentumMatchesTheFormula) {
  Mlp<double> m({1, 1});
  m.param(0) = {1.0};
  m.param(1) = {0.0};
  Sgd<double> sgd(0.1, 0.5);
  m.grad(0) = {2.0};
  m.grad(1) = {0.0};
  sgd.step(m);  // v = 2, p = 1 - 0.2
  EXPECT_DOUBLE_EQ(m.param(0)[0], 0.8);
  sgd.step(m);  // v = 0.5*2 + 2 = 3, p = 0.8 - 0.3
  EXPECT_DOUBLE_EQ(m.param(0)[0], 0.5);
}

TEST(TrainerParams, SaveAndLoadRoundTrip) {
  Mlp<float> m({3, 4, 2});
  m.init(5);
  const std::string path =
      ::testing::TempDir() + "trainer_params_" + std::to_string(::getpid()) + ".bin";
  saveParameters(m, path);
  const std::vector<float> back = loadParameters(path);
  std::vector<float> expected;
  for (size_t t = 0; t < m.numTensors(); ++t) {
    expected.insert(expected.end(), m.param(t).begin(), m.param(t).end());
  }
  EXPECT_EQ(back, expected);
  std::remove(path.c_str());
  EXPECT_THROW(loadParameters(path), std::runtime_error);
}

std::optional<Options> parse(std::vector<std::string> args) {
  args.insert(args.begin(), "hvd-train");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return parseOptions(static_cast<int>(argv.size()), argv.data());
}

TEST(TrainerOptions, ParsesAndRejects) {
  const auto o = parse({"--epochs", "3", "--batch=16", "--lr", "0.1", "--reference",
                        "--np-equivalent", "4", "--dump-params", "p.bin", "--hidden", "8"});
  ASSERT_TRUE(o);
  EXPECT_EQ(o->epochs, 3);
  EXPECT_EQ(o->batch, 16);
  EXPECT_DOUBLE_EQ(o->lr, 0.1);
  EXPECT_TRUE(o->reference);
  EXPECT_EQ(o->npEquivalent, 4);
  EXPECT_EQ(o->dumpParams, "p.bin");
  EXPECT_EQ(o->hidden, 8);
  EXPECT_THROW(parse({"--epochs", "0"}), std::invalid_argument);
  EXPECT_THROW(parse({"--batch", "x"}), std::invalid_argument);
  EXPECT_THROW(parse({"--frobnicate", "1"}), std::invalid_argument);
  EXPECT_THROW(parse({"--epochs"}), std::invalid_argument);
  EXPECT_THROW(parse({"--np-equivalent", "2"}), std::invalid_argument);  // needs --reference
  EXPECT_THROW(parse({"--samples", "10", "--batch", "11"}), std::invalid_argument);
  EXPECT_THROW(parse({"--activation", "gelu"}), std::invalid_argument);
  EXPECT_EQ(parse({"--activation", "tanh"})->activation, "tanh");
}

}  // namespace
}  // namespace hvd_train
