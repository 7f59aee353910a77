#include "options.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace hvd_train {
namespace {

long long parseInt(const std::string& flag, const std::string& text, long long min, long long max) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || v < min || v > max) {
    throw std::invalid_argument(flag + " expects an integer in [" + std::to_string(min) + ", " +
                                std::to_string(max) + "], got '" + text + "'");
  }
  return v;
}

double parseDouble(const std::string& flag, const std::string& text, double min, double max) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno != 0 || !(v >= min && v <= max)) {
    throw std::invalid_argument(flag + " expects a number in [" + std::to_string(min) + ", " +
                                std::to_string(max) + "], got '" + text + "'");
  }
  return v;
}

}  // namespace

std::string usage() {
  return "usage: hvdrun -np N hvd-train [options]      (data-parallel, N ranks)\n"
         "       hvd-train --reference --np-equivalent N [options]   (one process, batch N*b)\n"
         "\n"
         "Trains a multi-layer perceptron on a synthetic Gaussian-cluster data set. Each rank\n"
         "takes its --batch rows of every global batch, allreduces (average) each gradient\n"
         "tensor as soon as the backward pass has it, and applies SGD; rank 0 prints loss,\n"
         "accuracy, time per epoch and the fraction of step time spent waiting for\n"
         "communication.\n"
         "\n"
         "  --epochs N          epochs (5)\n"
         "  --batch B           rows per rank and step (32)\n"
         "  --lr X              learning rate (0.05)\n"
         "  --momentum X        SGD momentum, 0 for plain SGD (0.9)\n"
         "  --samples N         samples in the data set (16384)\n"
         "  --seed S            seed of data, order and initial parameters (1); rank r\n"
         "                      initialises from S+r, the broadcast from rank 0 aligns them\n"
         "  --features N        input features (32)\n"
         "  --hidden N          width of each hidden layer (64)\n"
         "  --layers N          hidden layers (2)\n"
         "  --classes N         classes (10)\n"
         "  --activation A      hidden activation: relu or tanh (relu)\n"
         "  --max-steps N       stop after N steps in total (0: no limit)\n"
         "  --dump-params FILE  write the final parameters (raw float32, tensors fc1.weight,\n"
         "                      fc1.bias, fc2.weight, ...) from rank 0 or the reference\n"
         "  --reference         run in this process alone without libhvd's runtime\n"
         "  --np-equivalent N   with --reference: use a batch of N * --batch rows (1)\n"
         "  -h, --help          this text\n";
}

std::optional<Options> parseOptions(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::fputs(usage().c_str(), stdout);
      return std::nullopt;
    }
    if (arg == "--reference") {
      o.reference = true;
      continue;
    }
    std::string value;
    const size_t eq = arg.find('=');
    if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      throw std::invalid_argument("unknown option or missing value: '" + arg + "'");
    }
    constexpr long long kBig = 1ll << 30;
    if (arg == "--epochs") {
      o.epochs = static_cast<int>(parseInt(arg, value, 1, kBig));
    } else if (arg == "--batch") {
      o.batch = static_cast<int>(parseInt(arg, value, 1, kBig));
    } else if (arg == "--lr") {
      o.lr = parseDouble(arg, value, 0.0, 1e3);
    } else if (arg == "--momentum") {
      o.momentum = parseDouble(arg, value, 0.0, 0.999999);
    } else if (arg == "--samples") {
      o.samples = static_cast<int>(parseInt(arg, value, 1, kBig));
    } else if (arg == "--seed") {
      o.seed = static_cast<uint64_t>(parseInt(arg, value, 0, 1ll << 62));
    } else if (arg == "--features") {
      o.features = static_cast<int>(parseInt(arg, value, 1, 1 << 16));
    } else if (arg == "--hidden") {
      o.hidden = static_cast<int>(parseInt(arg, value, 1, 1 << 16));
    } else if (arg == "--layers") {
      o.layers = static_cast<int>(parseInt(arg, value, 0, 64));
    } else if (arg == "--classes") {
      o.classes = static_cast<int>(parseInt(arg, value, 2, 1 << 16));
    } else if (arg == "--activation") {
      if (value != "relu" && value != "tanh") {
        throw std::invalid_argument("--activation expects relu or tanh, got '" + value + "'");
      }
      o.activation = value;
    } else if (arg == "--max-steps") {
      o.maxSteps = parseInt(arg, value, 0, 1ll << 62);
    } else if (arg == "--dump-params") {
      if (value.empty()) throw std::invalid_argument("--dump-params expects a file name");
      o.dumpParams = value;
    } else if (arg == "--np-equivalent") {
      o.npEquivalent = static_cast<int>(parseInt(arg, value, 1, 1 << 20));
    } else {
      throw std::invalid_argument("unknown option '" + arg + "' (see --help)");
    }
  }
  if (o.npEquivalent != 1 && !o.reference) {
    throw std::invalid_argument("--np-equivalent only applies with --reference");
  }
  if (static_cast<long long>(o.batch) * o.npEquivalent > o.samples) {
    throw std::invalid_argument("the global batch (" +
                                std::to_string(static_cast<long long>(o.batch) * o.npEquivalent) +
                                " rows) exceeds --samples " + std::to_string(o.samples));
  }
  return o;
}

}  // namespace hvd_train
