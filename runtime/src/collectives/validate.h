// Argument checks shared by the collectives, and the context's reusable schedule.
#pragma once

#include <cstddef>
#include <string>

#include "hvd/error.hpp"
#include "hvd/types.hpp"
#include "transport/context.h"
#include "transport/progress.h"

namespace hvd::coll {

// Throws InvalidArgumentError when a buffer is null for a non-empty operation, the type is not
// a DataType, or the byte size overflows.
void validateBuffers(const char* op, const void* input, const void* output, size_t count,
                     DataType type);
void validateOp(const char* op, ReduceOp reduceOp);
void validateRank(const char* op, const char* what, int rank, int size);

// The schedule object a context reuses for every collective (capacity is kept between calls).
transport::Schedule& scheduleOf(transport::Context& ctx);

}  // namespace hvd::coll
