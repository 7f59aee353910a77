// hvd-train: a data-parallel training program on libhvd's engine.
//
//   hvdrun -np 4 hvd-train --epochs 5 --batch 32
//   hvd-train --reference --np-equivalent 4 --epochs 5 --batch 32   (the same run, one process)
//
// Every rank builds the same synthetic data set, starts from rank 0's parameters (broadcast),
// trains on its shard of each global batch, and averages every gradient tensor across ranks
// through one named allreduceAsync per tensor, submitted from the backward pass as soon as
// that layer's gradient is ready (last layer first), so communication overlaps the rest of the
// backward pass. The optimizer step waits for all of them. Rank 0 prints per epoch the loss,
// accuracy, wall time and the fraction of step time spent in Handle::wait.
#include <chrono>
#include <cstdio>
#include <exception>
#include <hvd/engine.hpp>
#include <hvd/hvd.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "dataset.h"
#include "mlp.h"
#include "options.h"

namespace {

using hvd_train::Mlp;
using hvd_train::Options;
using Clock = std::chrono::steady_clock;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

std::vector<int> layerWidths(const Options& o) {
  std::vector<int> widths{o.features};
  for (int l = 0; l < o.layers; ++l) widths.push_back(o.hidden);
  widths.push_back(o.classes);
  return widths;
}

std::string describe(const std::vector<int>& widths) {
  std::string s;
  for (size_t i = 0; i < widths.size(); ++i) s += (i ? "-" : "") + std::to_string(widths[i]);
  return s;
}

// Waits for every handle, returning the seconds spent blocked; rethrows the first error.
double waitAll(std::vector<hvd::Handle>& handles) {
  const auto start = Clock::now();
  for (const hvd::Handle& h : handles) h.wait();
  handles.clear();
  return seconds(Clock::now() - start);
}

int run(const Options& o) {
  const bool distributed = !o.reference;
  if (distributed) hvd::init();
  const int rank = distributed ? hvd::rank() : 0;
  const int ranks = distributed ? hvd::size() : o.npEquivalent;
  // Rows this process computes per step, and the rows of one global batch.
  const int localBatch = distributed ? o.batch : o.batch * o.npEquivalent;
  const int globalBatch = o.batch * ranks;
  const int steps = hvd_train::stepsPerEpoch(o.samples, globalBatch);
  if (steps == 0) {
    throw std::invalid_argument("the global batch (" + std::to_string(globalBatch) +
                                " rows) exceeds --samples " + std::to_string(o.samples));
  }

  const hvd_train::Dataset data = hvd_train::makeClusters(o.samples, o.features, o.classes, o.seed);
  Mlp<float> model(layerWidths(o), hvd_train::parseActivation(o.activation));
  model.init(o.seed + static_cast<uint64_t>(rank));  // differs per rank until the broadcast
  hvd_train::Sgd<float> sgd(o.lr, o.momentum);

  if (rank == 0) {
    std::printf(
        "hvd-train: %s, MLP %s %s (%zu parameters in %zu tensors), %d samples, "
        "batch %d x %d = %d, %d steps/epoch, lr %g, momentum %g%s\n",
        distributed ? (std::to_string(ranks) + " ranks").c_str()
                    : ("reference (1 process for np " + std::to_string(ranks) + ")").c_str(),
        describe(model.widths()).c_str(), o.activation.c_str(), model.numParameters(),
        model.numTensors(), o.samples, ranks, o.batch, globalBatch, steps, o.lr, o.momentum,
        distributed ? (", transport " + hvd::transportDescription()).c_str() : "");
    std::fflush(stdout);
  }

  std::vector<hvd::Handle> handles;
  if (distributed) {  // every rank starts from rank 0's parameters
    for (size_t t = 0; t < model.numTensors(); ++t) {
      handles.push_back(hvd::broadcastAsync("init." + model.tensorName(t), model.param(t).data(),
                                            model.tensorShape(t), hvd::DataType::kFloat32, 0));
    }
    waitAll(handles);
  }

  std::vector<float> x(static_cast<size_t>(localBatch) * o.features);
  std::vector<int32_t> y(localBatch);
  const auto submitLayer = [&](int layer) {
    for (size_t t : {static_cast<size_t>(2 * layer), static_cast<size_t>(2 * layer + 1)}) {
      handles.push_back(hvd::allreduceAsync(model.tensorName(t), model.grad(t).data(),
                                            model.grad(t).data(), model.tensorShape(t),
                                            hvd::DataType::kFloat32));  // average
    }
  };

  int64_t stepsDone = 0;
  double totalStep = 0, totalWait = 0, totalEpoch = 0;
  for (int epoch = 0; epoch < o.epochs; ++epoch) {
    const auto epochStart = Clock::now();
    const std::vector<int32_t> order = hvd_train::epochOrder(o.samples, o.seed, epoch);
    // loss sum (over steps of this process's mean loss), correct rows, rows, wait s, step s
    double m[5] = {0, 0, 0, 0, 0};
    int step = 0;
    for (; step < steps && (o.maxSteps == 0 || stepsDone < o.maxSteps); ++step, ++stepsDone) {
      const auto stepStart = Clock::now();
      const size_t begin = distributed ? hvd_train::shardBegin(step, rank, ranks, o.batch)
                                       : static_cast<size_t>(step) * globalBatch;
      hvd_train::gatherRows(data, order, begin, localBatch, x.data(), y.data());
      int correct = 0;
      m[0] += model.forward(x.data(), y.data(), localBatch, &correct);
      if (distributed) {
        model.backward(submitLayer);
        m[3] += waitAll(handles);
      } else {
        model.backward();
      }
      sgd.step(model);
      m[1] += correct;
      m[2] += localBatch;
      m[4] += seconds(Clock::now() - stepStart);
    }
    if (step == 0) break;
    const double stepsRun = step;
    if (distributed) {
      hvd::OpOptions sum;
      sum.op = hvd::ReduceOp::kSum;
      handles.push_back(
          hvd::allreduceAsync("epoch.metrics", m, m, {5}, hvd::DataType::kFloat64, sum));
      waitAll(handles);
    }
    const double epochSeconds = seconds(Clock::now() - epochStart);
    totalEpoch += epochSeconds;
    totalStep += m[4];
    totalWait += m[3];
    if (rank == 0) {
      // The mean over the epoch's steps of the global batch's mean loss (each rank's shard
      // has the same number of rows, so the global mean is the mean over ranks).
      std::printf("epoch %3d  loss %.6f  accuracy %6.2f%%  time %.3f s  comm %5.1f%%%s\n",
                  epoch + 1, m[0] / (stepsRun * (distributed ? ranks : 1)), 100.0 * m[1] / m[2],
                  epochSeconds, m[4] > 0 ? 100.0 * m[3] / m[4] : 0.0,
                  step < steps ? "  (stopped by --max-steps)" : "");
      std::fflush(stdout);
    }
  }

  if (rank == 0) {
    const std::vector<int32_t> predicted = model.predict(data.x.data(), data.samples);
    int hits = 0;
    for (int i = 0; i < data.samples; ++i) hits += predicted[i] == data.y[i];
    std::printf(
        "done: %lld steps, %.3f s training, comm %.1f%% of step time (mean over ranks), "
        "final accuracy %.2f%% on all %d samples\n",
        static_cast<long long>(stepsDone), totalEpoch,
        totalStep > 0 ? 100.0 * totalWait / totalStep : 0.0, 100.0 * hits / data.samples,
        data.samples);
    if (!o.dumpParams.empty()) {
      hvd_train::saveParameters(model, o.dumpParams);
      std::printf("parameters written to %s\n", o.dumpParams.c_str());
    }
    std::fflush(stdout);
  }
  if (distributed) hvd::shutdown();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  try {
    const auto parsed = hvd_train::parseOptions(argc, argv);
    if (!parsed) return 0;
    options = *parsed;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hvd-train: %s\n", e.what());
    return 2;
  }
  try {
    return run(options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hvd-train: %s\n", e.what());
    return 1;
  }
}
