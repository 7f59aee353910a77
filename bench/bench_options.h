// hvd-bench's command line: the options, their parsing and the usage text.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>

#include "hvd/types.hpp"

namespace hvd::bench {

enum class Coll { kAllreduce, kAllgather, kBroadcast, kReducescatter, kAlltoall };

// Whether the collective reduces (allreduce, reducescatter), so that -o applies to it.
bool reduces(Coll c);
const char* collName(Coll c);

struct Options {
  Coll coll = Coll::kAllreduce;
  size_t minBytes = 8;
  size_t maxBytes = size_t{64} << 20;
  size_t factor = 2;
  int iters = 20;
  int warmup = 5;
  int check = 1;
  hvd::DataType type = hvd::DataType::kFloat32;
  hvd::ReduceOp op = hvd::ReduceOp::kSum;
  int root = 0;
  // Allreduce through the engine (named async ops, as a training step submits them) instead of
  // the blocking collectives; with processSets, in two process sets at once, the lower and the
  // upper half of the ranks (engine_bench.h).
  bool engine = false;
  bool processSets = false;
};

// A command-line mistake: printed as "hvd-bench: <message>" with a usage hint, exit status 2.
struct UsageError {
  std::string message;
};

void printUsage(FILE* out);

// "64", "8K", "256M", "1G", "4KiB", "16MB": binary multiples.
bool parseSize(const std::string& s, size_t* out);

// Parses argv; sets *help (and returns the defaults) on -h/--help. Throws UsageError.
Options parseOptions(int argc, char** argv, bool* help);

}  // namespace hvd::bench
