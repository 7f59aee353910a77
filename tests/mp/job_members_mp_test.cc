// What init learns about the job's shape, with real processes started as srun starts them
// (SLURM_* placement, the rendezvous in a shared directory), so that one machine can play nodes
// of different sizes:
//   * isHomogeneous: whether every node runs as many ranks, known to every rank from init and
//     asked by rank 0 alone;
//   * initMembers (Horovod's hvd.init(comm=[ranks])): the listed launched ranks form a job of
//     their own, numbered in the list's order, beside a job formed by the others; a launched
//     rank that gives a list without itself is refused at once.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
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

struct Launched {
  int node;
  int localRank;
};

// Starts one worker per entry of `argvs` (launched rank = index) on the nodes "2,1"-style
// `tasksPerNode` describes, and returns each one's result.
std::vector<ProcessResult> runLikeSrun(const std::string& tasksPerNode,
                                       const std::vector<std::vector<std::string>>& argvs) {
  std::vector<Launched> places;
  int node = 0;
  for (size_t at = 0; at < tasksPerNode.size(); ++node) {
    const size_t comma = std::min(tasksPerNode.find(',', at), tasksPerNode.size());
    const int count = std::stoi(tasksPerNode.substr(at, comma - at));
    for (int local = 0; local < count; ++local) places.push_back({node, local});
    at = comma + 1;
  }
  EXPECT_EQ(places.size(), argvs.size());
  TempDir store;
  const std::string job = std::to_string(::getpid()) + "-" + tasksPerNode;
  std::vector<std::unique_ptr<Process>> ranks;
  for (size_t r = 0; r < argvs.size(); ++r) {
    ProcessOptions o;
    o.inheritEnv = false;
    o.env = {"PATH=/usr/bin:/bin",
             "HVD_TIMEOUT=30",
             "HVD_START_TIMEOUT=30",
             "SLURM_PROCID=" + std::to_string(r),
             "SLURM_NTASKS=" + std::to_string(argvs.size()),
             "SLURM_LOCALID=" + std::to_string(places[r].localRank),
             "SLURM_NODEID=" + std::to_string(places[r].node),
             "SLURM_STEP_TASKS_PER_NODE=" + tasksPerNode,
             "SLURM_JOB_ID=" + job,
             "SLURM_STEP_ID=0",
             "HVD_STORE_FILE=" + store.path().string()};
    o.output = ProcessOptions::Output::kMerged;
    o.stdinDevNull = true;
    ranks.push_back(std::make_unique<Process>(argvs[r], o));
  }
  std::vector<ProcessResult> results;
  for (auto& rank : ranks) results.push_back(rank->finish(60s));
  return results;
}

std::vector<std::vector<std::string>> placementWorkers(size_t n, const std::string& members = "") {
  std::vector<std::string> argv = {HVD_WORKER_PATH, "placement"};
  if (!members.empty()) argv.push_back(members);
  return std::vector<std::vector<std::string>>(n, argv);
}

TEST(JobShape, IsHomogeneousComparesTheRanksPerNodeAndRankZeroAsksAlone) {
  struct Case {
    std::string tasks;
    size_t ranks;
    std::string homogeneous;
  };
  for (const Case& c : {Case{"2,1", 3, "0"}, Case{"2,2", 4, "1"}, Case{"1,3", 4, "0"}}) {
    const std::vector<ProcessResult> results = runLikeSrun(c.tasks, placementWorkers(c.ranks));
    for (size_t r = 0; r < results.size(); ++r) {
      ASSERT_EQ(results[r].status, 0) << c.tasks << " rank " << r << ":\n" << results[r].out;
    }
    EXPECT_NE(results[0].out.find("placement rank=0 size=" + std::to_string(c.ranks) + " local=0/" +
                                  c.tasks.substr(0, 1) + " cross=0/2 homogeneous=" + c.homogeneous +
                                  " sum="),
              std::string::npos)
        << c.tasks << ":\n"
        << results[0].out;
  }
}

TEST(JobShape, ListedRanksFormAJobInTheListsOrderBesideTheOthers) {
  // Launched ranks 3, 0, 1 form one job (ranks 0, 1, 2 there), launched rank 2 a job of one.
  std::vector<std::vector<std::string>> argvs = placementWorkers(4, "3,0,1");
  argvs[2] = {HVD_WORKER_PATH, "placement", "2"};
  const std::vector<ProcessResult> results = runLikeSrun("4", argvs);
  for (size_t r = 0; r < results.size(); ++r) {
    ASSERT_EQ(results[r].status, 0) << "launched rank " << r << ":\n" << results[r].out;
  }
  // One machine: the members' host is one node whatever SLURM_NODEID says.
  EXPECT_NE(results[3].out.find("placement rank=0 size=3 local=0/3 cross=0/1 homogeneous=1 sum=4"),
            std::string::npos)
      << results[3].out;
  EXPECT_NE(results[0].out.find("placement rank=1 size=3 local=1/3 cross=0/1 homogeneous=- sum=4"),
            std::string::npos)
      << results[0].out;
  EXPECT_NE(results[1].out.find("placement rank=2 size=3 local=2/3 cross=0/1 homogeneous=- sum=4"),
            std::string::npos)
      << results[1].out;
  EXPECT_NE(results[2].out.find("placement rank=0 size=1 local=0/1 cross=0/1 homogeneous=1 sum=2"),
            std::string::npos)
      << results[2].out;
}

TEST(JobShape, ARankOutsideItsListIsRefusedAtOnce) {
  // Launched rank 1 gives a list without itself: an error before it connects to anyone; rank 0
  // then forms the job of [0] alone.
  std::vector<std::vector<std::string>> argvs = placementWorkers(2, "0");
  const std::vector<ProcessResult> results = runLikeSrun("2", argvs);
  EXPECT_EQ(results[0].status, 0) << results[0].out;
  EXPECT_EQ(results[1].status, 12) << results[1].out;  // hvd::Error (worker_exit.h)
  EXPECT_NE(results[1].out.find("hvd.init(comm=[0]): this process is launched rank 1, which is "
                                "not in the list"),
            std::string::npos)
      << results[1].out;
  EXPECT_LT(results[1].seconds, 10.0) << results[1].out;
}

}  // namespace
