// mpi-fusion-bench: hvd-fusion-bench's step through Open MPI, one MPI_Allreduce per tensor — the
// peer bench/fusion.sh runs beside hvd.
//
//   mpirun -np 4 mpi-fusion-bench [--params FILE] [--steps 20] [--warmup 3] [--max-tensors N]
//                                 [--op average|sum]
//
// Same tensors, options, step, check and output as hvd-fusion-bench (see bench/fusion_bench.cc):
// a step is a barrier, then for every tensor in reverse order an in-place MPI_Allreduce(SUM)
// followed, for the average, by the division by the rank count (what a framework without
// fused averaging does with a gradient); its time is max over ranks. Inputs are
// ((i*7 + t*3) % 17) + 2r - (n-1), so the average is exact; every element is checked on one
// untimed step before the warm-up and one after the timed steps. Rank 0 prints
//   RESULT impl=mpi np=N tensors=T bytes=B steps=S median_ms=M min_ms=M max_ms=M wrong=W
// Exit status: 0 when every element was right, 1 when some were wrong, 2 for a usage error.
#define _GNU_SOURCE
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef HVD_FUSION_BENCH_PARAMS
#define HVD_FUSION_BENCH_PARAMS "resnet50_parameters.tsv"
#endif

typedef struct {
  char name[256];
  long long elements;
  float* data;
} Tensor;

typedef struct {
  const char* params;
  int steps, warmup, max_tensors, average;
} Options;

static int g_rank = 0;

static void usage(FILE* out) {
  if (g_rank != 0) return;
  fprintf(out,
          "usage: mpirun -np N mpi-fusion-bench [--params FILE] [--steps S] [--warmup W]\n"
          "                                     [--max-tensors T] [--op average|sum]\n"
          "  (default params: %s; 20 steps, 3 warm-up, all tensors, average)\n",
          HVD_FUSION_BENCH_PARAMS);
}

static int usage_error(const char* what, const char* arg) {
  if (g_rank == 0)
    fprintf(stderr, "mpi-fusion-bench: %s%s%s\n", what, arg ? " " : "", arg ? arg : "");
  usage(stderr);
  return -1;
}

static int parse_count(const char* flag, const char* text, int min, int* out) {
  char* end = NULL;
  const long v = strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < min || v > 1000000) {
    if (g_rank == 0) {
      fprintf(stderr, "mpi-fusion-bench: %s expects an integer >= %d, got '%s'\n", flag, min, text);
    }
    return -1;
  }
  *out = (int)v;
  return 0;
}

static int parse_options(int argc, char** argv, Options* o) {
  o->params = HVD_FUSION_BENCH_PARAMS;
  o->steps = 20;
  o->warmup = 3;
  o->max_tensors = 0;
  o->average = 1;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      return 1;
    }
    if (i + 1 >= argc) return usage_error("unknown option or missing value:", a);
    const char* v = argv[++i];
    int rc = 0;
    if (strcmp(a, "--params") == 0) {
      o->params = v;
    } else if (strcmp(a, "--steps") == 0) {
      rc = parse_count(a, v, 1, &o->steps);
    } else if (strcmp(a, "--warmup") == 0) {
      rc = parse_count(a, v, 0, &o->warmup);
    } else if (strcmp(a, "--max-tensors") == 0) {
      rc = parse_count(a, v, 1, &o->max_tensors);
    } else if (strcmp(a, "--op") == 0) {
      if (strcmp(v, "average") == 0 || strcmp(v, "avg") == 0) {
        o->average = 1;
      } else if (strcmp(v, "sum") == 0) {
        o->average = 0;
      } else {
        return usage_error("--op expects average or sum, got", v);
      }
    } else {
      return usage_error("unknown option", a);
    }
    if (rc != 0) return -1;
  }
  return 0;
}

// Reads "name<TAB>shape<TAB>elements" lines ('#' comments); checks elements against the shape.
static Tensor* read_params(const Options* o, int* count) {
  FILE* f = fopen(o->params, "r");
  if (f == NULL) {
    if (g_rank == 0)
      fprintf(stderr, "mpi-fusion-bench: cannot open parameter file %s\n", o->params);
    return NULL;
  }
  Tensor* tensors = NULL;
  int n = 0, cap = 0, line_no = 0;
  char line[1024];
  while (fgets(line, sizeof line, f) != NULL) {
    ++line_no;
    if (line[0] == '#' || line[0] == '\n') continue;
    char* save = NULL;
    const char* name = strtok_r(line, "\t", &save);
    char* shape = strtok_r(NULL, "\t", &save);
    const char* elements = strtok_r(NULL, "\t\n", &save);
    long long product = 1;
    int ok = name != NULL && shape != NULL && elements != NULL && strlen(name) < 256;
    for (char* dim = ok ? strtok_r(shape, "x", &save) : NULL; ok && dim != NULL;
         dim = strtok_r(NULL, "x", &save)) {
      product *= atoll(dim);
    }
    if (!ok || product <= 0 || atoll(elements) != product) {
      if (g_rank == 0) {
        fprintf(stderr, "mpi-fusion-bench: %s:%d: expected name<TAB>shape<TAB>elements\n",
                o->params, line_no);
      }
      fclose(f);
      free(tensors);
      return NULL;
    }
    if (n == cap) {
      cap = cap ? 2 * cap : 256;
      Tensor* grown = realloc(tensors, (size_t)cap * sizeof(Tensor));
      if (grown == NULL) abort();
      tensors = grown;
    }
    snprintf(tensors[n].name, sizeof tensors[n].name, "%s", name);
    tensors[n].elements = product;
    tensors[n].data = NULL;
    ++n;
    if (o->max_tensors > 0 && n == o->max_tensors) break;
  }
  fclose(f);
  if (n == 0) {
    if (g_rank == 0) fprintf(stderr, "mpi-fusion-bench: no tensors in %s\n", o->params);
    free(tensors);
    return NULL;
  }
  *count = n;
  return tensors;
}

