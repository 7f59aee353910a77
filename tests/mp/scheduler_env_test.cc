// Workers that no hvd launcher started (issue 7, "Under srun directly", "Under mpirun"): the
// real hvd-test-worker runs the full collective matrix (allreduce, broadcast and the rest, every
// dtype and op, bit-exact) with its place taken from Slurm's or Open MPI's variables and the
// rendezvous in a shared directory (HVD_STORE_FILE).
//   * srun on one node, as srun sets it up: SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID,
//     SLURM_NODEID, SLURM_TASKS_PER_NODE, SLURM_JOB_ID (the processes are started here);
//   * the real mpirun -np 3 (skipped where Open MPI is not installed).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
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
  env.push_back("HVD_TIMEOUT=30");
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

}  // namespace
