// mpi-bench: Open MPI allreduce peer benchmark for hvd-bench.
//
// Takes hvd-bench's allreduce flags and prints the same nccl-tests style table (rank 0 only), so
// bench/compare.sh can parse both the same way:
//
//   mpirun -np 2 mpi-bench -b 8 -e 256M -f 4 -n 20 -w 5 -c 1 -d float -o sum
//
// For each size it times MPI_Allreduce out-of-place (send -> recv) and in-place (MPI_IN_PLACE):
// -w warm-up calls, a barrier, then -n timed calls; the time is the average per call, max over
// ranks. With -c 1 each mode is then checked on a separate verification call (like nccl-tests,
// the check is outside the timed loop): inputs are exact by construction, element i of rank r in
// call `it` being ((i*7 + r*13 + it) % 17) (1 + that % 2 for prod, so products stay exact), the
// result buffer is poisoned beforehand, and #wrong is the number of wrong elements summed over
// ranks. The process exits 1 if any element was wrong.
//
// Buffers are allocated and touched once, at the largest size, before the size loop.
#define _GNU_SOURCE
#include <getopt.h>
#include <limits.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "size_parse.h"

enum { kPeriod = 17 };  // the input pattern repeats every 17 elements

typedef enum { K_F32, K_F64, K_I8, K_U8, K_I16, K_I32, K_I64 } Kind;

typedef struct {
  const char* name;    // canonical -d name, printed in the title line
  const char* alias;   // other accepted -d spelling (or NULL)
  const char* column;  // nccl-tests name, printed in the type column
  Kind kind;
  size_t size;
  MPI_Datatype mpi;
} TypeInfo;

typedef enum { OP_SUM, OP_PROD, OP_MIN, OP_MAX } OpKind;

typedef struct {
  const char* name;
  OpKind kind;
  MPI_Op mpi;
} OpInfo;

typedef struct {
  size_t min_bytes, max_bytes, factor;
  int iters, warmup, check;
  const TypeInfo* type;
  const OpInfo* op;
} Options;

static int g_rank = 0;

static const TypeInfo* find_type(const char* s) {
  // Built at run time: MPI_Datatype handles need not be constant expressions in every MPI.
  static TypeInfo types[7];
  types[0] = (TypeInfo){"float32", "float", "float", K_F32, sizeof(float), MPI_FLOAT};
  types[1] = (TypeInfo){"float64", "double", "double", K_F64, sizeof(double), MPI_DOUBLE};
  types[2] = (TypeInfo){"int8", NULL, "int8", K_I8, sizeof(int8_t), MPI_INT8_T};
  types[3] = (TypeInfo){"uint8", NULL, "uint8", K_U8, sizeof(uint8_t), MPI_UINT8_T};
  types[4] = (TypeInfo){"int32", "int", "int32", K_I32, sizeof(int32_t), MPI_INT32_T};
  types[5] = (TypeInfo){"int64", NULL, "int64", K_I64, sizeof(int64_t), MPI_INT64_T};
  types[6] = (TypeInfo){"int16", "short", "int16", K_I16, sizeof(int16_t), MPI_INT16_T};
  for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); ++i) {
    if (strcmp(s, types[i].name) == 0 || (types[i].alias && strcmp(s, types[i].alias) == 0)) {
      return &types[i];
    }
  }
  return NULL;
}

static const OpInfo* find_op(const char* s) {
  static OpInfo ops[4];
  ops[0] = (OpInfo){"sum", OP_SUM, MPI_SUM};
  ops[1] = (OpInfo){"prod", OP_PROD, MPI_PROD};
  ops[2] = (OpInfo){"min", OP_MIN, MPI_MIN};
  ops[3] = (OpInfo){"max", OP_MAX, MPI_MAX};
  for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); ++i) {
    if (strcmp(s, ops[i].name) == 0) return &ops[i];
  }
  return NULL;
}

// Sizes: see size_parse.h (shared with hvd-bench).
static int parse_size(const char* s, size_t* out) { return hvd_bench_parse_size(s, out); }

