// Jobs across network-namespace hosts: every "host" is a network
// namespace joined to a bridge (scripts/netns-cluster.sh) with its own hvdagent on a private
// address that exists only there; hvdrun runs here, in the root namespace, as a user would type
// it. Placement and results across hosts, fast failure on unreachable or lost hosts, and no
// worker left behind. Needs root; skipped otherwise.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "e2e_support.h"

namespace hvd::e2e {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST_F(E2e, AllreduceAcrossTwoHosts) {
  const RunResult r =
      run(hvdrunArgs(cluster(), 4, cluster().hostList(2), {"--", HVD_E2E_WORKER_PATH, "allreduce"}),
          90s);
  ASSERT_EQ(r.status, 0) << describe(r);
  expectPlacement(cluster(), r, {2, 2});
  // Across namespaces the ranks talk TCP (shared memory only within a host).
  for (const auto& [rank, lines] : identities(r.output)) {
    EXPECT_NE(lines[0].at("transport").find("tcp"), std::string::npos) << "rank " << rank;
  }
}

TEST_F(E2e, UnevenSlotsAcrossTwoHosts) {
  const std::string hosts = cluster().address(0) + ":1," + cluster().address(1) + ":2";
  const RunResult r =
      run(hvdrunArgs(cluster(), 3, hosts, {"--", HVD_E2E_WORKER_PATH, "allreduce"}), 90s);
  ASSERT_EQ(r.status, 0) << describe(r);
  expectPlacement(cluster(), r, {1, 2});
}

TEST_F(E2e, UnreachableHostFailsFastAndNamesIt) {
  const std::string ghost = cluster().subnet() + ".250";  // in the subnet, no namespace has it
  const std::string hosts = cluster().address(0) + ":2," + ghost + ":2";
  const RunResult r =
      run(hvdrunArgs(cluster(), 4, hosts,
                     {"--start-timeout", "10", "--", HVD_E2E_WORKER_PATH, "allreduce"}),
          60s);
  EXPECT_EQ(r.status, kExitAgentUnreachable) << describe(r);
  EXPECT_LT(r.seconds, 15.0) << describe(r);
  EXPECT_NE(r.output.find(ghost), std::string::npos) << describe(r);
  EXPECT_EQ(countOf(r.output, "e2e rank="), 0u) << "ranks started anyway\n" << describe(r);
}

TEST_F(E2e, UnreachableLeaderFailsFastAndNamesIt) {
  const std::string ghost = cluster().subnet() + ".251";
  const std::string hosts = ghost + ":2," + cluster().address(0) + ":2";
  const RunResult r =
      run(hvdrunArgs(cluster(), 4, hosts,
                     {"--start-timeout", "10", "--", HVD_E2E_WORKER_PATH, "allreduce"}),
          60s);
  EXPECT_EQ(r.status, kExitAgentUnreachable) << describe(r);
  EXPECT_LT(r.seconds, 15.0) << describe(r);
  EXPECT_NE(r.output.find(ghost), std::string::npos) << describe(r);
}

// If hvdrun itself is killed, the agents stop its job: nothing is left on any host.
TEST_F(E2e, KilledHvdrunLeavesNoWorkers) {
  std::unique_ptr<Child> hvdrun;
  std::vector<pid_t> workers;
  ASSERT_NO_FATAL_FAILURE(startSleepingJob(cluster(), 4, cluster().hostList(2), &hvdrun, &workers));
  ::kill(hvdrun->pid(), SIGKILL);
  hvdrun->finish(10s);
  EXPECT_EQ(survivors(workers, 15s), std::vector<pid_t>()) << "workers outlived hvdrun";
}

// Ctrl-C stops the job gracefully on every host and hvdrun reports 130 (128 + SIGINT).
TEST_F(E2e, CtrlCStopsTheJobEverywhere) {
  std::unique_ptr<Child> hvdrun;
  std::vector<pid_t> workers;
  ASSERT_NO_FATAL_FAILURE(startSleepingJob(cluster(), 4, cluster().hostList(2), &hvdrun, &workers));
  ::kill(hvdrun->pid(), SIGINT);
  const RunResult r = hvdrun->finish(30s);
  EXPECT_EQ(r.status, kExitInterrupted) << describe(r);
  EXPECT_EQ(survivors(workers, 5s), std::vector<pid_t>()) << describe(r);
}

// --- losing an agent mid-job (each test on its own cluster) -----------------------------------

class E2eAgentLoss : public ::testing::Test {
 protected:
  void SetUp() override { upOwnCluster(2, "k", &cluster_); }
  void TearDown() override { cluster_.reset(); }

  // Starts a 2+2 sleeping job, loses host `victim` once every rank is ready (its agent is
  // SIGKILLed, or with `partition` its link to the bridge goes down: no FIN, no RST, only
  // keepalive can tell), and checks that hvdrun exits with "agent lost" within the bound, names
  // the host, and that no worker survives anywhere.
  void loseHostMidJob(int victim, bool partition = false) {
    const Cluster& c = *cluster_;
    std::unique_ptr<Child> hvdrun;
    std::vector<pid_t> workers;
    ASSERT_NO_FATAL_FAILURE(startSleepingJob(c, 4, c.hostList(2), &hvdrun, &workers));

    const pid_t agent = c.agentPid(victim);
    ASSERT_GT(agent, 0);
    const auto killed = Clock::now();
    if (partition) {
      const RunResult cut =
          run({"ip", "link", "set", c.prefix() + "-v" + std::to_string(victim), "down"}, 10s);
      ASSERT_EQ(cut.status, 0) << describe(cut);
    } else {
      ASSERT_EQ(::kill(agent, SIGKILL), 0);
    }
    const RunResult r = hvdrun->finish(30s);
    const double seconds = std::chrono::duration<double>(Clock::now() - killed).count();
    std::printf("host %d %s: hvdrun exited %d after %.2f s\n", victim,
                partition ? "cut off" : "agent killed", r.status, seconds);
    EXPECT_EQ(r.status, kExitAgentLost) << describe(r);
    EXPECT_LT(seconds, 15.0) << describe(r);
    EXPECT_NE(r.output.find(c.address(victim)), std::string::npos)
        << "the message should name the lost host\n"
        << describe(r);

    // No worker outlives the job, on either host. Slack: a cut-off host's agent notices by
    // keepalive (~5 s), then grants the ranks their grace.
    EXPECT_EQ(survivors(workers, 10s), std::vector<pid_t>()) << describe(r);
    for (int i = 0; i < c.size(); ++i) {
      EXPECT_EQ(leftoversIn(c, i, 1s), "") << "processes left in " << c.ns(i);
    }
    if (victim != 0) {
      EXPECT_TRUE(alive(c.agentPid(0))) << "the leader agent died too; its log:\n" << c.agentLog(0);
    }
  }

  std::optional<Cluster> cluster_;
};

TEST_F(E2eAgentLoss, KillingAWorkerHostsAgentFailsTheJobEverywhere) { loseHostMidJob(1); }

TEST_F(E2eAgentLoss, KillingTheLeaderAgentFailsTheJobEverywhere) { loseHostMidJob(0); }

TEST_F(E2eAgentLoss, PartitionedHostFailsTheJobEverywhere) {
  loseHostMidJob(1, /*partition=*/true);
}

}  // namespace
}  // namespace hvd::e2e
