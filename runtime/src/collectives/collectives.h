// Collectives as free functions over a transport Context (cf. Gloo): each builds a Schedule of
// sends and receives on the context's links and runs it with the progress engine.
//
// Every rank of the context must call the same collective with matching arguments. Buffers may
// be the same pointer for input and output (in place). Results are bit-identical on all ranks:
// every output element is computed once, by one rank, in a fixed order, and copied to the rest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "hvd/hvd.hpp"
#include "hvd/types.hpp"
#include "transport/context.h"

namespace hvd::coll {

using transport::Context;

void allreduce(Context& ctx, const void* input, void* output, size_t count, DataType type,
               const AllreduceOptions& options = {});

// One part of a segmented allreduce: `count` elements read from `input`, results to `output`
// (the same pointer for in place).
struct AllreduceSegment {
  const void* input;
  void* output;
  size_t count;
};

// One allreduce over the concatenation of `segments`, without copying them together: the ring
// moves each chunk's parts straight from and to the segments (tensor fusion without a fusion
// buffer). Small totals, which take the direct algorithm, are packed into the workspace. Every
// rank passes the same segment counts in the same order.
void allreduceSegments(Context& ctx, const std::vector<AllreduceSegment>& segments, DataType type,
                       const AllreduceOptions& options = {});

void allgather(Context& ctx, const void* input, size_t count, void* output,
               const std::vector<size_t>& counts, DataType type,
               Algorithm algorithm = Algorithm::kAuto);

void broadcast(Context& ctx, void* buffer, size_t count, DataType type,
               const BroadcastOptions& options = {});

void reducescatter(Context& ctx, const void* input, void* output, size_t count, DataType type,
                   const ReducescatterOptions& options = {});

void alltoall(Context& ctx, const void* input, const std::vector<size_t>& sendCounts, void* output,
              const std::vector<size_t>& recvCounts, DataType type);

void barrier(Context& ctx);

std::vector<size_t> allgatherCounts(Context& ctx, size_t count);
std::vector<size_t> alltoallCounts(Context& ctx, const std::vector<size_t>& sendCounts);

// Rows per rank of a reducescatter: rows = count / rowElements, the first rows % size ranks
// get one extra row. Returns element counts.
std::vector<size_t> reducescatterCounts(size_t count, int size, size_t rowElements);

}  // namespace hvd::coll
