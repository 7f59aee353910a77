// hvd-bench --engine / --process-sets: allreduce through the engine (hvd/engine.hpp), one named
// op per call waited on at once, as a training step's gradients are. With --process-sets the
// ranks form two process sets (hvd/process_sets.hpp), the lower and the upper half, added in
// dynamic mode, and both halves time the same sizes at the same moment (every size starts after
// a barrier of the whole job), so each set's row shows what it gets while the other one runs.
// The inputs are the patterns of bench_patterns.h by each rank's place in its set, checked bit
// for bit against the set's reduction with -c 1.
#pragma once

#include "bench_options.h"

namespace hvd::bench {

// After hvd::init(); returns 0 when every element was right, 1 otherwise. Throws UsageError.
int runEngineBenchmark(const Options& o);

}  // namespace hvd::bench
