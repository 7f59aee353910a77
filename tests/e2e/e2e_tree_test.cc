// A job through a relay tree of agents (docs/scale.md, agent/relay): 8 network-namespace hosts
// and --tree-width 2, so the leader (h0) calls h1 and h5 itself; h1 relays to h2 and h4, h2 to
// h3, h5 to h6 and h7 (relay::splitBranches). h3 is three hops from the leader. An interior
// agent (h1, whose subtree is h2, h3 and h4) is SIGKILLed while the job launches, while it runs
// and while it is being stopped: the job ends within bounds, the lost agent is named with its
// subtree, and no process is left on any host. Each test brings up a cluster of its own. Needs
// root; skipped otherwise.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "e2e_support.h"

namespace hvd::e2e {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr int kHosts = 8;
constexpr int kSlots = 2;
constexpr int kNp = kHosts * kSlots;
constexpr int kInterior = 1;                  // relays to 2, 3 (through 2) and 4
const std::vector<int> kSubtree = {2, 3, 4};  // lost with it

class E2eTree : public ::testing::Test {
 protected:
  void SetUp() override { upOwnCluster(kHosts, "t", &cluster_); }
  void TearDown() override { cluster_.reset(); }

  const Cluster& c() const { return *cluster_; }

  std::vector<std::string> args(std::vector<std::string> extra) const {
    std::vector<std::string> all = {"--tree-width", "2"};
    all.insert(all.end(), extra.begin(), extra.end());
    return hvdrunArgs(c(), kNp, c().hostList(kSlots), std::move(all));
  }

  // Every namespace empty but for its agent (none in the killed one), and every other agent
  // alive: nothing outlived the job, and losing one agent took no other with it.
  void expectNothingLeft(int killed) {
    for (int i = 0; i < c().size(); ++i) {
      EXPECT_EQ(leftoversIn(c(), i, 15s), "") << "processes left in " << c().ns(i);
      if (i != killed) {
        EXPECT_TRUE(alive(c().agentPid(i))) << "agent " << i << " died; its log:\n"
                                            << c().agentLog(i);
      }
    }
  }

  // The one line of hvdrun that says why the job failed names the interior host and, for a
  // loss, the subtree it took with it.
  void expectInteriorNamed(const RunResult& r) {
    EXPECT_NE(r.output.find("agent on " + c().address(kInterior)), std::string::npos)
        << describe(r);
  }

