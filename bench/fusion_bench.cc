// hvd-fusion-bench: one training step's gradient allreduces through hvd's engine, the workload
// tensor fusion exists for (bench/fusion.sh runs it beside Open MPI and torch.distributed).
//
//   hvdrun -np 4 -- hvd-fusion-bench [--params FILE] [--steps 20] [--warmup 3]
//                                    [--max-tensors N] [--op average|sum] [--one-buffer]
//
// The tensors are the float32 parameters listed in FILE (default: bench/resnet50_parameters.tsv,
// ResNet-50's 161 tensors, one "name<TAB>shape<TAB>elements" line each, '#' comments). A step
// submits one allreduceAsync per tensor, named by its parameter name, in reverse order (the
// order a backward pass produces gradients), then waits for every handle; its time runs from a
// barrier to the last wait, max over ranks. Fusion is the engine's: HVD_FUSION_THRESHOLD (bytes;
// 0 disables, default 128 MiB) reaches every rank through hvdrun's environment. The buffers are
// in place (input = output), as gradients are.
//
// --one-buffer is the ceiling of fusion: a step allreduces ONE tensor whose element count is the
// sum of all the tensors' counts, through the same engine call (one allreduceAsync, then its
// wait), with the same op, timing and checks. No fusion of separate tensors can beat one
// collective over one contiguous buffer of the same bytes, so fusion-off time / this time is
// the largest speed-up fusion could give on the machine (bench/fusion.sh's off/one column).
//
// Correctness is checked outside the timed steps, on one extra step before the warm-up and one
// after the timed steps: element i of tensor t on rank r is ((i*7 + t*3) % 17) + 2r - (n-1),
// small integers whose sum over ranks is n times the first term, so the average is that term
// exactly (and the sum n times it) however the engine divides. Every element is compared. With
// --one-buffer the single tensor is t = 0 and i runs over all its elements.
//
// Only rank 0 prints: a header, the per-step times, and one line for bench/fusion.sh
//   RESULT impl=hvd np=N tensors=T bytes=B steps=S median_ms=M min_ms=M max_ms=M wrong=W
// (impl=hvd-one and tensors=1 with --one-buffer).
// Exit status: 0 when every element was right, 1 when some were wrong, 2 for a usage error,
// 3 when hvd (or the process) failed.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "hvd/engine.hpp"
#include "hvd/error.hpp"
#include "hvd/hvd.hpp"
#include "hvd/types.hpp"

#ifndef HVD_FUSION_BENCH_PARAMS
#define HVD_FUSION_BENCH_PARAMS "resnet50_parameters.tsv"
#endif

namespace {

struct Options {
  std::string params = HVD_FUSION_BENCH_PARAMS;
  int steps = 20;
  int warmup = 3;
  int maxTensors = 0;  // 0: all
  hvd::ReduceOp op = hvd::ReduceOp::kAverage;
  bool oneBuffer = false;  // --one-buffer: all the elements as one tensor
};

struct Tensor {
  std::string name;
  hvd::Shape shape;
  int64_t elements = 0;
  std::vector<float> data;
};

// A command-line or parameter-file mistake: exit status 2.
struct UsageError {
  std::string message;
};

void printUsage(FILE* out) {
  std::fprintf(out,
               "usage: hvdrun -np N -- hvd-fusion-bench [--params FILE] [--steps S] "
               "[--warmup W]\n"
               "                                        [--max-tensors T] [--op average|sum] "
               "[--one-buffer]\n"
               "  --params FILE      tensors, one 'name<TAB>shape<TAB>elements' line each\n"
               "                     (default %s)\n"
               "  --steps S          timed steps (default 20)\n"
               "  --warmup W         untimed steps before them (default 3)\n"
               "  --max-tensors T    only the first T tensors of the file (default: all)\n"
               "  --op OP            average (default, as for gradients) or sum\n"
               "  --one-buffer       allreduce, per step, one tensor holding as many elements\n"
               "                     as all the tensors together (the ceiling of fusion: one\n"
               "                     collective over one contiguous buffer)\n",
               HVD_FUSION_BENCH_PARAMS);
}

int parseCount(const std::string& flag, const char* text, int min) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < min || v > 1000000) {
    throw UsageError{flag + " expects an integer >= " + std::to_string(min) + ", got '" + text +
                     "'"};
  }
  return static_cast<int>(v);
}

