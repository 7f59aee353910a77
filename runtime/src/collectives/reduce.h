// Element-wise reduction kernels used by every collective.
//
// Two forms, so the compiler can vectorise both without runtime alias checks:
//   reduceInto(acc, in):       acc[i] = acc[i] op in[i]   (acc and in never overlap)
//   reduceTo(out, a, b):       out[i] = a[i] op b[i]      (out, a and b never overlap)
// float16 and bfloat16 are computed in float32 and rounded once per call. kAverage reduces
// as kSum; finishAverage() divides by the number of ranks at the end (integers truncate).
#pragma once

#include <cstddef>

#include "hvd/types.hpp"

namespace hvd::coll {

void reduceInto(ReduceOp op, DataType type, void* acc, const void* in, size_t count);
void reduceTo(ReduceOp op, DataType type, void* out, const void* a, const void* b, size_t count);

// memcpy with non-temporal stores: for results written once and not read again soon, it skips
// the read-for-ownership of every destination line, a third of the memory traffic of a copy
// that does not fit in cache. Callers issue streamingFence() before the data is handed over.
void copyStreaming(void* dst, const void* src, size_t bytes);
void streamingFence();

// Divides `count` elements in place by `divisor` (for kAverage after a sum).
void finishAverage(DataType type, void* data, size_t count, int divisor);

}  // namespace hvd::coll
