// hvd-test-worker: a real libhvd worker process for the multi-process tests.
//   worker matrix [iterations]   the full correctness matrix, then iteration-dependent rounds,
//                                over the runtime's CPU collectives (HVD_CPU_BACKEND)
//   worker allreduce-matrix      allreduce alone: every type, op and algorithm (large jobs)
//   worker loop ITERS COUNT [FAULT_RANK FAULT_ITER kill|stop|exit0]
//                                allreduce loop through the public API; the fault rank injures
//                                itself at FAULT_ITER
//   worker reinit [CYCLES]       init / allreduce (blocking and engine) / shutdown, CYCLES
//                                times (2), holding no more threads, descriptors or shared
//                                memory after each cycle than after the first
//   worker init                  init and barrier only (bad-environment tests)
//   worker placement [MEMBERS]   init (initMembers with MEMBERS, launched ranks as "3,0,1"), an
//                                allreduce of the launched ranks, then one line "placement
//                                rank=R size=S local=L/LS cross=C/CS homogeneous=H sum=X"
//                                (isHomogeneous asked by rank 0 alone)
//   worker store-probe TOKEN     connects to $HVD_STORE_ADDR for $HVD_JOB_ID with TOKEN and
//                                sets a key: "store: accepted", or "store: refused: <why>" and
//                                exit 3 (a restarted job's old token must be refused)
// Exit codes: 0 success, 1 wrong values, 10 PeerError, 11 TimeoutError, 12 other hvd::Error.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/collective_checks.h"
#include "core/runtime.h"
#include "hvd/engine.hpp"
#include "hvd/hvd.hpp"
#include "store/tcp_store_client.h"
#include "worker_exit.h"

namespace {

using hvd::test::exitCodeFor;

// Over the runtime's CPU collectives: hvd's transports, or MPI with HVD_CPU_BACKEND=mpi.
int runMatrix(int iterations) {
  hvd::core::Runtime runtime(hvd::core::configFromEnvironment(), 0);
  hvd::test::CheckReport report;
  hvd::test::checkMatrix(runtime.collectives(), report);
  hvd::test::checkIterations(runtime.collectives(), report, iterations);
  std::printf("rank %d: %s\n", runtime.config().rank, report.summary().c_str());
  std::printf("rank %d: cpu collectives over %s\n", runtime.config().rank,
              runtime.collectives().describe().c_str());
  return report.ok() ? 0 : 1;
}

int runAllreduceMatrix() {
  hvd::core::Runtime runtime(hvd::core::configFromEnvironment(), 0);
  hvd::test::CheckReport report;
  hvd::test::checkAllreduceMatrix(runtime.collectives(), report);
  std::printf("rank %d: %s\n", runtime.config().rank, report.summary().c_str());
  return report.ok() ? 0 : 1;
}

int runLoop(int iterations, size_t count, int faultRank, int faultIter, const std::string& how) {
  hvd::init();
  const int rank = hvd::rank();
  const int size = hvd::size();
  std::vector<float> data(count);
  for (int it = 0; it < iterations; ++it) {
    if (rank == faultRank && it == faultIter) {
      std::fprintf(stderr, "rank %d: injecting '%s' at iteration %d\n", rank, how.c_str(), it);
      std::fflush(stderr);
      if (how == "kill") raise(SIGKILL);
      if (how == "stop") raise(SIGSTOP);
      if (how == "exit0") _exit(0);
    }
    for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>((i + rank + it) % 10);
    hvd::allreduce(data.data(), data.data(), count, hvd::DataType::kFloat32);
    for (size_t i = 0; i < count; i += 997) {
      float want = 0;
      for (int r = 0; r < size; ++r) want += static_cast<float>((i + r + it) % 10);
      if (data[i] != want) {
        std::fprintf(stderr, "rank %d: wrong value at %zu: %f != %f\n", rank, i, data[i], want);
        return 1;
      }
    }
  }
  hvd::shutdown();
  return 0;
}

std::vector<int> rankList(const std::string& text) {
  std::vector<int> ranks;
  for (size_t at = 0; at < text.size();) {
    const size_t comma = std::min(text.find(',', at), text.size());
    ranks.push_back(std::stoi(text.substr(at, comma - at)));
    at = comma + 1;
  }
  return ranks;
}

// The sum tells which launched ranks formed the job. Only rank 0 asks isHomogeneous while the
// others wait in the barrier: were it a collective, rank 0 would wait for them in vain.
int runPlacement(const char* members) {
  const char* launched = std::getenv("SLURM_PROCID");
  int64_t sum = launched != nullptr ? std::atoi(launched) : -1;
  if (members != nullptr) {
    hvd::initMembers(rankList(members));
  } else {
    hvd::init();
  }
  hvd::allreduce(&sum, &sum, 1, hvd::DataType::kInt64);
  const int rank = hvd::rank();
  const char* homogeneous = rank != 0 ? "-" : hvd::isHomogeneous() ? "1" : "0";
  hvd::barrier();
  std::printf("placement rank=%d size=%d local=%d/%d cross=%d/%d homogeneous=%s sum=%lld\n", rank,
              hvd::size(), hvd::localRank(), hvd::localSize(), hvd::crossRank(), hvd::crossSize(),
              homogeneous, static_cast<long long>(sum));
  std::fflush(stdout);
  hvd::shutdown();
  return 0;
}

// What a process holds that an init/shutdown cycle must give back.
struct Held {
  int threads = 0;      // entries of /proc/self/task
  int descriptors = 0;  // entries of /proc/self/fd
  int shmMaps = 0;      // mappings of /dev/shm files in /proc/self/maps
};

int countEntries(const char* dir) {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    (void)entry;
    ++n;
  }
  return n;
}

