// hvd-op-latency: what one tiny named allreduce costs through hvd's engine from C++, the
// reference that bench/torch_step.sh holds hvd.torch's Python submit against (the same
// measurement in Python is bench/torch_step.py latency).
//
//   hvdrun -np N -- hvd-op-latency [--ops B (64)] [--rounds R (30)] [--warmup W (3)]
//                                  [--elements E (1)]
//
// Each round, on float32 tensors of E elements, in place, op average:
//   seq     B ops one after the other: allreduceAsync("lat.<i>") then wait(). Per op: the round
//           trip through the engine (its negotiation cycle, HVD_CYCLE_TIME, included).
//   submit  after a barrier, B ops "batch.<i>" submitted back to back: the caller's time per
//           allreduceAsync call.
//   wait    once every handle polls done (not timed), wait() on each: the caller's time per
//           wait of a finished op.
// A figure is the median over the R rounds (after W untimed ones) of a round's time / B, in
// microseconds, rank 0's. submit + wait is what the caller's thread spends per op beyond the
// engine's own work; the Python binding's cost is its excess over these. After the last round
// every tensor is checked: element values are 2r - (N-1) + 5, whose average is 5 exactly.
//
// Rank 0 prints one line:
//   RESULT impl=cpp np=N ops=B elements=E seq_us=S submit_us=U wait_us=W caller_us=U+W wrong=X
// Exit status: 0, 1 when an element was wrong, 2 for a usage error, 3 when hvd failed.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "hvd/engine.hpp"
#include "hvd/error.hpp"
#include "hvd/hvd.hpp"
#include "hvd/types.hpp"

namespace {

struct Options {
  int ops = 64;
  int rounds = 30;
  int warmup = 3;
  int elements = 1;
};

using Clock = std::chrono::steady_clock;

double microseconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::micro>(to - from).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

bool parseInt(const char* text, int min, int* out) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < min || v > 1000000) return false;
  *out = static_cast<int>(v);
  return true;
}

int parseOptions(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::printf(
          "usage: hvdrun -np N -- hvd-op-latency [--ops B] [--rounds R] [--warmup W] "
          "[--elements E]\n");
      std::exit(0);
    }
    int* target = a == "--ops"        ? &o->ops
                  : a == "--rounds"   ? &o->rounds
                  : a == "--warmup"   ? &o->warmup
                  : a == "--elements" ? &o->elements
                                      : nullptr;
    const int min = a == "--warmup" ? 0 : 1;
    if (target == nullptr || i + 1 >= argc || !parseInt(argv[++i], min, target)) {
      std::fprintf(stderr, "hvd-op-latency: bad option or value: %s\n", a.c_str());
      return 2;
    }
  }
  return 0;
}

int run(const Options& o) {
  hvd::init();
  const int rank = hvd::rank();
  const int size = hvd::size();
  const float value = static_cast<float>(2 * rank - (size - 1) + 5);
  const hvd::Shape shape = {o.elements};
  std::vector<std::vector<float>> tensors(static_cast<size_t>(o.ops),
                                          std::vector<float>(static_cast<size_t>(o.elements)));
  std::vector<std::string> seqNames, batchNames;
  for (int i = 0; i < o.ops; ++i) {
    seqNames.push_back("lat." + std::to_string(i));
    batchNames.push_back("batch." + std::to_string(i));
  }
  std::vector<hvd::Handle> handles(static_cast<size_t>(o.ops));
  std::vector<double> seq, submit, wait;

  for (int round = 0; round < o.warmup + o.rounds; ++round) {
    for (auto& t : tensors) std::fill(t.begin(), t.end(), value);
    hvd::barrier();
    const auto s0 = Clock::now();
    for (int i = 0; i < o.ops; ++i) {
      float* data = tensors[static_cast<size_t>(i)].data();
      hvd::allreduceAsync(seqNames[static_cast<size_t>(i)], data, data, shape,
                          hvd::DataType::kFloat32)
          .wait();
    }
    const auto s1 = Clock::now();

    for (auto& t : tensors) std::fill(t.begin(), t.end(), value);
    hvd::barrier();
    const auto b0 = Clock::now();
    for (int i = 0; i < o.ops; ++i) {
      float* data = tensors[static_cast<size_t>(i)].data();
      handles[static_cast<size_t>(i)] = hvd::allreduceAsync(
          batchNames[static_cast<size_t>(i)], data, data, shape, hvd::DataType::kFloat32);
    }
    const auto b1 = Clock::now();
    for (const hvd::Handle& h : handles) {
      while (!h.poll()) {
      }
    }
    const auto w0 = Clock::now();
    for (const hvd::Handle& h : handles) h.wait();
    const auto w1 = Clock::now();
    if (round >= o.warmup) {
      seq.push_back(microseconds(s0, s1) / o.ops);
      submit.push_back(microseconds(b0, b1) / o.ops);
      wait.push_back(microseconds(w0, w1) / o.ops);
    }
  }

  int64_t wrong = 0;
  for (const auto& t : tensors) {
    for (float v : t) wrong += v != 5.0f;
  }
  hvd::allreduce(&wrong, &wrong, 1, hvd::DataType::kInt64);  // a sum
  if (rank == 0) {
    const double u = median(submit), w = median(wait);
    std::printf(
        "RESULT impl=cpp np=%d ops=%d elements=%d seq_us=%.2f submit_us=%.2f wait_us=%.2f "
        "caller_us=%.2f wrong=%lld\n",
        size, o.ops, o.elements, median(seq), u, w, u + w, static_cast<long long>(wrong));
    std::fflush(stdout);
  }
  hvd::shutdown();
  return wrong == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (const int rc = parseOptions(argc, argv, &o); rc != 0) return rc;
  try {
    return run(o);
  } catch (const hvd::Error& e) {
    std::fprintf(stderr, "hvd-op-latency: %s error: %s\n", hvd::errorKindName(e.kind()), e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hvd-op-latency: %s\n", e.what());
  }
  return 3;
}
