// hvd under a real Slurm: scripts/slurm-cluster.sh brings up Debian's
// slurmctld, a private munged and one slurmd per network namespace (two nodes, two CPUs each,
// whole nodes per job), and the tests run, from this (the login) namespace:
//   (a) `salloc -N2 hvdrun -np 4 ./worker` with no host list: hvdrun takes the nodes and slots
//       from the allocation and starts its agents with srun (a one-time key on their stdin);
//   (b) `srun -N2 -n4 ./worker` with a store file: the runtime takes its place from SLURM_*.
// Each runs hvd-e2e-worker (identity: rank, local and cross rank, and the network namespace it
// ran in, which must be its node's) and hvd-test-worker's collective matrix (allreduce,
// broadcast and the rest, bit-exact). The store file and the agents' TMPDIR are in a directory
// of the test, as on a cluster's shared filesystem. One cluster per test process (up takes about a
// second); ctest's e2e_slurm_down fixture removes it should a test be killed. Skipped, with the
// reason, only where network namespaces are unavailable.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "e2e_support.h"

namespace hvd::e2e {
namespace {

using namespace std::chrono_literals;

std::map<std::string, std::string>* slurmEnv = nullptr;
std::string* skipReason = nullptr;
std::string* setupError = nullptr;

class E2eSlurm : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    skipReason = new std::string(whyNoNetns());
    setupError = new std::string();
    slurmEnv = new std::map<std::string, std::string>();
    if (!skipReason->empty()) return;
    const RunResult up = run({HVD_SLURM_SCRIPT, "up", "2", "--prefix", HVD_SLURM_PREFIX,
                              "--state-root", HVD_SLURM_STATE_ROOT, "--cpus", "2", "--exclusive"},
                             90s);
    if (up.status != 0) {
      *setupError = "slurm-cluster.sh up failed: " + describe(up);
      down();
      return;
    }
    *slurmEnv = parseEnvLines(up.output);
  }
  static void TearDownTestSuite() {
    if (skipReason->empty()) down();
    delete slurmEnv;
    delete skipReason;
    delete setupError;
  }
  static void down() {
    run({HVD_SLURM_SCRIPT, "down", "--prefix", HVD_SLURM_PREFIX, "--state-root",
         HVD_SLURM_STATE_ROOT},
        60s);
  }

  void SetUp() override {
    if (!skipReason->empty()) GTEST_SKIP() << *skipReason;
    ASSERT_TRUE(setupError->empty()) << *setupError;
    ASSERT_EQ(slurmEnv->count("SLURM_CONF"), 1u);
    std::filesystem::create_directories(tmp_);
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(shared_, ec);
  }

  static const std::string& var(const std::string& name) { return slurmEnv->at(name); }

  // The Slurm client environment: the cluster's SLURM_CONF, the agents' root confirmation
  // (srun exports the environment to the tasks) and a TMPDIR of this test.
  std::vector<std::string> env(std::vector<std::string> more = {}) const {
    more.push_back("SLURM_CONF=" + var("SLURM_CONF"));
    more.push_back("HVD_ALLOW_RUN_AS_ROOT_CONFIRM=1");
    more.push_back("HVD_TIMEOUT=30");
    more.push_back("TMPDIR=" + tmp_.string());
    return more;
  }