static float base_value(long long t, long long i) { return (float)((i * 7 + t * 3) % 17); }

static void fill(Tensor* tensors, int n, int rank, int size) {
  const float offset = (float)(2 * rank - (size - 1));
  for (int t = 0; t < n; ++t) {
    for (long long i = 0; i < tensors[t].elements; ++i) {
      tensors[t].data[i] = base_value(t, i) + offset;
    }
  }
}

static long long count_wrong(const Tensor* tensors, int n, int average, int size) {
  const float scale = average ? 1.0f : (float)size;
  long long wrong = 0;
  for (int t = 0; t < n; ++t) {
    long long bad = 0;
    for (long long i = 0; i < tensors[t].elements; ++i) {
      bad += tensors[t].data[i] != base_value(t, i) * scale;
    }
    if (bad > 0 && g_rank == 0) {
      fprintf(stderr, "mpi-fusion-bench: %s: %lld wrong elements on rank 0\n", tensors[t].name,
              bad);
    }
    wrong += bad;
  }
  return wrong;
}

// One step; returns this rank's time from the barrier to the last tensor's average, in ms.
static double step(Tensor* tensors, int n, int average, int size) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  const float divisor = (float)size;
  for (int t = n - 1; t >= 0; --t) {
    MPI_Allreduce(MPI_IN_PLACE, tensors[t].data, (int)tensors[t].elements, MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
    if (average) {
      float* d = tensors[t].data;
      for (long long i = 0; i < tensors[t].elements; ++i) d[i] /= divisor;
    }
  }
  return (MPI_Wtime() - start) * 1e3;
}

static int cmp_double(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  Options o;
  const int parsed = parse_options(argc, argv, &o);
  int n = 0;
  Tensor* tensors = parsed == 0 ? read_params(&o, &n) : NULL;
  if (tensors == NULL) {
    MPI_Finalize();
    return parsed == 1 ? 0 : 2;
  }
  long long elements = 0;
  for (int t = 0; t < n; ++t) {
    tensors[t].data = malloc((size_t)tensors[t].elements * sizeof(float));
    if (tensors[t].data == NULL) abort();
    elements += tensors[t].elements;
  }
  const long long bytes = elements * (long long)sizeof(float);
  if (g_rank == 0) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(version, &len);
    char* nl = strchr(version, '\n');
    if (nl) *nl = '\0';
    printf(
        "# mpi-fusion-bench: np %d, %d tensors from %s, %lld float32 elements (%.1f MiB), "
        "op %s, %d warm-up + %d timed steps\n# %s\n",
        size, n, o.params, elements, bytes / 1048576.0, o.average ? "average" : "sum", o.warmup,
        o.steps, version);
    fflush(stdout);
  }

  long long wrong = 0;
  fill(tensors, n, g_rank, size);
  step(tensors, n, o.average, size);
  wrong += count_wrong(tensors, n, o.average, size);

  double* times = calloc((size_t)o.steps, sizeof(double));
  if (times == NULL) abort();
  for (int s = 0; s < o.warmup + o.steps; ++s) {
    const double ms = step(tensors, n, o.average, size);
    if (s >= o.warmup) times[s - o.warmup] = ms;
  }

  fill(tensors, n, g_rank, size);
  step(tensors, n, o.average, size);
  wrong += count_wrong(tensors, n, o.average, size);

  // A step lasts as long as its slowest rank.
  MPI_Allreduce(MPI_IN_PLACE, times, o.steps, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (g_rank == 0) {
    printf("# step times (ms):");
    for (int s = 0; s < o.steps; ++s) printf(" %.3f", times[s]);
    printf("\n");
    qsort(times, (size_t)o.steps, sizeof(double), cmp_double);
    const int k = o.steps;
    const double median = k % 2 ? times[k / 2] : (times[k / 2 - 1] + times[k / 2]) / 2;
    printf(
        "RESULT impl=mpi np=%d tensors=%d bytes=%lld steps=%d median_ms=%.3f min_ms=%.3f "
        "max_ms=%.3f wrong=%lld\n",
        size, n, bytes, o.steps, median, times[0], times[k - 1], wrong);
    fflush(stdout);
  }
  free(times);
  for (int t = 0; t < n; ++t) free(tensors[t].data);
  free(tensors);
  MPI_Finalize();
  return wrong == 0 ? 0 : 1;
}