  std::optional<Cluster> cluster_;
};

TEST_F(E2eTree, EveryRankRunsInPlaceThroughAWidthTwoTreeOfDepthThree) {
  const RunResult r = run(args({"--", HVD_E2E_WORKER_PATH, "allreduce"}), 90s);
  ASSERT_EQ(r.status, 0) << describe(r);
  expectPlacement(c(), r, std::vector<int>(kHosts, kSlots));
  // The shape: the interior agents relayed to their subtrees, the leaves to nobody.
  EXPECT_TRUE(agentLogHas(c(), 1, {"relaying to 3 host(s)"}, 5s)) << c().agentLog(1);
  EXPECT_TRUE(agentLogHas(c(), 2, {"relaying to 1 host(s)"}, 5s)) << c().agentLog(2);
  EXPECT_TRUE(agentLogHas(c(), 5, {"relaying to 2 host(s)"}, 5s)) << c().agentLog(5);
  for (int leaf : {3, 4, 6, 7}) {
    EXPECT_EQ(c().agentLog(leaf).find("relaying"), std::string::npos) << c().agentLog(leaf);
  }
  // h3's launch came from h2, h2's from h1: three hops, each signed and checked on its own.
  const std::string fromH1 = "for ipv4:" + c().address(1) + ":";
  const std::string fromH2 = "for ipv4:" + c().address(2) + ":";
  EXPECT_NE(c().agentLog(2).find(fromH1), std::string::npos) << c().agentLog(2);
  EXPECT_NE(c().agentLog(3).find(fromH2), std::string::npos) << c().agentLog(3);
  expectNothingLeft(-1);
}

TEST_F(E2eTree, AnInteriorAgentKilledWhileTheJobRunsFailsItNamingTheAgentAndItsSubtree) {
  Child hvdrun(args({"--grace", "2", "--", HVD_E2E_WORKER_PATH, "sleep"}));
  ASSERT_TRUE(hvdrun.waitForOutput(
      [](const std::string& out) { return countOf(out, " ready") >= static_cast<size_t>(kNp); },
      60s))
      << hvdrun.output();
  const auto killed = Clock::now();
  ASSERT_EQ(::kill(c().agentPid(kInterior), SIGKILL), 0);
  const RunResult r = hvdrun.finish(60s);
  const double seconds = std::chrono::duration<double>(Clock::now() - killed).count();
  std::printf("interior agent killed while running: hvdrun exited %d after %.2f s\n", r.status,
              seconds);
  EXPECT_EQ(r.status, kExitAgentLost) << describe(r);
  // A killed agent's connections reset at once: no keepalive to wait for.
  EXPECT_LT(seconds, 5.0) << describe(r);
  expectInteriorNamed(r);
  std::string subtree = "the hosts it relayed to are lost with it:";
  for (int h : kSubtree) subtree += " " + c().address(h);
  EXPECT_NE(r.output.find(subtree), std::string::npos) << describe(r);
  expectNothingLeft(kInterior);
}

TEST_F(E2eTree, AnInteriorAgentKilledWhileTheJobLaunchesFailsItWithNoOrphans) {
  Child hvdrun(args({"--grace", "2", "--", HVD_E2E_WORKER_PATH, "sleep"}));
  // The moment h1's first rank exists, h1 is relaying the launch down its subtree; h3 (two hops
  // below) is then frozen, so its launch cannot be confirmed, and h1 is killed: the launch
  // through h1 is in flight.
  const int frozen = 3;
  const auto deadline = Clock::now() + 60s;
  while (c().pidsIn(kInterior).size() < 2 && Clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_GE(c().pidsIn(kInterior).size(), 2u) << hvdrun.output();
  ASSERT_EQ(::kill(c().agentPid(frozen), SIGSTOP), 0);
  const auto killed = Clock::now();
  ASSERT_EQ(::kill(c().agentPid(kInterior), SIGKILL), 0);
  const RunResult r = hvdrun.finish(60s);
  const double seconds = std::chrono::duration<double>(Clock::now() - killed).count();
  ::kill(c().agentPid(frozen), SIGCONT);
  std::printf("interior agent killed while launching: hvdrun exited %d after %.2f s\n", r.status,
              seconds);
  // The launch cannot complete (71); only had h3 confirmed its launch before it froze would the
  // job have been running, and then it fails as a lost agent (75). Either way at once, naming
  // the agent.
  EXPECT_TRUE(r.status == 71 || r.status == kExitAgentLost) << describe(r);
  // The frozen host holds up nobody: not h2's watch over its own caller, not the leader's end
  // of the job (its last Unreserve to h3 finishes in the background).
  EXPECT_LT(seconds, 5.0) << describe(r);
  expectInteriorNamed(r);
  // A launch that could not complete left some rank unstarted. (On a loaded machine h3 may
  // have started its ranks before it froze: then every rank is up and the job fails as lost.)
  if (r.status == 71) {
    EXPECT_LT(countOf(r.output, " ready"), static_cast<size_t>(kNp)) << describe(r);
  }
  expectNothingLeft(kInterior);
}

TEST_F(E2eTree, AnInteriorAgentKilledWhileTheJobIsStoppedEndsItWithNoOrphans) {
  TempDir dir;
  const std::string fail = (dir.path() / "fail").string();
  // Every rank ignores SIGTERM (the stop lasts its whole grace); the last rank, on h7, fails
  // once told to, which stops the job.
  const std::string script =
      "trap '' TERM; echo \"rank $HVD_RANK up\"; "
      "if [ \"$HVD_RANK\" = " +
      std::to_string(kNp - 1) +
      " ]; then "
      "while [ ! -e " +
      fail + " ]; do sleep 0.05; done; exit 3; fi; exec sleep 600";
  Child hvdrun(args({"--grace", "4", "--", "/bin/sh", "-c", script}));
  ASSERT_TRUE(hvdrun.waitForOutput(
      [](const std::string& out) { return countOf(out, " up") >= static_cast<size_t>(kNp); }, 60s))
      << hvdrun.output();
  const auto failed = Clock::now();
  ASSERT_TRUE(run({"touch", fail}, 10s).status == 0);
  // The stop is on its way down the tree (the ranks ignore it): lose h1 in its grace.
  ASSERT_TRUE(agentLogHas(c(), 3, {"stop (signal 15"}, 10s)) << c().agentLog(3);
  ASSERT_EQ(::kill(c().agentPid(kInterior), SIGKILL), 0);
  const RunResult r = hvdrun.finish(60s);
  const double seconds = std::chrono::duration<double>(Clock::now() - failed).count();
  std::printf("interior agent killed while stopping: hvdrun exited %d after %.2f s\n", r.status,
              seconds);
  // The root cause stays the rank that failed first; the job ends with the grace (4 s) and
  // the exits after SIGKILL, not at the stop deadline (grace + 10 s).
  EXPECT_EQ(r.status, 3) << describe(r);
  EXPECT_NE(r.output.find("rank " + std::to_string(kNp - 1) + " on " + c().address(7)),
            std::string::npos)
      << describe(r);
  EXPECT_LT(seconds, 12.0) << describe(r);
  expectNothingLeft(kInterior);
}

}  // namespace
}  // namespace hvd::e2e
