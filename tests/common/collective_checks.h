// The collective correctness matrix, written once against coll::HostCollectives so the same
// checks run with ranks as threads (unit tests), as processes (mp tests through the worker),
// and over either CPU backend (hvd's ring over a transport Context, or MPI).
//
// Inputs are small integers, exact in every data type, chosen per (rank, element, salt); the
// expected result is computed locally and compared bit for bit. After each operation every rank
// hashes its result and the hashes are allgathered: all ranks must agree byte for byte.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collectives/host_collectives.h"
#include "hvd/types.hpp"
#include "transport/context.h"

namespace hvd::test {

struct CheckReport {
  int64_t checks = 0;
  int64_t failures = 0;
  std::vector<std::string> messages;  // the first few failures
  void fail(const std::string& message);
  bool ok() const { return failures == 0 && checks > 0; }
  std::string summary() const;
};

// Counts of the matrix for `size` ranks: 0, 1, 2, 3, size-1, size+1, 1023 and 4099 (a prime
// above the 4 KiB piece size the checks configure, so rings run several pipelined pieces).
std::vector<size_t> matrixCounts(int size);

// Runs every collective over every data type, op, count, in place and out of place, ring and
// direct algorithms. On the ring backend, sets small piece and message thresholds on its
// context for the duration (MPI ignores the algorithm hints).
void checkMatrix(coll::HostCollectives& collectives, CheckReport& report);
void checkMatrix(transport::Context& ctx, CheckReport& report);  // over RingCollectives(ctx)

// Allreduce alone, every data type with two ops (so every op over three or four types), ring
// and direct, in and out of place, at counts 1, size + 1 and 4099: 18 allreduces, cheap enough
// for hundreds of ranks on a few cores.
void checkAllreduceMatrix(coll::HostCollectives& collectives, CheckReport& report);

// `iterations` rounds of every collective with iteration-dependent inputs (stale buffers from
// an earlier round show up as wrong values).
void checkIterations(coll::HostCollectives& collectives, CheckReport& report, int iterations);
void checkIterations(transport::Context& ctx, CheckReport& report, int iterations);

// Expected value helpers, exposed for tests of the helpers themselves.
int64_t inputValue(DataType type, ReduceOp op, int rank, size_t index, int salt);
void storeValue(DataType type, void* base, size_t index, double value);
// Writes the expected allreduce result of element `index` over `size` ranks of inputValue()
// inputs, exactly as the runtime computes it (averages divided as it divides).
void storeExpected(DataType type, ReduceOp op, void* base, size_t index, int size, int salt);

}  // namespace hvd::test
