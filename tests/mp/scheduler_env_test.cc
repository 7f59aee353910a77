// Workers that no hvd launcher started (under srun directly, under mpirun): the
// real hvd-test-worker runs the full collective matrix (allreduce, broadcast and the rest, every
// dtype and op, bit-exact) with its place taken from Slurm's or Open MPI's variables.
//   * srun on one node, as srun sets it up: SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID,
//     SLURM_NODEID, SLURM_TASKS_PER_NODE, SLURM_JOB_ID (the processes are started here), with
//     the rendezvous in a shared directory (HVD_STORE_FILE);
//   * the real mpirun -np 3 (skipped where Open MPI is not installed): with HVD_STORE_FILE; with
//     no store variable at all (the ranks meet through MPI; skipped without hvd's MPI plugin);
//     with HVD_CPU_BACKEND=mpi, for the matrix and for the engine's ops, where the runtime's log
//     must show that MPI carried the data; and a stopped rank under HVD_CPU_BACKEND=mpi, which
//     must end the job after HVD_TIMEOUT instead of hanging it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "common/test_support.h"

namespace {

using namespace std::chrono_literals;
using hvd::test::Process;
using hvd::test::ProcessOptions;
using hvd::test::ProcessResult;
using hvd::test::TempDir;

constexpr int kRanks = 3;

// The environment without anything an hvd launcher would have set.
ProcessOptions withoutHvd(std::vector<std::string> env) {
  ProcessOptions o;
  o.inheritEnv = false;
  env.push_back("PATH=/usr/bin:/bin");
  const bool timeout = std::any_of(
      env.begin(), env.end(), [](const std::string& v) { return v.rfind("HVD_TIMEOUT=", 0) == 0; });
  if (!timeout) env.push_back("HVD_TIMEOUT=30");
  if (const char* home = std::getenv("HOME")) env.push_back(std::string("HOME=") + home);
  o.env = std::move(env);
  o.output = ProcessOptions::Output::kMerged;
  o.stdinDevNull = true;
  return o;
}

TEST(SchedulerEnv, RanksStartedLikeSrunPassTheMatrixThroughAStoreFile) {
  TempDir dir;
  const std::string job = std::to_string(::getpid());
  std::vector<std::unique_ptr<Process>> ranks;
  for (int r = 0; r < kRanks; ++r) {
    ranks.push_back(std::make_unique<Process>(
        std::vector<std::string>{HVD_WORKER_PATH, "matrix", "2"},
        withoutHvd({"SLURM_PROCID=" + std::to_string(r), "SLURM_NTASKS=3",
                    "SLURM_LOCALID=" + std::to_string(r), "SLURM_NODEID=0",
                    "SLURM_TASKS_PER_NODE=3", "SLURM_JOB_ID=" + job, "SLURM_STEP_ID=0",
                    "HVD_STORE_FILE=" + dir.path().string()})));
  }
  for (int r = 0; r < kRanks; ++r) {
    const ProcessResult result = ranks[r]->finish(120s);
    EXPECT_EQ(result.status, 0) << "rank " << r << ":\n" << result.out;
    EXPECT_NE(result.out.find("rank " + std::to_string(r) + ": "), std::string::npos) << result.out;
  }
  // The job's keys went under <HVD_STORE_FILE>/slurm-<job>.0.
  EXPECT_TRUE(std::filesystem::is_directory(dir.path() / ("slurm-" + job + ".0")));
}

TEST(SchedulerEnv, MpirunOfThreeRanksPassesTheMatrixAndDerivesTheCrossRanks) {
  if (::system("command -v mpirun > /dev/null 2>&1") != 0) GTEST_SKIP() << "no mpirun";
  TempDir dir;
  std::vector<std::string> mpirun = {
      "/usr/bin/env",   "mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "3", "-x",
      "HVD_STORE_FILE", "-x",     "HVD_TIMEOUT"};
  std::vector<std::string> matrix = mpirun;
  matrix.insert(matrix.end(), {HVD_WORKER_PATH, "matrix", "2"});
  const ProcessResult r =
      hvd::test::runProcess(matrix, 180s, withoutHvd({"HVD_STORE_FILE=" + dir.path().string()}));
  ASSERT_EQ(r.status, 0) << r.out;
  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_NE(r.out.find("rank " + std::to_string(rank) + ": "), std::string::npos) << r.out;
  }
  // One host: every rank is cross rank 0 of 1, local rank = rank (derived at rendezvous).
  std::vector<std::string> identity = mpirun;
  identity.insert(identity.end(), {HVD_E2E_WORKER_PATH, "allreduce"});
  const ProcessResult id =
      hvd::test::runProcess(identity, 120s, withoutHvd({"HVD_STORE_FILE=" + dir.path().string()}));
  ASSERT_EQ(id.status, 0) << id.out;
  for (int rank = 0; rank < kRanks; ++rank) {
    const std::string r = std::to_string(rank);
    EXPECT_NE(id.out.find("e2e rank=" + r + " size=3 local_rank=" + r +
                          " local_size=3 cross_rank=0 cross_size=1 "),
              std::string::npos)
        << id.out;
    EXPECT_NE(id.out.find("e2e rank=" + r + " allreduce ok sum=6"), std::string::npos) << id.out;
  }
}