static int parse_int(const char* s, int min, int* out) {
  char* end = NULL;
  long v = strtol(s, &end, 10);
  if (end == s || *end != '\0' || v < min || v > INT_MAX) return -1;
  *out = (int)v;
  return 0;
}

static void usage(const char* argv0) {
  if (g_rank != 0) return;
  fprintf(stderr,
          "usage: %s [--coll allreduce] [-b minbytes] [-e maxbytes] [-f factor] [-n iters]\n"
          "          [-w warmup] [-c 0|1] [-d float|double|int8|uint8|int16|int32|int64]\n"
          "          [-o sum|prod|min|max]\n"
          "sizes take K/M/G suffixes (binary); defaults: -b 8 -e 64M -f 2 -n 20 -w 5 -c 1\n",
          argv0);
}

static int fail(const char* msg, const char* arg) {
  if (g_rank == 0) fprintf(stderr, "mpi-bench: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
  return -1;
}

static int parse_options(int argc, char** argv, Options* o) {
  o->min_bytes = 8;
  o->max_bytes = 64u << 20;
  o->factor = 2;
  o->iters = 20;
  o->warmup = 5;
  o->check = 1;
  o->type = find_type("float32");
  o->op = find_op("sum");
  static const struct option kLong[] = {
      {"coll", required_argument, NULL, 'C'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, "b:e:f:n:w:c:d:o:h", kLong, NULL)) != -1) {
    int v = 0;
    switch (c) {
      case 'C':
        if (strcmp(optarg, "allreduce") != 0)
          return fail("only --coll allreduce is supported", optarg);
        break;
      case 'b':
        if (parse_size(optarg, &o->min_bytes) != 0) return fail("bad -b", optarg);
        break;
      case 'e':
        if (parse_size(optarg, &o->max_bytes) != 0) return fail("bad -e", optarg);
        break;
      case 'f':
        if (parse_int(optarg, 2, &v) != 0) return fail("bad -f (an integer >= 2)", optarg);
        o->factor = (size_t)v;
        break;
      case 'n':
        if (parse_int(optarg, 1, &o->iters) != 0) return fail("bad -n (>= 1)", optarg);
        break;
      case 'w':
        if (parse_int(optarg, 0, &o->warmup) != 0) return fail("bad -w (>= 0)", optarg);
        break;
      case 'c':
        if (parse_int(optarg, 0, &o->check) != 0 || o->check > 1) return fail("bad -c", optarg);
        break;
      case 'd':
        if (!(o->type = find_type(optarg))) {
          return fail("unsupported -d (MPI has no half/bfloat16)", optarg);
        }
        break;
      case 'o':
        if (!(o->op = find_op(optarg))) return fail("unsupported -o (MPI has no avg)", optarg);
        break;
      case 'h':
      default:
        usage(argv[0]);
        return -1;
    }
  }
  if (optind != argc) return fail("unexpected argument", argv[optind]);
  if (o->min_bytes == 0 || o->min_bytes > o->max_bytes) return fail("need 0 < -b <= -e", NULL);
  if (o->max_bytes / o->type->size > INT_MAX) return fail("-e too large for an int count", NULL);
  return 0;
}

// The input value of element i (i % 17 == k) on rank r in call `it`, and the expected result.
static int64_t input_value(const Options* o, int k, int r, int it) {
  int64_t x = ((int64_t)k * 7 + (int64_t)r * 13 + it) % kPeriod;
  return o->op->kind == OP_PROD ? 1 + (x & 1) : x;
}

static int64_t expected_value(const Options* o, int k, int nranks, int it) {
  int64_t acc = input_value(o, k, 0, it);
  for (int r = 1; r < nranks; ++r) {
    int64_t v = input_value(o, k, r, it);
    switch (o->op->kind) {
      case OP_SUM:
        acc += v;
        break;
      case OP_PROD:
        acc *= v;
        break;  // at most 2^nranks
      case OP_MIN:
        acc = v < acc ? v : acc;
        break;
      case OP_MAX:
        acc = v > acc ? v : acc;
        break;
    }
  }
  return acc;
}

