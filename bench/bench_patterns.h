// hvd-bench's self-verifying data: exact input patterns, the results expected from them, and
// helpers that fill, poison and check buffers with them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "bench_options.h"

namespace hvd::bench {

inline constexpr int kPeriod = 17;  // the input pattern repeats every 17 elements
inline constexpr size_t kMaxElem = 8;

// One period (17 elements) of a buffer, as bytes of the element type.
struct Pattern {
  uint8_t bytes[kPeriod * kMaxElem];
};

// Period of rank r's input (also the expected output of non-reducing collectives).
Pattern inputPattern(const Options& o, int r, int salt);

// Period of the reduction over n ranks.
Pattern reducedPattern(const Options& o, int n, int salt);

// Fills count elements; element j gets the pattern's element of global index first + j.
void fill(uint8_t* buf, size_t count, size_t first, const Pattern& p, size_t es);

// Number of elements that differ (bit for bit) from the pattern, indexed as in fill().
long long countWrong(const uint8_t* buf, size_t count, size_t first, const Pattern& p, size_t es);

void poison(uint8_t* buf, size_t count, size_t es);

}  // namespace hvd::bench