bool haveMpirun() { return ::system("command -v mpirun > /dev/null 2>&1") == 0; }

// mpirun -np 3 with `vars` ("K=V", also exported to the ranks with -x) and nothing else an hvd
// launcher or store would set.
ProcessResult runMpirun(const std::vector<std::string>& vars,
                        const std::vector<std::string>& worker,
                        std::chrono::seconds timeout = 180s) {
  std::vector<std::string> argv = {
      "/usr/bin/env",         "mpirun", "--allow-run-as-root", "--oversubscribe", "-np",
      std::to_string(kRanks), "-x",     "HVD_TIMEOUT"};
  // Under AddressSanitizer (scripts/test.sh), the ranks' leak check is off: Open MPI keeps what
  // MPI_Init allocates and unloads its components at MPI_Finalize, so LeakSanitizer can neither
  // tell its blocks from ours nor name the modules to suppress. ASan's other checks and UBSan
  // stay on; libhvd's own leaks are checked by every other test. (Ignored without ASan.)
  std::vector<std::string> env = vars;
  env.push_back("ASAN_OPTIONS=detect_leaks=0:abort_on_error=1");
  for (const std::string& v : env) {
    if (v.rfind("HVD_TIMEOUT=", 0) == 0) continue;  // exported above
    argv.push_back("-x");
    argv.push_back(v.substr(0, v.find('=')));
  }
  argv.insert(argv.end(), worker.begin(), worker.end());
  ProcessOptions options = withoutHvd(env);
  options.ownProcessGroup = true;  // a timeout kills mpirun's ranks too
  return hvd::test::runProcess(argv, timeout, options);
}

// Whether some line of `text` starts with `prefix` and ends with `suffix`.
bool hasLine(const std::string& text, const std::string& prefix, const std::string& suffix) {
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = std::min(text.find('\n', at), text.size());
    const std::string line = text.substr(at, end - at);
    if (line.size() >= prefix.size() + suffix.size() && line.rfind(prefix, 0) == 0 &&
        line.compare(line.size() - suffix.size(), suffix.size(), suffix) == 0) {
      return true;
    }
    at = end + 1;
  }
  return false;
}

// A 64-hex-digit run: what the store token of the rendezvous over MPI looks like.
bool containsToken(const std::string& text) {
  int run = 0;
  for (char ch : text) {
    run = std::isxdigit(static_cast<unsigned char>(ch)) ? run + 1 : 0;
    if (run >= 64) return true;
  }
  return false;
}

