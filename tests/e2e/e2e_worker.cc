// hvd-e2e-worker: the worker the multi-host (netns) tests launch through hvdrun and hvdagent.
//   hvd-e2e-worker allreduce   init, print who this rank is, allreduce (int64 and float32) and
//                              check every element; exits 1 on a wrong value
//   hvd-e2e-worker sleep       init and barrier, print "ready", then sleep until killed
//   hvd-e2e-worker allreduce-until FILE
//                              the allreduce checks, repeated until FILE exists (at least once)
//   hvd-e2e-worker probe-store JOB
//                              the allreduce checks, then presents this job's store token for
//                              job JOB on the same store server: prints "foreign store refused"
//                              (exit 0) or "foreign store OPEN" (exit 1)
// Each rank prints one line
//   e2e rank=R size=S local_rank=L local_size=LS cross_rank=C cross_size=CS netns=INODE
//       env_rank=.. env_local_rank=.. env_cross_rank=.. transport=T pid=P
// so the test can check placement against the agent's environment contract and see which
// network namespace (= which "host") each rank ran in.
// Exit codes: 0 success, 1 wrong value, 2 usage, 12 hvd::Error.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "hvd/error.hpp"
#include "hvd/hvd.hpp"
#include "store/tcp_store_client.h"

namespace {

std::string envOr(const char* name, const char* fallback = "-") {
  const char* value = std::getenv(name);
  return value != nullptr ? value : fallback;
}

// Inode of this process's network namespace: equal for ranks on the same "host".
unsigned long long netnsInode() {
  struct stat st {};
  return ::stat("/proc/self/ns/net", &st) == 0 ? static_cast<unsigned long long>(st.st_ino) : 0;
}

void printIdentity() {
  std::printf(
      "e2e rank=%d size=%d local_rank=%d local_size=%d cross_rank=%d cross_size=%d netns=%llu "
      "env_rank=%s env_local_rank=%s env_cross_rank=%s transport=%s pid=%d\n",
      hvd::rank(), hvd::size(), hvd::localRank(), hvd::localSize(), hvd::crossRank(),
      hvd::crossSize(), netnsInode(), envOr("HVD_RANK").c_str(), envOr("HVD_LOCAL_RANK").c_str(),
      envOr("HVD_CROSS_RANK").c_str(), hvd::transportDescription().c_str(),
      static_cast<int>(::getpid()));
  std::fflush(stdout);
}

// Sum over ranks of (rank + 1), and element-wise sums of small integers in float32 (exact), over
// a buffer large enough to take the ring's pipelined path between the hosts.
int checkAllreduce(bool print);

int runAllreduce() {
  hvd::init();
  printIdentity();
  const int status = checkAllreduce(true);
  hvd::shutdown();
  return status;
}

int runAllreduceUntil(const std::string& file) {
  hvd::init();
  printIdentity();
  int rounds = 0;
  for (;;) {
    if (const int status = checkAllreduce(false); status != 0) return status;
    ++rounds;
    // Every rank must agree on the last round: rank 0 decides.
    int64_t stop = hvd::rank() == 0 && ::access(file.c_str(), F_OK) == 0 ? 1 : 0;
    hvd::broadcast(&stop, 1, hvd::DataType::kInt64);  // from rank 0
    if (stop != 0) break;
  }
  std::printf("e2e rank=%d allreduce ok rounds=%d\n", hvd::rank(), rounds);
  std::fflush(stdout);
  hvd::shutdown();
  return 0;
}

// Another job's namespace with this job's token: the store server must refuse it.
int runProbeStore(const std::string& otherJob) {
  hvd::init();
  printIdentity();
  if (const int status = checkAllreduce(true); status != 0) return status;
  const std::string address = envOr("HVD_STORE_ADDR", "");
  const std::string token = envOr("HVD_STORE_TOKEN", "");
  try {
    hvd::store::TcpStore foreign(address, otherJob, token, std::chrono::seconds(10));
    foreign.set("e2e/intruder", {1, 2, 3});
    std::printf("e2e rank=%d foreign store OPEN\n", hvd::rank());
    std::fflush(stdout);
    return 1;
  } catch (const hvd::Error& e) {
    std::printf("e2e rank=%d foreign store refused: %s\n", hvd::rank(), e.what());
    std::fflush(stdout);
  }
  hvd::shutdown();
  return 0;
}

int checkAllreduce(bool print) {
  const int rank = hvd::rank();
  const int size = hvd::size();

  int64_t value = rank + 1;
  hvd::allreduce(&value, &value, 1, hvd::DataType::kInt64);
  const int64_t want = static_cast<int64_t>(size) * (size + 1) / 2;
  if (value != want) {
    std::fprintf(stderr, "rank %d: int64 sum %lld, expected %lld\n", rank,
                 static_cast<long long>(value), static_cast<long long>(want));
    return 1;
  }

  constexpr size_t kCount = 1 << 18;  // 1 MiB of float32
  std::vector<float> data(kCount);
  for (size_t i = 0; i < kCount; ++i) data[i] = static_cast<float>((i + rank) % 7);
  hvd::allreduce(data.data(), data.data(), kCount, hvd::DataType::kFloat32);
  // The expected sums depend on i % 7 only: computed once, so that checking costs O(count)
  // whatever the size (hundreds of ranks on two cores).
  float sums[7] = {0};
  for (size_t k = 0; k < 7; ++k) {
    for (int r = 0; r < size; ++r) sums[k] += static_cast<float>((k + r) % 7);
  }
  for (size_t i = 0; i < kCount; ++i) {
    const float expected = sums[i % 7];
    if (data[i] != expected) {
      std::fprintf(stderr, "rank %d: float32 element %zu is %g, expected %g\n", rank, i,
                   static_cast<double>(data[i]), static_cast<double>(expected));
      return 1;
    }
  }
  if (print) {
    std::printf("e2e rank=%d allreduce ok sum=%lld\n", rank, static_cast<long long>(value));
    std::fflush(stdout);
  }
  return 0;
}

int runSleep() {
  hvd::init();
  hvd::barrier();
  printIdentity();
  std::printf("e2e rank=%d ready\n", hvd::rank());
  std::fflush(stdout);
  for (;;) ::sleep(1);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "allreduce") return runAllreduce();
    if (mode == "sleep") return runSleep();
    if (mode == "allreduce-until" && argc > 2) return runAllreduceUntil(argv[2]);
    if (mode == "probe-store" && argc > 2) return runProbeStore(argv[2]);
  } catch (const hvd::Error& e) {
    std::fprintf(stderr, "hvd-e2e-worker: %s\n", e.what());
    return 12;
  }
  std::fprintf(stderr,
               "usage: hvd-e2e-worker allreduce | sleep | allreduce-until FILE | probe-store "
               "JOB\n");
  return 2;
}