Held held() {
  Held h;
  h.threads = countEntries("/proc/self/task");
  h.descriptors = countEntries("/proc/self/fd");
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    if (line.find("/dev/shm/") != std::string::npos) ++h.shmMaps;
  }
  return h;
}

// `cycles` rounds of init, a blocking and an engine allreduce, shutdown. The first round starts
// what lives as long as the process (loggers); every later one must end holding what it held
// after the first: no thread, descriptor or shared-memory mapping may accumulate.
int runReinit(int cycles) {
  Held first;
  for (int round = 0; round < cycles; ++round) {
    hvd::init();
    int64_t value = hvd::rank() + 1;
    hvd::allreduce(&value, &value, 1, hvd::DataType::kInt64);
    const int64_t n = hvd::size();
    if (value != n * (n + 1) / 2) {
      std::fprintf(stderr, "round %d: sum %lld\n", round, static_cast<long long>(value));
      return 1;
    }
    float in[4] = {1, 2, 3, 4};
    float out[4] = {};
    hvd::allreduceAsync("reinit." + std::to_string(round), in, out, {4}, hvd::DataType::kFloat32)
        .wait();
    if (out[3] != 4.0f) {  // the average of equal inputs (the engine's default op)
      std::fprintf(stderr, "round %d: engine sum %g\n", round, out[3]);
      return 1;
    }
    hvd::shutdown();
    if (hvd::isInitialized()) return 1;
    const Held now = held();
    if (round == 0) {
      first = now;
    } else if (now.threads != first.threads || now.descriptors != first.descriptors ||
               now.shmMaps != first.shmMaps) {
      std::fprintf(stderr,
                   "after round %d: %d threads, %d descriptors, %d shm mappings; after round 0: "
                   "%d, %d, %d\n",
                   round, now.threads, now.descriptors, now.shmMaps, first.threads,
                   first.descriptors, first.shmMaps);
      return 1;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "matrix") return runMatrix(argc > 2 ? std::atoi(argv[2]) : 200);
    if (mode == "loop" && argc >= 4) {
      const int faultRank = argc > 4 ? std::atoi(argv[4]) : -1;
      const int faultIter = argc > 5 ? std::atoi(argv[5]) : -1;
      return runLoop(std::atoi(argv[2]), std::strtoull(argv[3], nullptr, 10), faultRank, faultIter,
                     argc > 6 ? argv[6] : "");
    }
    if (mode == "allreduce-matrix") return runAllreduceMatrix();
    if (mode == "reinit") return runReinit(argc > 2 ? std::atoi(argv[2]) : 2);
    if (mode == "store-probe" && argc >= 3) {
      const char* addr = std::getenv("HVD_STORE_ADDR");
      const char* job = std::getenv("HVD_JOB_ID");
      if (addr == nullptr || job == nullptr) return 2;
      try {
        hvd::store::TcpStore store(addr, job, argv[2], std::chrono::seconds(5));
        store.set("probe", {1, 2, 3});
      } catch (const hvd::InvalidArgumentError& e) {
        std::printf("store: refused: %s\n", e.what());
        return 3;
      }
      std::printf("store: accepted\n");
      return 0;
    }
    if (mode == "placement") return runPlacement(argc > 2 ? argv[2] : nullptr);
    if (mode == "init") {
      hvd::init();
      hvd::barrier();
      hvd::shutdown();
      return 0;
    }
    std::fprintf(stderr, "usage: hvd-test-worker matrix|allreduce-matrix|loop|reinit|init ...\n");
    return 2;
  } catch (const hvd::Error& e) {
    std::fprintf(stderr, "worker: %s: %s\n", hvd::errorKindName(e.kind()), e.what());
    return exitCodeFor(e);
  }
}