Options parseOptions(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      printUsage(stdout);
      std::exit(0);
    }
    if (a == "--one-buffer") {
      o.oneBuffer = true;
      continue;
    }
    if (i + 1 >= argc) throw UsageError{"unknown option or missing value: " + a};
    const char* v = argv[++i];
    if (a == "--params") {
      o.params = v;
    } else if (a == "--steps") {
      o.steps = parseCount(a, v, 1);
    } else if (a == "--warmup") {
      o.warmup = parseCount(a, v, 0);
    } else if (a == "--max-tensors") {
      o.maxTensors = parseCount(a, v, 1);
    } else if (a == "--op") {
      const std::string op = v;
      if (op == "average" || op == "avg") {
        o.op = hvd::ReduceOp::kAverage;
      } else if (op == "sum") {
        o.op = hvd::ReduceOp::kSum;
      } else {
        throw UsageError{"--op expects average or sum, got '" + op + "'"};
      }
    } else {
      throw UsageError{"unknown option " + a};
    }
  }
  return o;
}

// "64x3x7x7" -> {64, 3, 7, 7}.
bool parseShape(const std::string& text, hvd::Shape* shape) {
  shape->clear();
  std::stringstream ss(text);
  std::string dim;
  while (std::getline(ss, dim, 'x')) {
    char* end = nullptr;
    const long long v = std::strtoll(dim.c_str(), &end, 10);
    if (dim.empty() || *end != '\0' || v <= 0) return false;
    shape->push_back(v);
  }
  return !shape->empty();
}

std::vector<Tensor> readParams(const Options& o) {
  std::ifstream in(o.params);
  if (!in) throw UsageError{"cannot open parameter file " + o.params};
  std::vector<Tensor> tensors;
  std::string line;
  int lineNo = 0;
  while (std::getline(in, line)) {
    ++lineNo;
    if (line.empty() || line[0] == '#') continue;
    std::stringstream ss(line);
    Tensor t;
    std::string shape, elements;
    if (!std::getline(ss, t.name, '\t') || !std::getline(ss, shape, '\t') ||
        !std::getline(ss, elements, '\t') || !parseShape(shape, &t.shape)) {
      throw UsageError{o.params + ":" + std::to_string(lineNo) +
                       ": expected name<TAB>shape<TAB>elements"};
    }
    int64_t product = 1;
    for (int64_t d : t.shape) product *= d;
    t.elements = std::strtoll(elements.c_str(), nullptr, 10);
    if (t.elements != product) {
      throw UsageError{o.params + ":" + std::to_string(lineNo) + ": " + t.name + " has " +
                       elements + " elements, its shape " + shape + " makes " +
                       std::to_string(product)};
    }
    tensors.push_back(std::move(t));
    if (o.maxTensors > 0 && static_cast<int>(tensors.size()) == o.maxTensors) break;
  }
  if (tensors.empty()) throw UsageError{"no tensors in " + o.params};
  return tensors;
}

// --one-buffer: one tensor with as many elements as all of them (the data is allocated later).
Tensor oneBuffer(const std::vector<Tensor>& tensors) {
  Tensor one;
  one.name = "one_buffer";
  for (const Tensor& t : tensors) one.elements += t.elements;
  one.shape = {one.elements};
  return one;
}

// The check pattern's term that survives averaging (see the top of the file).
inline float baseValue(size_t t, int64_t i) { return static_cast<float>((i * 7 + t * 3) % 17); }

void fill(std::vector<Tensor>& tensors, int rank, int size) {
  const float offset = static_cast<float>(2 * rank - (size - 1));
  for (size_t t = 0; t < tensors.size(); ++t) {
    float* d = tensors[t].data.data();
    for (int64_t i = 0; i < tensors[t].elements; ++i) d[i] = baseValue(t, i) + offset;
  }
}

int64_t countWrong(const std::vector<Tensor>& tensors, hvd::ReduceOp op, int size) {
  const float scale = op == hvd::ReduceOp::kSum ? static_cast<float>(size) : 1.0f;
  int64_t wrong = 0;
  for (size_t t = 0; t < tensors.size(); ++t) {
    const float* d = tensors[t].data.data();
    int64_t bad = 0;
    for (int64_t i = 0; i < tensors[t].elements; ++i) bad += d[i] != baseValue(t, i) * scale;
    if (bad > 0 && hvd::rank() == 0) {
      std::fprintf(stderr, "hvd-fusion-bench: %s: %lld wrong elements on rank 0\n",
                   tensors[t].name.c_str(), static_cast<long long>(bad));
    }
    wrong += bad;
  }
  return wrong;
}