// Stores v as the element type (narrow integers wrap, as MPI's integer arithmetic does).
static void store(const TypeInfo* t, void* dst, int64_t v) {
  switch (t->kind) {
    case K_F32: {
      float x = (float)v;
      memcpy(dst, &x, sizeof(x));
      break;
    }
    case K_F64: {
      double x = (double)v;
      memcpy(dst, &x, sizeof(x));
      break;
    }
    case K_I8: {
      int8_t x = (int8_t)(uint8_t)v;
      memcpy(dst, &x, sizeof(x));
      break;
    }
    case K_U8: {
      uint8_t x = (uint8_t)v;
      memcpy(dst, &x, sizeof(x));
      break;
    }
    case K_I16: {
      int16_t x = (int16_t)(uint16_t)v;
      memcpy(dst, &x, sizeof(x));
      break;
    }
    case K_I32: {
      int32_t x = (int32_t)(uint32_t)v;
      memcpy(dst, &x, sizeof(x));
      break;
    }
    case K_I64: {
      memcpy(dst, &v, sizeof(v));
      break;
    }
  }
}

// One period of the input of `rank` (rank >= 0) or of the expected result (rank < 0).
static void make_pattern(const Options* o, int rank, int nranks, int it, char* pat) {
  for (int k = 0; k < kPeriod; ++k) {
    int64_t v = rank >= 0 ? input_value(o, k, rank, it) : expected_value(o, k, nranks, it);
    store(o->type, pat + (size_t)k * o->type->size, v);
  }
}

// Fills count elements with the periodic pattern, doubling the filled prefix with memcpy.
static void fill_periodic(char* buf, size_t count, size_t es, const char* pat) {
  size_t total = count * es, period = kPeriod * es;
  size_t filled = total < period ? total : period;
  memcpy(buf, pat, filled);
  while (filled < total) {  // filled is a whole number of periods here
    size_t n = filled < total - filled ? filled : total - filled;
    memcpy(buf + filled, buf, n);
    filled += n;
  }
}

// Counts elements that differ from the pattern (results are exact, so bytes must match).
static long long count_wrong(const char* buf, size_t count, size_t es, const char* pat) {
  size_t total = count * es, period = kPeriod * es;
  long long wrong = 0;
  for (size_t off = 0; off < total; off += period) {
    size_t n = total - off < period ? total - off : period;
    if (memcmp(buf + off, pat, n) == 0) continue;
    for (size_t e = 0; e < n; e += es) wrong += memcmp(buf + off + e, pat + e, es) != 0;
  }
  return wrong;
}

// Average microseconds per call on this rank; send == MPI_IN_PLACE for in-place.
static double time_allreduce(const Options* o, const void* send, void* recv, int count) {
  for (int i = 0; i < o->warmup; ++i) {
    MPI_Allreduce(send, recv, count, o->type->mpi, o->op->mpi, MPI_COMM_WORLD);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int i = 0; i < o->iters; ++i) {
    MPI_Allreduce(send, recv, count, o->type->mpi, o->op->mpi, MPI_COMM_WORLD);
  }
  return (MPI_Wtime() - t0) * 1e6 / o->iters;
}