  // salloc ALLOCATION -K hvdrun --allow-run-as-root ARGS (no host list).
  RunResult sallocHvdrun(std::vector<std::string> allocation, std::vector<std::string> args) const {
    std::vector<std::string> argv = {"salloc"};
    argv.insert(argv.end(), allocation.begin(), allocation.end());
    argv.insert(argv.end(), {"-K", HVDRUN_PATH, "--allow-run-as-root"});
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv, 120s, env());
  }

  static unsigned long long netnsInode(int node) {
    return netnsInodeOf(var("NS_" + std::to_string(node)));
  }

  // Four identity lines: ranks 0-1 on node 0 and 2-3 on node 1, in the nodes' own namespaces.
  static void expectTwoRanksPerNode(const std::string& output) {
    const auto byRank = identities(output);
    ASSERT_EQ(byRank.size(), 4u) << output;
    for (int rank = 0; rank < 4; ++rank) {
      ASSERT_EQ(byRank.count(rank), 1u) << output;
      const Fields& f = byRank.at(rank).front();
      EXPECT_EQ(f.at("size"), "4");
      EXPECT_EQ(f.at("local_rank"), std::to_string(rank % 2)) << output;
      EXPECT_EQ(f.at("local_size"), "2");
      EXPECT_EQ(f.at("cross_rank"), std::to_string(rank / 2)) << output;
      EXPECT_EQ(f.at("cross_size"), "2");
      EXPECT_EQ(f.at("netns"), std::to_string(netnsInode(rank / 2))) << "rank " << rank;
    }
    EXPECT_EQ(countOf(output, " allreduce ok sum=10"), 4u) << output;
  }

  static void expectMatrixPassed(const std::string& output) {
    for (int rank = 0; rank < 4; ++rank) {
      EXPECT_TRUE(std::regex_search(
          output, std::regex("rank " + std::to_string(rank) + ": [1-9][0-9]* checks, 0 failures")))
          << "rank " << rank << "\n"
          << output;
    }
  }

  std::vector<std::string> leftoversInTmp() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(tmp_)) {
      out.push_back(e.path().filename().string());
    }
    return out;
  }

  // What the nodes share, as a cluster's shared filesystem: the store file, the agents' TMPDIR
  // (checked for leftovers afterwards).
  const std::filesystem::path shared_ =
      std::filesystem::path(HVD_SLURM_STATE_ROOT) / ("shared-" + std::to_string(::getpid()));
  const std::filesystem::path tmp_ = shared_ / "tmp";
};

TEST_F(E2eSlurm, SallocHvdrunWithNoHostListRunsOnBothNodesThroughAgentsItStarts) {
  const RunResult hosts = sallocHvdrun({"-N2", "-n4"}, {"--print-hosts"});
  ASSERT_EQ(hosts.status, 0) << describe(hosts);
  EXPECT_NE(hosts.output.find(var("NODE_0") + ":2," + var("NODE_1") + ":2\n"), std::string::npos)
      << describe(hosts);

  // Whole nodes (the cluster's partition is exclusive): two tasks each, so -np 4 fits.
  const RunResult id = sallocHvdrun({"-N2"}, {"-np", "4", HVD_E2E_WORKER_PATH, "allreduce"});
  ASSERT_EQ(id.status, 0) << describe(id);
  expectTwoRanksPerNode(id.output);

  // No -np: the allocation's four tasks.
  const RunResult matrix = sallocHvdrun({"-N2", "-n4"}, {HVD_WORKER_PATH, "matrix", "2"});
  ASSERT_EQ(matrix.status, 0) << describe(matrix);
  expectMatrixPassed(matrix.output);
  // The agents' temporary state dirs (under the TMPDIR srun gave them) are gone with them.
  EXPECT_EQ(leftoversInTmp(), std::vector<std::string>{});
}

TEST_F(E2eSlurm, SrunOfFourRanksWithAStoreFilePassesTheChecks) {
  const std::string store = (shared_ / "store").string();
  std::filesystem::create_directories(store);
  const RunResult id = run({"srun", "-N2", "-n4", HVD_E2E_WORKER_PATH, "allreduce"}, 120s,
                           env({"HVD_STORE_FILE=" + store}));
  ASSERT_EQ(id.status, 0) << describe(id);
  expectTwoRanksPerNode(id.output);

  const RunResult matrix = run({"srun", "-N2", "-n4", HVD_WORKER_PATH, "matrix", "2"}, 120s,
                               env({"HVD_STORE_FILE=" + store}));
  ASSERT_EQ(matrix.status, 0) << describe(matrix);
  expectMatrixPassed(matrix.output);
}

}  // namespace
}  // namespace hvd::e2e
