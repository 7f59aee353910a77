/* Size arguments of the benchmarks ("64", "8K", "256M", "1G": binary multiples; a trailing
 * "B" or "iB" is allowed). Shared by hvd-bench (C++) and mpi-bench (C), so both accept exactly
 * the same sizes. Returns 0 and stores the size, or -1 for text that is not a size. */
#ifndef HVD_BENCH_SIZE_PARSE_H_
#define HVD_BENCH_SIZE_PARSE_H_

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

static inline int hvd_bench_parse_size(const char* s, size_t* out) {
  if (s == NULL || s[0] < '0' || s[0] > '9') return -1;
  char* end = NULL;
  errno = 0;
  const unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || end == s) return -1;
  unsigned long long mult = 1;
  switch (*end) {
    case 'k':
    case 'K':
      mult = 1ULL << 10;
      ++end;
      break;
    case 'm':
    case 'M':
      mult = 1ULL << 20;
      ++end;
      break;
    case 'g':
    case 'G':
      mult = 1ULL << 30;
      ++end;
      break;
    default:
      break;
  }
  if (mult > 1 && *end == 'i') ++end;
  if (*end == 'B' || *end == 'b') ++end;
  if (*end != '\0' || v > SIZE_MAX / mult) return -1;
  *out = (size_t)(v * mult);
  return 0;
}

#endif /* HVD_BENCH_SIZE_PARSE_H_ */