static void* alloc_touched(size_t bytes) {
  void* p = NULL;
  if (posix_memalign(&p, 4096, bytes ? bytes : 1) != 0) return NULL;
  memset(p, 0, bytes);  // pre-fault every page before timing
  return p;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int nranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);

  Options o;
  if (parse_options(argc, argv, &o) != 0) {
    MPI_Finalize();
    return 2;
  }
  const size_t es = o.type->size;
  const size_t max_count = o.max_bytes / es;
  char* send = alloc_touched(max_count * es);
  char* recv = alloc_touched(max_count * es);
  if (!send || !recv) {
    fprintf(stderr, "mpi-bench: rank %d: cannot allocate 2 x %zu bytes\n", g_rank, o.max_bytes);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  char in_pat[kPeriod * sizeof(int64_t)], exp_pat[kPeriod * sizeof(int64_t)];

  if (g_rank == 0) {
    printf("# mpi-bench allreduce: np %d, dtype %s, op %s, iters %d, warmup %d\n", nranks,
           o.type->name, o.op->name, o.iters, o.warmup);
    printf("#\n");
    printf(
        "#                                                       out-of-place"
        "                       in-place\n");
    printf(
        "#       size         count      type   redop    root     time   algbw   busbw #wrong"
        "     time   algbw   busbw #wrong\n");
    printf(
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)       "
        "     (us)  (GB/s)  (GB/s)\n");
    fflush(stdout);
  }

  const double bus_factor = 2.0 * (nranks - 1) / nranks;
  long long total_wrong = 0;
  double bw_sum = 0;
  int bw_count = 0;
  for (size_t bytes = o.min_bytes; bytes <= o.max_bytes;) {
    const size_t count = bytes / es;
    if (count > 0) {
      const size_t size = count * es;
      double t[2];
      long long wrong[2] = {0, 0};

      // Out-of-place: timed on call 0's input, checked on call 1 into a poisoned buffer.
      make_pattern(&o, g_rank, nranks, 0, in_pat);
      fill_periodic(send, count, es, in_pat);
      t[0] = time_allreduce(&o, send, recv, (int)count);
      if (o.check) {
        make_pattern(&o, g_rank, nranks, 1, in_pat);
        fill_periodic(send, count, es, in_pat);
        memset(recv, 0xff, size);
        MPI_Allreduce(send, recv, (int)count, o.type->mpi, o.op->mpi, MPI_COMM_WORLD);
        make_pattern(&o, -1, nranks, 1, exp_pat);
        wrong[0] = count_wrong(recv, count, es, exp_pat);
      }

      // In-place on recv: timed on call 0's input (the values drift; only the time matters),
      // checked on call 2 from a fresh input.
      make_pattern(&o, g_rank, nranks, 0, in_pat);
      fill_periodic(recv, count, es, in_pat);
      t[1] = time_allreduce(&o, MPI_IN_PLACE, recv, (int)count);
      if (o.check) {
        make_pattern(&o, g_rank, nranks, 2, in_pat);
        fill_periodic(recv, count, es, in_pat);
        MPI_Allreduce(MPI_IN_PLACE, recv, (int)count, o.type->mpi, o.op->mpi, MPI_COMM_WORLD);
        make_pattern(&o, -1, nranks, 2, exp_pat);
        wrong[1] = count_wrong(recv, count, es, exp_pat);
      }

      MPI_Allreduce(MPI_IN_PLACE, t, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      MPI_Allreduce(MPI_IN_PLACE, wrong, 2, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
      total_wrong += wrong[0] + wrong[1];

      if (g_rank == 0) {
        printf("%12zu %14zu %9s %7s %7d", size, count, o.type->column, o.op->name, -1);
        for (int m = 0; m < 2; ++m) {
          double algbw = (double)size / t[m] / 1e3;  // bytes/us/1e3 = GB/s (1e9)
          double busbw = algbw * bus_factor;
          bw_sum += busbw;
          ++bw_count;
          printf(" %8.2f %7.2f %7.2f", t[m], algbw, busbw);
          if (o.check) {
            printf(" %6d", wrong[m] > INT_MAX ? INT_MAX : (int)wrong[m]);
          } else {
            printf(" %6s", "N/A");
          }
        }
        printf("\n");
        fflush(stdout);
      }
    }
    if (bytes > o.max_bytes / o.factor) break;  // the next size would overflow or pass -e
    bytes *= o.factor;
  }

  if (g_rank == 0) {
    printf("# Out of bounds values : %lld %s\n", total_wrong, total_wrong ? "FAILED" : "OK");
    printf("# Avg bus bandwidth    : %.3f\n", bw_count ? bw_sum / bw_count : 0.0);
    printf("#\n");
    fflush(stdout);
  }
  free(send);
  free(recv);
  MPI_Finalize();
  return total_wrong ? 1 : 0;
}