// One step: every tensor's allreduce submitted in reverse order, then all waited for. Returns
// this rank's time from the barrier to the last wait, in ms.
double step(std::vector<Tensor>& tensors, const hvd::OpOptions& options,
            std::vector<hvd::Handle>& handles) {
  hvd::barrier();
  const auto start = std::chrono::steady_clock::now();
  handles.clear();
  for (auto it = tensors.rbegin(); it != tensors.rend(); ++it) {
    handles.push_back(hvd::allreduceAsync(it->name, it->data.data(), it->data.data(), it->shape,
                                          hvd::DataType::kFloat32, options));
  }
  for (const hvd::Handle& h : handles) h.wait();
  const auto end = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::milli>(end - start).count();
}

const char* envOr(const char* name, const char* alias, const char* fallback) {
  if (const char* v = std::getenv(name)) return v;
  if (const char* v = std::getenv(alias)) return v;
  return fallback;
}

int run(const Options& o, std::vector<Tensor>& tensors, size_t fileTensors) {
  hvd::init();
  const int rank = hvd::rank();
  const int size = hvd::size();
  int64_t elements = 0;
  for (Tensor& t : tensors) {
    t.data.assign(static_cast<size_t>(t.elements), 0.0f);
    elements += t.elements;
  }
  const int64_t bytes = elements * static_cast<int64_t>(sizeof(float));
  if (rank == 0) {
    std::printf(
        "# hvd-fusion-bench: np %d, %zu tensors from %s%s, %lld float32 elements (%.1f MiB), "
        "op %s, %d warm-up + %d timed steps\n",
        size, fileTensors, o.params.c_str(), o.oneBuffer ? " as ONE buffer (--one-buffer)" : "",
        static_cast<long long>(elements), bytes / 1048576.0, hvd::reduceOpName(o.op), o.warmup,
        o.steps);
    std::printf("# HVD_FUSION_THRESHOLD=%s, transport %s\n",
                envOr("HVD_FUSION_THRESHOLD", "HOROVOD_FUSION_THRESHOLD", "(unset: default)"),
                hvd::transportDescription().c_str());
    std::fflush(stdout);
  }

  hvd::OpOptions options;
  options.op = o.op;
  std::vector<hvd::Handle> handles;
  handles.reserve(tensors.size());
  int64_t wrong = 0;

  fill(tensors, rank, size);
  step(tensors, options, handles);
  wrong += countWrong(tensors, o.op, size);

  std::vector<double> times;
  for (int s = 0; s < o.warmup + o.steps; ++s) {
    const double ms = step(tensors, options, handles);
    if (s >= o.warmup) times.push_back(ms);
  }

  fill(tensors, rank, size);
  step(tensors, options, handles);
  wrong += countWrong(tensors, o.op, size);

  // A step lasts as long as its slowest rank.
  hvd::AllreduceOptions maxOp;
  maxOp.op = hvd::ReduceOp::kMax;
  hvd::allreduce(times.data(), times.data(), times.size(), hvd::DataType::kFloat64, maxOp);
  hvd::allreduce(&wrong, &wrong, 1, hvd::DataType::kInt64);

  if (rank == 0) {
    std::printf("# step times (ms):");
    for (double t : times) std::printf(" %.3f", t);
    std::printf("\n");
    std::vector<double> sorted = times;
    std::sort(sorted.begin(), sorted.end());
    const size_t n = sorted.size();
    const double median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    std::printf(
        "RESULT impl=%s np=%d tensors=%zu bytes=%lld steps=%d median_ms=%.3f min_ms=%.3f "
        "max_ms=%.3f wrong=%lld\n",
        o.oneBuffer ? "hvd-one" : "hvd", size, tensors.size(), static_cast<long long>(bytes),
        o.steps, median, sorted.front(), sorted.back(), static_cast<long long>(wrong));
    std::fflush(stdout);
  }
  hvd::shutdown();
  return wrong == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::vector<Tensor> tensors;
  size_t fileTensors = 0;
  try {
    o = parseOptions(argc, argv);
    tensors = readParams(o);
    fileTensors = tensors.size();
    if (o.oneBuffer) tensors = {oneBuffer(tensors)};
  } catch (const UsageError& e) {
    // Every rank parses the same command line: only rank 0 (from the launcher's environment)
    // says what is wrong.
    const char* rank = std::getenv("HVD_RANK");
    if (rank == nullptr || std::strcmp(rank, "0") == 0) {
      std::fprintf(stderr, "hvd-fusion-bench: %s\n", e.message.c_str());
      printUsage(stderr);
    }
    return 2;
  }
  try {
    return run(o, tensors, fileTensors);
  } catch (const hvd::Error& e) {
    std::fprintf(stderr, "hvd-fusion-bench: %s error: %s\n", hvd::errorKindName(e.kind()),
                 e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hvd-fusion-bench: %s\n", e.what());
  }
  return 3;
}
