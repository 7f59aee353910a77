// hvd-engine-worker: a real libhvd process exercising the engine through the public API
// (hvd/engine.hpp), for the multi-process tests.
//   engine-worker mixed   ~60 async ops of every kind, shuffled per rank, from two threads;
//                         then grouped ops, a barrier, join, and a blocking allreduce
//   engine-worker stall   rank 2 never submits 'w' (HVD_STALL_* set by the test): every rank
//                         waits on a pending op until the stall shutdown fails it
//   engine-worker die     rank 1 exits abruptly after init; rank 0's pending op must fail
//   engine-worker autotune STEPS   a synthetic gradient pattern (24 tensors of 256 B to 512 KiB,
//                         submitted in backward order, then waited on) for STEPS steps, every
//                         sum checked; run with HVD_AUTOTUNE=1 by the test
//   engine-worker straggler MS STEPS   the last rank sleeps MS before each step's 8 allreduces
// Exit codes: 0 success, 1 wrong values, 10 PeerError, 11 TimeoutError, 12 other hvd::Error.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "hvd/engine.hpp"
#include "hvd/hvd.hpp"
#include "worker_exit.h"

namespace {

using hvd::test::exitCodeFor;

float value(int rank, int op, size_t i) { return static_cast<float>((rank * 5 + op + i) % 7); }

struct Op {
  int index;
  std::vector<float> in, out;
  std::vector<int32_t> ints;
  hvd::Handle handle;
};

// Submits op `k` of the mixed workload.
void submit(Op& op, int rank, int size) {
  const std::string name = "mp." + std::to_string(op.index);
  const size_t n = 1 + (op.index * 131) % 5000;
  switch (op.index % 4) {
    case 0:  // allreduce sum float32
      op.handle = hvd::allreduceAsync(name, op.in.data(), op.out.data(), {static_cast<int64_t>(n)},
                                      hvd::DataType::kFloat32, {hvd::ReduceOp::kSum});
      break;
    case 1:  // allreduce sum int32, in place
      op.handle =
          hvd::allreduceAsync(name, op.ints.data(), op.ints.data(), {static_cast<int64_t>(n)},
                              hvd::DataType::kInt32, {hvd::ReduceOp::kSum});
      break;
    case 2:  // allgather with rank-dependent rows
      op.handle = hvd::allgatherAsync(name, op.in.data(), {static_cast<int64_t>(1 + rank)},
                                      hvd::DataType::kFloat32);
      break;
    case 3:  // broadcast
      op.handle = hvd::broadcastAsync(name, op.out.data(), {static_cast<int64_t>(n)},
                                      hvd::DataType::kFloat32, op.index % size);
      break;
  }
}

bool check(const Op& op, int rank, int size) {
  const size_t n = 1 + (op.index * 131) % 5000;
  switch (op.index % 4) {
    case 0:
      for (size_t i = 0; i < n; ++i) {
        float want = 0;
        for (int r = 0; r < size; ++r) want += value(r, op.index, i);
        if (op.out[i] != want) return false;
      }
      return true;
    case 1:
      for (size_t i = 0; i < n; ++i) {
        int32_t want = 0;
        for (int r = 0; r < size; ++r) want += static_cast<int32_t>(value(r, op.index, i));
        if (op.ints[i] != want) return false;
      }
      return true;
    case 2: {
      const auto& out = op.handle.output();
      std::vector<float> got(out.size() / sizeof(float));
      std::copy(out.begin(), out.end(), reinterpret_cast<uint8_t*>(got.data()));
      size_t at = 0;
      for (int r = 0; r < size; ++r) {
        for (int i = 0; i < 1 + r; ++i) {
          if (at >= got.size() || got[at++] != value(r, op.index, i)) return false;
        }
      }
      return at == got.size();
    }
    case 3:
      for (size_t i = 0; i < n; ++i) {
        if (op.out[i] != value(op.index % size, op.index, i)) return false;
      }
      return true;
  }
  (void)rank;
  return false;
}

int runMixed() {
  hvd::init();
  const int rank = hvd::rank();
  const int size = hvd::size();
  std::vector<Op> ops(60);
  for (int k = 0; k < 60; ++k) {
    Op& op = ops[k];
    op.index = k;
    const size_t n = 1 + (k * 131) % 5000;
    op.in.resize(n);
    op.ints.resize(n);
    for (size_t i = 0; i < n; ++i) {
      op.in[i] = value(rank, k, i);
      op.ints[i] = static_cast<int32_t>(value(rank, k, i));
    }
    op.out = op.in;
  }
  std::vector<int> order(60);
  for (int k = 0; k < 60; ++k) order[k] = k;
  std::shuffle(order.begin(), order.end(), std::mt19937(99 + rank));
  std::thread second([&] {
    for (size_t k = 1; k < order.size(); k += 2) submit(ops[order[k]], rank, size);
  });
  for (size_t k = 0; k < order.size(); k += 2) submit(ops[order[k]], rank, size);
  second.join();
  int wrong = 0;
  for (auto& op : ops) {
    op.handle.wait();
    if (!check(op, rank, size)) {
      std::fprintf(stderr, "rank %d: op %d is wrong\n", rank, op.index);
      ++wrong;
    }
  }
  // A grouped allreduce, a barrier, and the blocking API on the main context meanwhile.
  std::vector<double> a(10, rank + 1.0), b(3, 2.0 * rank);
  hvd::Handle group =
      hvd::groupedAllreduceAsync({"g.a", "g.b"}, {a.data(), b.data()}, {a.data(), b.data()},
                                 {{10}, {3}}, hvd::DataType::kFloat64, {hvd::ReduceOp::kSum});
  float blocking = 1.0f;
  hvd::allreduce(&blocking, &blocking, 1, hvd::DataType::kFloat32);
  group.wait();
  if (a[0] != size * (size + 1) / 2.0 || b[2] != size * (size - 1.0) ||
      blocking != static_cast<float>(size)) {
    std::fprintf(stderr, "rank %d: grouped/blocking results are wrong\n", rank);
    ++wrong;
  }
  hvd::barrierAsync().wait();
  const int last = hvd::join();
  std::printf("rank %d: engine mixed ok=%d last-joined=%d\n", rank, wrong == 0, last);
  hvd::shutdown();
  return wrong == 0 ? 0 : 1;
}

int runStall() {
  hvd::init();
  const int rank = hvd::rank();
  float x[4] = {1, 2, 3, 4};
  hvd::allreduceAsync("warmup", x, x, {4}, hvd::DataType::kFloat32).wait();
  hvd::Handle h;
  if (rank == 2) {
    // Rank 2 "forgets" 'w' and waits for something only it submits.
    h = hvd::allreduceAsync("rank2.only", x, x, {4}, hvd::DataType::kFloat32);
  } else {
    h = hvd::allreduceAsync("w", x, x, {4}, hvd::DataType::kFloat32);
  }
  h.wait();
  std::fprintf(stderr, "rank %d: the stalled op completed\n", rank);
  return 1;
}

int runAutotune(int steps) {
  hvd::init();
  const int rank = hvd::rank();
  const int size = hvd::size();
  constexpr int kTensors = 24;
  std::vector<std::vector<float>> grads(kTensors);
  bool ok = true;
  for (int s = 0; s < steps; ++s) {
    std::vector<hvd::Handle> handles;
    for (int k = kTensors - 1; k >= 0; --k) {
      grads[k].assign(size_t{64} << (k % 12), static_cast<float>((rank + s + k) % 11));
      handles.push_back(hvd::allreduceAsync(
          "grad." + std::to_string(k), grads[k].data(), grads[k].data(),
          {static_cast<int64_t>(grads[k].size())}, hvd::DataType::kFloat32, {hvd::ReduceOp::kSum}));
    }
    for (auto& h : handles) h.wait();
    for (int k = 0; k < kTensors; ++k) {
      float want = 0;
      for (int q = 0; q < size; ++q) want += static_cast<float>((q + s + k) % 11);
      ok = ok && std::all_of(grads[k].begin(), grads[k].end(), [&](float v) { return v == want; });
    }
  }
  std::printf("rank %d: engine autotune ok=%d steps=%d\n", rank, ok ? 1 : 0, steps);
  return ok ? 0 : 1;
}

int runStraggler(int sleepMs, int steps) {
  hvd::init();
  const int rank = hvd::rank();
  const int size = hvd::size();
  bool ok = true;
  for (int s = 0; s < steps; ++s) {
    if (rank == size - 1) std::this_thread::sleep_for(std::chrono::milliseconds(sleepMs));
    std::vector<std::vector<float>> grads(8, std::vector<float>(1024, 1.0f));
    std::vector<hvd::Handle> handles;
    for (int k = 0; k < 8; ++k) {
      handles.push_back(hvd::allreduceAsync("grad." + std::to_string(k), grads[k].data(),
                                            grads[k].data(), {1024}, hvd::DataType::kFloat32,
                                            {hvd::ReduceOp::kSum}));
    }
    for (auto& h : handles) h.wait();
    for (const auto& g : grads) ok = ok && g[0] == static_cast<float>(size);
  }
  std::printf("rank %d: engine straggler ok=%d\n", rank, ok ? 1 : 0);
  return ok ? 0 : 1;
}

int runDie() {
  hvd::init();
  const int rank = hvd::rank();
  if (rank == 1) {
    std::fprintf(stderr, "rank 1: exiting abruptly\n");
    std::fflush(stderr);
    _exit(3);
  }
  float x[4] = {1, 2, 3, 4};
  hvd::allreduceAsync("x", x, x, {4}, hvd::DataType::kFloat32).wait();
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "mixed") return runMixed();
    if (mode == "stall") return runStall();
    if (mode == "die") return runDie();
    if (mode == "autotune" && argc > 2) return runAutotune(std::atoi(argv[2]));
    if (mode == "straggler" && argc > 3)
      return runStraggler(std::atoi(argv[2]), std::atoi(argv[3]));
    std::fprintf(stderr, "usage: %s mixed|stall|die|autotune STEPS|straggler MS STEPS\n", argv[0]);
    return 2;
  } catch (const hvd::Error& e) {
    std::fprintf(stderr, "rank error (%s): %s\n", hvd::errorKindName(e.kind()), e.what());
    // A normal return: the runtime's teardown must not hang after an engine failure.
    return exitCodeFor(e);
  }
}
