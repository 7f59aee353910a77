// The agents as orchestrators across network-namespace hosts (docs/architecture.md "Resources,
// queue and restarts"): each host's agent has four fake GPUs (HVD_FAKE_GPUS=4 in its environment).
// Two leaders racing for one host's GPUs never share one; a job whose host's agent is killed
// restarts on the capacity left, or fails with that loss as its root cause. Each test brings up
// a cluster of its own. Needs root; skipped otherwise.
#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "common/test_support.h"
#include "e2e_support.h"

namespace hvd::e2e {
namespace {

using namespace std::chrono_literals;

class E2eOrchestration : public ::testing::Test {
 protected:
  void SetUp() override {
    // The agents inherit the environment of the script that starts them.
    ::setenv("HVD_FAKE_GPUS", "4", 1);
    upOwnCluster(3, "o", &cluster_);
    ::unsetenv("HVD_FAKE_GPUS");
  }
  void TearDown() override { cluster_.reset(); }

  std::optional<Cluster> cluster_;
  hvd::test::TempDir dir_;
};

// Job X is led by host 0 and job Y by host 1; each wants 3 of host 2's 4 GPUs, so they cannot
// run there together. Started at the same moment, one runs and the other waits; each rank on
// host 2 logs when it held which GPU, and no GPU is held by both jobs at once.
TEST_F(E2eOrchestration, TwoLeadersRacingForOneHostNeverShareAGpu) {
  const Cluster& c = *cluster_;
  const std::string log = (dir_.path() / "gpus.log").string();
  const std::string script =
      "if [ \"$HVD_CROSS_RANK\" = 1 ]; then s=$(date +%s%N); sleep 1; "
      "echo \"$JOB $CUDA_VISIBLE_DEVICES $s $(date +%s%N)\" >> " +
      log + "; fi";
  auto start = [&](int leader, const std::string& job) {
    const std::string hosts = c.address(leader) + ":3," + c.address(2) + ":3";
    return std::make_unique<Child>(hvdrunArgs(
        c, 6, hosts, {"--gpu-bind", "visible", "-x", "JOB=" + job, "--", "/bin/sh", "-c", script}));
  };
  std::unique_ptr<Child> x = start(0, "X");
  std::unique_ptr<Child> y = start(1, "Y");
  const RunResult rx = x->finish(60s);
  const RunResult ry = y->finish(60s);
  ASSERT_EQ(rx.status, 0) << describe(rx);
  ASSERT_EQ(ry.status, 0) << describe(ry);
  EXPECT_NE(rx.output.find("is queued") == std::string::npos,
            ry.output.find("is queued") == std::string::npos)
      << "exactly one of the jobs should have waited\n"
      << describe(rx) << describe(ry);

  struct Hold {
    std::string job;
    long long from, to;
  };
  std::map<std::string, std::vector<Hold>> byGpu;
  std::istringstream lines(readFile(log));
  std::string job, gpu;
  long long from = 0, to = 0;
  int count = 0;
  while (lines >> job >> gpu >> from >> to) {
    byGpu[gpu].push_back({job, from, to});
    ++count;
  }
  ASSERT_EQ(count, 6) << readFile(log);
  for (const auto& [g, holds] : byGpu) {
    for (const Hold& a : holds) {
      for (const Hold& b : holds) {
        if (a.job == b.job) continue;
        EXPECT_TRUE(a.to <= b.from || b.to <= a.from)
            << "GPU " << g << " held by " << a.job << " and " << b.job << " at once";
      }
    }
  }
}

// A job on hosts 0 and 1 (2 ranks each) with spare slots on host 2: host 1's agent is killed
// mid-job, and the restart runs all four ranks on hosts 0 and 2. The ranks exec their sleep: a
// child a shell left behind would survive its agent until the next agent cleans it up.
TEST_F(E2eOrchestration, ALostHostsShareRestartsOnTheCapacityLeft) {
  const Cluster& c = *cluster_;
  const std::string hosts = c.address(0) + ":2," + c.address(1) + ":2," + c.address(2) + ":2";
  const std::string script =
      "echo attempt=$HVD_RESTART_COUNT rank=$HVD_RANK ready; "
      "if [ \"$HVD_RESTART_COUNT\" = 0 ]; then exec sleep 60; fi";
  Child job(hvdrunArgs(c, 4, hosts, {"--max-restarts", "1", "--", "/bin/sh", "-c", script}));
  ASSERT_TRUE(job.waitForOutput(
      [](const std::string& out) {
        size_t n = 0;
        for (size_t p = out.find("attempt=0"); p != std::string::npos;
             p = out.find("attempt=0", p + 1)) {
          ++n;
        }
        return n == 4;
      },
      30s))
      << job.output();
  const pid_t victim = c.agentPid(1);
  ASSERT_GT(victim, 0);
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  const RunResult r = job.finish(60s);
  EXPECT_EQ(r.status, 0) << describe(r);
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(countOf(r.output, "attempt=1 rank=" + std::to_string(rank) + " ready"), 1u)
        << describe(r);
  }
  EXPECT_NE(r.output.find("restarting"), std::string::npos) << describe(r);
  for (int i : {0, 2}) EXPECT_EQ(leftoversIn(c, i, 5s), "") << "processes left in " << c.ns(i);
  EXPECT_EQ(leftoversIn(c, 1, 10s), "") << "the lost host's ranks outlived their agent";
}

// The same loss with no spare host: the restart cannot place four ranks on host 0's two slots,
// so the job fails, and its root cause is the lost agent.
TEST_F(E2eOrchestration, ALostHostWithNoCapacityLeftFailsWithThatRootCause) {
  const Cluster& c = *cluster_;
  const std::string hosts = c.address(0) + ":2," + c.address(1) + ":2";
  Child job(hvdrunArgs(
      c, 4, hosts, {"--max-restarts", "3", "--", "/bin/sh", "-c", "echo ready; exec sleep 60"}));
  ASSERT_TRUE(
      job.waitForOutput([](const std::string& out) { return countOf(out, "ready") == 4; }, 30s))
      << job.output();
  ASSERT_EQ(::kill(c.agentPid(1), SIGKILL), 0);
  const RunResult r = job.finish(60s);
  EXPECT_EQ(r.status, kExitAgentLost) << describe(r);
  EXPECT_NE(r.output.find("agent on " + c.address(1) + " was lost"), std::string::npos)
      << describe(r);
  EXPECT_NE(r.output.find("restart 1 could not start"), std::string::npos) << describe(r);
  EXPECT_EQ(leftoversIn(c, 0, 5s), "");
  EXPECT_EQ(leftoversIn(c, 1, 10s), "");
}

}  // namespace
}  // namespace hvd::e2e
