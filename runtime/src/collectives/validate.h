// Argument checks shared by the collectives, and the context's reusable schedule.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "hvd/error.hpp"
#include "hvd/types.hpp"
#include "transport/context.h"
#include "transport/progress.h"

namespace hvd::coll {

// Throws InvalidArgumentError when a buffer is null for a non-empty operation, the type is not
// a DataType, or the byte size overflows.
void validateBuffers(const char* op, const void* input, const void* output, size_t count,
                     DataType type);
// Throws InvalidArgumentError for a value outside ReduceOp, and for kAdasum, which combines
// whole vectors and so is an allreduce op only (validateAllreduceOp).
void validateOp(const char* op, ReduceOp reduceOp);
// An allreduce's op: any ReduceOp, kAdasum on floating-point types only.
void validateAllreduceOp(const char* op, ReduceOp reduceOp, DataType type);
void validateRank(const char* op, const char* what, int rank, int size);

// "<op>: <what> has N entries for SIZE ranks" unless `counts` has one entry per rank.
void validateCountsPerRank(const char* op, const char* what, const std::vector<size_t>& counts,
                           int size);

// An allgather's counts (one per rank, this rank's equal to `count`) and buffers; returns the
// total element count.
size_t validateAllgather(const void* input, size_t count, const void* output,
                         const std::vector<size_t>& counts, DataType type, int rank, int size);

// An alltoall's counts (one per rank each, what this rank sends itself equal to what it
// expects) and buffers; returns the send and receive totals.
std::pair<size_t, size_t> validateAlltoall(const void* input, const std::vector<size_t>& sendCounts,
                                           const void* output,
                                           const std::vector<size_t>& recvCounts, DataType type,
                                           int rank, int size);

// The schedule object a context reuses for every collective (capacity is kept between calls).
transport::Schedule& scheduleOf(transport::Context& ctx);

}  // namespace hvd::coll
