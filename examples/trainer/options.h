// hvd-train's command line (plain argv parsing: the example depends on libhvd only).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace hvd_train {

struct Options {
  int epochs = 5;
  int batch = 32;  // rows per rank and step
  double lr = 0.05;
  double momentum = 0.9;
  int samples = 16384;
  uint64_t seed = 1;
  int features = 32;
  int hidden = 64;  // width of each hidden layer
  int layers = 2;   // hidden layers
  int classes = 10;
  std::string activation = "relu";  // or "tanh"
  std::string dumpParams;           // empty: none
  bool reference = false;           // one process, no hvd::init, batch npEquivalent * batch
  int npEquivalent = 1;
  int64_t maxSteps = 0;  // 0: no limit; otherwise stop after this many steps in total
};

// The text of --help.
std::string usage();

// Parses argv. Returns the options, or std::nullopt after printing the help (exit 0);
// throws std::invalid_argument naming the bad argument (exit 2).
std::optional<Options> parseOptions(int argc, char** argv);

}  // namespace hvd_train