TEST(SchedulerEnv, MpirunWithNoStoreVariablesMeetsThroughMpiAndPassesTheMatrix) {
  if (!haveMpirun()) GTEST_SKIP() << "no mpirun";
  if (!HVD_TEST_HAVE_MPI) GTEST_SKIP() << "built without MPI: no libhvd_mpi.so";
  const ProcessResult r = runMpirun({"HVD_LOG_LEVEL=info"}, {HVD_WORKER_PATH, "matrix", "2"});
  ASSERT_EQ(r.status, 0) << r.out;
  for (int rank = 0; rank < kRanks; ++rank) {
    const std::string prefix = "rank " + std::to_string(rank) + ": ";
    EXPECT_TRUE(hasLine(r.out, prefix, " checks, 0 failures")) << r.out;
    // The default backend: hvd's own transports carried the data.
    EXPECT_NE(r.out.find(prefix + "cpu collectives over shm"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("[rank " + std::to_string(rank) +
                         "] [init] [info] rendezvous over MPI: rank 0 serves the job's store at "),
              std::string::npos)
        << r.out;
  }
  EXPECT_FALSE(containsToken(r.out)) << "the store token reached the log:\n" << r.out;
}

TEST(SchedulerEnv, MpirunWithCpuBackendMpiPassesTheMatrixOverMpi) {
  if (!haveMpirun()) GTEST_SKIP() << "no mpirun";
  if (!HVD_TEST_HAVE_MPI) GTEST_SKIP() << "built without MPI: no libhvd_mpi.so";
  const ProcessResult r =
      runMpirun({"HVD_LOG_LEVEL=info", "HVD_CPU_BACKEND=mpi"}, {HVD_WORKER_PATH, "matrix", "2"});
  ASSERT_EQ(r.status, 0) << r.out;
  for (int rank = 0; rank < kRanks; ++rank) {
    const std::string prefix = "rank " + std::to_string(rank) + ": ";
    EXPECT_TRUE(hasLine(r.out, prefix, " checks, 0 failures")) << r.out;
    EXPECT_NE(r.out.find(prefix + "cpu collectives over mpi (Open MPI v"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("[rank " + std::to_string(rank) +
                         "] [init] [info] cpu backend: mpi (Open MPI v"),
              std::string::npos)
        << r.out;
  }
  EXPECT_FALSE(containsToken(r.out)) << "the store token reached the log:\n" << r.out;
}

TEST(SchedulerEnv, MpirunWithCpuBackendMpiRunsTheEnginesOpsOverMpi) {
  if (!haveMpirun()) GTEST_SKIP() << "no mpirun";
  if (!HVD_TEST_HAVE_MPI) GTEST_SKIP() << "built without MPI: no libhvd_mpi.so";
  // Async ops of every kind from two threads, grouped ops, join, then a blocking allreduce: the
  // engine's thread and the caller's use MPI at once.
  const ProcessResult r =
      runMpirun({"HVD_LOG_LEVEL=info", "HVD_CPU_BACKEND=mpi"}, {HVD_ENGINE_WORKER_PATH, "mixed"});
  ASSERT_EQ(r.status, 0) << r.out;
  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_NE(r.out.find("rank " + std::to_string(rank) + ": engine mixed ok=1"), std::string::npos)
        << r.out;
  }
  EXPECT_NE(r.out.find("[engine] [info] engine: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(", host data over mpi (Open MPI v"), std::string::npos) << r.out;
}

TEST(SchedulerEnv, MpirunWithoutHvdsMpiPluginSaysWhatToSet) {
  if (!haveMpirun()) GTEST_SKIP() << "no mpirun";
  // A copy of libhvd with no plugin beside it (LD_LIBRARY_PATH wins over the worker's RUNPATH):
  // as on a node where hvd was built without MPI.
  TempDir dir;
  std::filesystem::copy_file(HVD_LIBRARY_PATH, dir.path() / "libhvd.so.0");
  const std::string path = "LD_LIBRARY_PATH=" + dir.path().string();
  const ProcessResult noStore = runMpirun({path}, {HVD_WORKER_PATH, "init"}, 120s);
  EXPECT_EQ(noStore.status, 12) << noStore.out;  // the worker's code for an hvd::Error
  const std::vector<std::string> parts = {
      "started by mpirun with 3 ranks but no rendezvous store",
      (dir.path() / "libhvd_mpi.so").string(),
      "set HVD_STORE_ADDR (and HVD_STORE_TOKEN) to a running store, or HVD_STORE_FILE to a "
      "directory every rank shares"};
  for (const std::string& part : parts) {
    EXPECT_NE(noStore.out.find(part), std::string::npos) << part << "\n" << noStore.out;
  }
  TempDir store;
  const ProcessResult backend =
      runMpirun({path, "HVD_CPU_BACKEND=mpi", "HVD_STORE_FILE=" + store.path().string()},
                {HVD_WORKER_PATH, "init"}, 120s);
  EXPECT_EQ(backend.status, 12) << backend.out;
  EXPECT_NE(backend.out.find(HVD_TEST_HAVE_MPI ? "HVD_CPU_BACKEND=mpi: cannot load hvd's MPI plugin"
                                               : "HVD_CPU_BACKEND=mpi: this libhvd was built "
                                                 "without MPI"),
            std::string::npos)
      << backend.out;
}

TEST(SchedulerEnv, MpirunWithCpuBackendMpiEndsAJobWhoseRankStopsAfterTheTimeout) {
  if (!haveMpirun()) GTEST_SKIP() << "no mpirun";
  if (!HVD_TEST_HAVE_MPI) GTEST_SKIP() << "built without MPI: no libhvd_mpi.so";
  // Rank 1 stops itself (SIGSTOP) at iteration 5: the others wait in MPI_Allreduce, which
  // nothing can interrupt, until the watchdog aborts the job after HVD_TIMEOUT.
  const auto start = std::chrono::steady_clock::now();
  const ProcessResult r =
      runMpirun({"HVD_CPU_BACKEND=mpi", "HVD_TIMEOUT=3"},
                {HVD_WORKER_PATH, "loop", "50", "1000", "1", "5", "stop"}, 120s);
  const auto seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_FALSE(r.timedOut) << r.out;
  EXPECT_EQ(r.status, 124) << r.out;  // MPI_Abort's error code, as mpirun reports it
  // Ranks 0 and 2 both wait for the stopped rank 1; whichever watchdog fires first aborts.
  EXPECT_TRUE(std::regex_search(
      r.out, std::regex("mpi allreduce on rank [02] has not completed after 3 s")))
      << r.out;
  EXPECT_LT(seconds, 60) << r.out;
}

}  // namespace
