// Job coordinator (agent/coordinator): what each host is asked to launch, and how a job fails
// fast with one root cause, driven through fake agents and a manual clock (no threads).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agent/coordinator/exit_codes.h"
#include "agent/coordinator/fake_node_agent.h"
#include "agent/coordinator/job_coordinator.h"

namespace hvd::agent::coordinator {
namespace {

using namespace std::chrono_literals;
using process::ExitStatus;
using process::Stream;

class ManualClock : public Clock {
 public:
  std::chrono::steady_clock::time_point now() override { return now_; }
  void advance(std::chrono::milliseconds d) { now_ += d; }

 private:
  std::chrono::steady_clock::time_point now_{};
};

struct RecordingClient : ClientEvents {
  struct Line {
    int rank;
    std::string host;
    Stream stream;
    std::string text;
  };
  void onOutput(int rank, const std::string& host, Stream stream, std::string_view line) override {
    lines.push_back({rank, host, stream, std::string(line)});
  }
  void onJobEnd(const JobResult& result) override { ends.push_back(result); }
  std::vector<Line> lines;
  std::vector<JobResult> ends;
};

std::map<std::string, std::string> envOf(const RankLaunch& launch) {
  std::map<std::string, std::string> env;
  for (const std::string& kv : launch.spec.env) {
    size_t eq = kv.find('=');
    env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

// Hosts given as (name, slots or -1 for "from the agent").
class CoordinatorTest : public ::testing::Test {
 protected:
  void makeJob(const std::vector<std::pair<std::string, int>>& hosts, int np) {
    spec_.jobId = "job-1";
    spec_.argv = {"./train", "--epochs", "1"};
    spec_.env = {"PATH=/usr/bin:/bin", "RANK=99"};
    spec_.cwd = "/work";
    spec_.np = np;
    spec_.grace = 5000ms;
    for (const auto& [name, slots] : hosts) {
      launcher::HostSlots h{name, std::nullopt};
      if (slots >= 0) h.slots = slots;
      spec_.hosts.push_back(h);
      agents_.push_back(std::make_unique<FakeNodeAgent>(name));
    }
  }
  JobCoordinator& coordinator() {
    if (!coordinator_) {
      std::vector<NodeAgent*> agents;
      for (auto& a : agents_) agents.push_back(a.get());
      coordinator_ = std::make_unique<JobCoordinator>(spec_, agents, StoreEndpoint{"a:5555", "tok"},
                                                      &client_, &clock_);
    }
    return *coordinator_;
  }
  FakeNodeAgent& agent(size_t i) { return *agents_[i]; }
  size_t totalStops() const {
    size_t n = 0;
    for (const auto& a : agents_) n += a->stops().size();
    return n;
  }
  const JobResult& onlyEnd() {
    EXPECT_EQ(client_.ends.size(), 1u);
    return client_.ends.front();
  }

  JobSpec spec_;
  std::vector<std::unique_ptr<FakeNodeAgent>> agents_;
  RecordingClient client_;
  ManualClock clock_;
  std::unique_ptr<JobCoordinator> coordinator_;
};

TEST_F(CoordinatorTest, HeterogeneousSlotsLaunchTheRightRanksWithTheirEnvironment) {
  makeJob({{"a", 1}, {"b", 2}, {"c", 3}}, 6);
  ASSERT_TRUE(coordinator().start());
  struct Want {
    size_t host;
    int rank, local, localSize, cross, crossSize;
  };
  const std::vector<Want> want = {{0, 0, 0, 1, 0, 3}, {1, 1, 0, 2, 1, 3}, {1, 2, 1, 2, 0, 2},
                                  {2, 3, 0, 3, 2, 3}, {2, 4, 1, 3, 1, 2}, {2, 5, 2, 3, 0, 1}};
  std::vector<std::vector<int>> ranksPerHost(3);
  for (size_t h = 0; h < 3; ++h) {
    ASSERT_EQ(agent(h).launches().size(), 1u) << "host " << h;
    const std::vector<RankLaunch> ranks = agent(h).launches()[0].ranks;
    for (const RankLaunch& l : ranks) ranksPerHost[h].push_back(l.rank);
    EXPECT_EQ(agent(h).launches()[0].jobId, "job-1");
  }
  EXPECT_EQ(ranksPerHost, (std::vector<std::vector<int>>{{0}, {1, 2}, {3, 4, 5}}));
  for (const Want& w : want) {
    const std::vector<RankLaunch> ranks = agent(w.host).launches()[0].ranks;
    auto it = std::find_if(ranks.begin(), ranks.end(),
                           [&](const RankLaunch& l) { return l.rank == w.rank; });
    ASSERT_NE(it, ranks.end());
    auto env = envOf(*it);
    EXPECT_EQ(env["HVD_RANK"], std::to_string(w.rank));
    EXPECT_EQ(env["RANK"], std::to_string(w.rank)) << "forwarded RANK must not win";
    EXPECT_EQ(env["HVD_SIZE"], "6");
    EXPECT_EQ(env["HVD_LOCAL_RANK"], std::to_string(w.local)) << "rank " << w.rank;
    EXPECT_EQ(env["HVD_LOCAL_SIZE"], std::to_string(w.localSize)) << "rank " << w.rank;
    EXPECT_EQ(env["HVD_CROSS_RANK"], std::to_string(w.cross)) << "rank " << w.rank;
    EXPECT_EQ(env["HVD_CROSS_SIZE"], std::to_string(w.crossSize)) << "rank " << w.rank;
    EXPECT_EQ(env["HVD_STORE_ADDR"], "a:5555");
    EXPECT_EQ(env["HVD_STORE_TOKEN"], "tok");
    EXPECT_EQ(env["MASTER_ADDR"], "a");
    EXPECT_EQ(env["MASTER_PORT"], "29500");
    EXPECT_EQ(env["PATH"], "/usr/bin:/bin");
    EXPECT_EQ(it->spec.argv, (std::vector<std::string>{"./train", "--epochs", "1"}));
    EXPECT_EQ(it->spec.cwd, "/work");
  }
  EXPECT_FALSE(coordinator().finished());
}

TEST_F(CoordinatorTest, SlotsDefaultToGpuCountThenToOne) {
  makeJob({{"g", -1}, {"c", -1}}, 3);
  agent(0).setGpuCount(2);
  ASSERT_TRUE(coordinator().start());
  ASSERT_EQ(agent(0).launches().size(), 1u);
  ASSERT_EQ(agent(1).launches().size(), 1u);
  const std::vector<RankLaunch> onGpuHost = agent(0).launches()[0].ranks;
  const std::vector<RankLaunch> onCpuHost = agent(1).launches()[0].ranks;
  ASSERT_EQ(onGpuHost.size(), 2u);
  EXPECT_EQ(envOf(onGpuHost[0])["HVD_GPU"], "0");
  EXPECT_EQ(envOf(onGpuHost[1])["HVD_GPU"], "1");
  ASSERT_EQ(onCpuHost.size(), 1u);
  EXPECT_EQ(onCpuHost[0].rank, 2);
  EXPECT_EQ(envOf(onCpuHost[0]).count("HVD_GPU"), 0u);
}

TEST_F(CoordinatorTest, NpAboveDefaultSlotsIsAUsageErrorNamingTheSlots) {
  makeJob({{"g", -1}, {"c", -1}}, 4);
  agent(0).setGpuCount(2);
  EXPECT_FALSE(coordinator().start());
  const JobResult& r = onlyEnd();
  EXPECT_EQ(r.outcome, JobOutcome::kInvalidJob);
  EXPECT_EQ(r.exitCode, kExitUsage);
  EXPECT_NE(r.summary.find("3"), std::string::npos) << r.summary;
  EXPECT_TRUE(agent(0).launches().empty());
}

TEST_F(CoordinatorTest, GpusPerRankDividesTheDefaultSlotsAndGivesConsecutiveGpus) {
  makeJob({{"g", -1}}, 2);
  spec_.gpusPerRank = 2;
  spec_.gpuBind = node::GpuBind::kVisible;
  agent(0).setGpuCount(4);
  ASSERT_TRUE(coordinator().start());
  ASSERT_EQ(agent(0).launches().size(), 1u);
  const std::vector<RankLaunch> ranks = agent(0).launches()[0].ranks;
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(envOf(ranks[0])["HVD_GPU"], "0,1");
  EXPECT_EQ(envOf(ranks[0])["CUDA_VISIBLE_DEVICES"], "0,1");
  EXPECT_EQ(envOf(ranks[1])["HVD_GPU"], "2,3");
  EXPECT_EQ(envOf(ranks[1])["CUDA_VISIBLE_DEVICES"], "2,3");
}

TEST_F(CoordinatorTest, MoreGpuRanksThanGpusIsAUsageErrorNamingTheHost) {
  makeJob({{"gpu-a", 3}}, 3);
  agent(0).setGpuCount(2);
  EXPECT_FALSE(coordinator().start());
  const JobResult& r = onlyEnd();
  EXPECT_EQ(r.outcome, JobOutcome::kInvalidJob);
  EXPECT_EQ(r.exitCode, kExitUsage);
  EXPECT_NE(r.summary.find("host 'gpu-a' has 2 GPU(s) but 3 rank(s)"), std::string::npos)
      << r.summary;
  EXPECT_NE(r.summary.find("--oversubscribe"), std::string::npos) << r.summary;
  EXPECT_TRUE(agent(0).launches().empty());
}

TEST_F(CoordinatorTest, OversubscribedGpuRanksShareTheGpusRoundRobin) {
  makeJob({{"gpu-a", 3}}, 3);
  spec_.oversubscribe = true;
  agent(0).setGpuCount(2);
  ASSERT_TRUE(coordinator().start());
  const std::vector<RankLaunch> ranks = agent(0).launches()[0].ranks;
  ASSERT_EQ(ranks.size(), 3u);
  EXPECT_EQ(envOf(ranks[0])["HVD_GPU"], "0");
  EXPECT_EQ(envOf(ranks[1])["HVD_GPU"], "1");
  EXPECT_EQ(envOf(ranks[2])["HVD_GPU"], "0");
}

TEST_F(CoordinatorTest, UnreachableAgentFailsAtOnceNamingHostAndAddress) {
  makeJob({{"a", 1}, {"b", 1}}, 2);
  agent(1).failDescribe("connection refused");
  EXPECT_FALSE(coordinator().start());
  const JobResult& r = onlyEnd();
  EXPECT_EQ(r.outcome, JobOutcome::kAgentUnreachable);
  EXPECT_EQ(r.exitCode, kExitAgentUnreachable);
  EXPECT_EQ(r.summary, "hvdrun: agent on b (b:7070) is unreachable: connection refused");
  EXPECT_TRUE(agent(0).launches().empty()) << "nothing may start before every host answered";
}

TEST_F(CoordinatorTest, AgentRefusingTheLeadersKeyIsAnAuthenticationFailure) {
  makeJob({{"a", 1}, {"b", 1}}, 2);
  agent(1).failDescribe("authentication failed: bad signature", /*authentication=*/true);
  EXPECT_FALSE(coordinator().start());
  const JobResult& r = onlyEnd();
  EXPECT_EQ(r.exitCode, kExitAuthenticationFailed);
  EXPECT_EQ(r.summary,
            "hvdrun: agent on b (b:7070) refused the leader's request: authentication failed: "
            "bad signature (is the cluster key the same on every host?)");
  EXPECT_TRUE(agent(0).launches().empty());
}

TEST_F(CoordinatorTest, LaunchFailureStopsLaunchedHostsAndNamesTheHost) {
  makeJob({{"a", 1}, {"b", 1}, {"c", 1}}, 3);
  agent(1).failLaunch("rank 1: cannot execute './train': No such file or directory");
  EXPECT_TRUE(coordinator().start()) << "rank 0 on a still has to report its exit";
  ASSERT_EQ(agent(0).stops().size(), 1u);
  EXPECT_EQ(agent(0).stops()[0].signal, SIGTERM);
  EXPECT_EQ(agent(0).stops()[0].grace, 5000ms);
  EXPECT_TRUE(agent(1).stops().empty());
  EXPECT_TRUE(agent(2).launches().empty()) << "no more hosts are launched after a failure";
  agent(0).emitExit(0, ExitStatus{0, SIGTERM});
  const JobResult& r = onlyEnd();
  EXPECT_EQ(r.outcome, JobOutcome::kLaunchFailed);
  EXPECT_EQ(r.exitCode, kExitLaunchFailed);
  EXPECT_EQ(r.host, "b");
  EXPECT_EQ(r.summary,
            "hvdrun: launch on b failed: rank 1: cannot execute './train': No such file or "
            "directory");
}

TEST_F(CoordinatorTest, FailingRankStopsEveryHostOnceAndIsTheRootCause) {
  makeJob({{"a", 2}, {"b", 2}}, 4);
  ASSERT_TRUE(coordinator().start());
  agent(0).emitOutput(0, Stream::kStderr, "rank 0 noise");
  for (int i = 0; i < 25; ++i) agent(1).emitOutput(3, Stream::kStderr, "err " + std::to_string(i));
  agent(1).emitOutput(3, Stream::kStdout, "not stderr");
  agent(1).emitExit(3, ExitStatus{3, 0});
  EXPECT_EQ(agent(0).stops().size(), 1u);
  EXPECT_EQ(agent(1).stops().size(), 1u);
  // The ranks killed by the stop, and a second failure, change nothing.
  agent(0).emitExit(0, ExitStatus{0, SIGTERM});
  agent(0).emitExit(1, ExitStatus{1, 0});
  EXPECT_TRUE(client_.ends.empty()) << "rank 2 has not reported yet";
  agent(1).emitExit(2, ExitStatus{0, SIGKILL});
  EXPECT_EQ(totalStops(), 2u) << "each host is stopped once";
  const JobResult& r = onlyEnd();
  EXPECT_EQ(r.outcome, JobOutcome::kRankFailed);
  EXPECT_EQ(r.exitCode, 3);
  EXPECT_EQ(r.rank, 3);
  EXPECT_EQ(r.host, "b");
  EXPECT_EQ(r.summary, "hvdrun: rank 3 on b exited with code 3");
  ASSERT_EQ(r.stderrTail.size(), JobCoordinator::kStderrTailLines);
  EXPECT_EQ(r.stderrTail.front(), "err 5");
  EXPECT_EQ(r.stderrTail.back(), "err 24");
  EXPECT_EQ(client_.lines.size(), 27u);
  EXPECT_EQ(client_.lines[0].host, "a");
  EXPECT_EQ(client_.lines.back().host, "b");
  EXPECT_EQ(client_.lines.back().text, "not stderr");
}

TEST_F(CoordinatorTest, RankKilledBySignalExitsWith128PlusSignal) {
  makeJob({{"a", 2}}, 2);
  ASSERT_TRUE(coordinator().start());
  agent(0).emitExit(1, ExitStatus{0, SIGKILL});
  agent(0).emitExit(0, ExitStatus{0, SIGTERM});
  const JobResult& r = onlyEnd();
  EXPECT_EQ(r.exitCode, 137);
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(r.summary, "hvdrun: rank 1 on a was killed by signal 9 (Killed)");
}

TEST_F(CoordinatorTest, LostAgentFailsTheJobWithItsConstant) {
  makeJob({{"a", 1}, {"b", 1}, {"c", 1}}, 3);
  ASSERT_TRUE(coordinator().start());
  agent(2).loseAgent("stream closed: connection reset");
  EXPECT_EQ(agent(0).stops().size(), 1u);
  EXPECT_EQ(agent(1).stops().size(), 1u);
  EXPECT_TRUE(agent(2).stops().empty()) << "a lost agent cannot be told anything";
  agent(0).emitExit(0, ExitStatus{0, SIGTERM});
  agent(1).emitExit(1, ExitStatus{143, 0});
  const JobResult& r = onlyEnd();
  EXPECT_EQ(r.outcome, JobOutcome::kAgentLost);
  EXPECT_EQ(r.exitCode, kExitAgentLost);
  EXPECT_EQ(r.host, "c");
  EXPECT_EQ(r.summary, "hvdrun: agent on c was lost: stream closed: connection reset");
}

TEST_F(CoordinatorTest, AllRanksSucceedingEndsWithZeroAndNoStop) {
  makeJob({{"a", 2}, {"b", 1}}, 3);
  ASSERT_TRUE(coordinator().start());
  agent(0).emitExit(0, ExitStatus{});
  agent(1).emitExit(2, ExitStatus{});
  EXPECT_FALSE(coordinator().finished());
  agent(0).emitExit(1, ExitStatus{});
  const JobResult& r = onlyEnd();
  EXPECT_EQ(r.outcome, JobOutcome::kSucceeded);
  EXPECT_EQ(r.exitCode, 0);
  EXPECT_EQ(totalStops(), 0u);
}

TEST_F(CoordinatorTest, CancelStopsGracefullyAndSecondCancelWithinTwoSecondsKills) {
  makeJob({{"a", 1}, {"b", 1}}, 2);
  ASSERT_TRUE(coordinator().start());
  coordinator().cancel();
  for (size_t h = 0; h < 2; ++h) {
    ASSERT_EQ(agent(h).stops().size(), 1u);
    EXPECT_EQ(agent(h).stops()[0].signal, SIGTERM);
    EXPECT_EQ(agent(h).stops()[0].grace, 5000ms);
  }
  clock_.advance(1500ms);
  coordinator().cancel();
  for (size_t h = 0; h < 2; ++h) {
    ASSERT_EQ(agent(h).stops().size(), 2u);
    EXPECT_EQ(agent(h).stops()[1].signal, SIGKILL);
    EXPECT_EQ(agent(h).stops()[1].grace, 0ms);
  }
  agent(0).emitExit(0, ExitStatus{0, SIGKILL});  // killed ranks are not a root cause
  agent(1).emitExit(1, ExitStatus{0, SIGKILL});
  const JobResult& r = onlyEnd();
  EXPECT_EQ(r.outcome, JobOutcome::kCancelled);
  EXPECT_EQ(r.exitCode, kExitCancelled);
}

TEST_F(CoordinatorTest, CancelsMoreThanTwoSecondsApartDoNotEscalate) {
  makeJob({{"a", 1}}, 1);
  ASSERT_TRUE(coordinator().start());
  coordinator().cancel();
  clock_.advance(2500ms);
  coordinator().cancel();
  ASSERT_EQ(agent(0).stops().size(), 1u);
  EXPECT_EQ(agent(0).stops()[0].signal, SIGTERM);
}

TEST_F(CoordinatorTest, FailureAfterCancelIsNotARootCause) {
  makeJob({{"a", 2}}, 2);
  ASSERT_TRUE(coordinator().start());
  coordinator().cancel();
  agent(0).emitExit(0, ExitStatus{1, 0});  // a rank that dies badly while being stopped
  agent(0).emitExit(1, ExitStatus{0, SIGTERM});
  const JobResult& r = onlyEnd();
  EXPECT_EQ(r.outcome, JobOutcome::kCancelled);
  EXPECT_EQ(r.exitCode, kExitCancelled);
  EXPECT_EQ(r.rank, -1);
  EXPECT_EQ(agent(0).stops().size(), 1u);
}

TEST_F(CoordinatorTest, SilentHostsEndTheJobAfterGracePlusSlack) {
  makeJob({{"a", 1}, {"b", 1}}, 2);
  ASSERT_TRUE(coordinator().start());
  agent(0).emitExit(0, ExitStatus{7, 0});
  clock_.advance(5000ms + JobCoordinator::kStopReportSlack - 1ms);
  coordinator().tick();
  EXPECT_FALSE(coordinator().finished());
  clock_.advance(1ms);
  coordinator().tick();
  const JobResult& r = onlyEnd();
  EXPECT_EQ(r.exitCode, 7);
  EXPECT_EQ(r.unreportedRanks, (std::vector<int>{1}));
}

TEST_F(CoordinatorTest, TimeLimitStopsGracefullyAndEndsInTimeout) {
  makeJob({{"a", 1}, {"b", 1}}, 2);
  spec_.timeLimit = 2000ms;
  ASSERT_TRUE(coordinator().start());
  clock_.advance(1999ms);
  coordinator().tick();
  EXPECT_TRUE(agent(0).stops().empty()) << "stopped before its limit";
  clock_.advance(1ms);
  coordinator().tick();
  for (size_t h = 0; h < 2; ++h) {
    ASSERT_EQ(agent(h).stops().size(), 1u);
    EXPECT_EQ(agent(h).stops()[0].signal, SIGTERM);
    EXPECT_EQ(agent(h).stops()[0].grace, 5000ms);
  }
  coordinator().tick();  // once only
  EXPECT_EQ(agent(0).stops().size(), 1u);
  // The stopped ranks exit non-zero: consequences of the limit, not a root cause.
  agent(0).emitExit(0, ExitStatus{0, SIGTERM});
  agent(1).emitExit(1, ExitStatus{143, 0});
  const JobResult& r = onlyEnd();
  EXPECT_EQ(r.outcome, JobOutcome::kTimedOut);
  EXPECT_EQ(r.exitCode, kExitTimeout);
  EXPECT_NE(r.summary.find("time limit of 2 s"), std::string::npos) << r.summary;
  const std::vector<RankSnapshot> ranks = coordinator().ranks();
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(ranks[1].host, "b");
  EXPECT_EQ(ranks[1].state, RankState::kExited);
  ASSERT_TRUE(ranks[1].exit.has_value());
  EXPECT_EQ(ranks[1].exit->exitCode, 143);
}

TEST_F(CoordinatorTest, AFailureBeforeTheTimeLimitStaysTheRootCause) {
  makeJob({{"a", 2}}, 2);
  spec_.timeLimit = 1000ms;
  ASSERT_TRUE(coordinator().start());
  agent(0).emitExit(1, ExitStatus{3, 0});
  clock_.advance(5000ms);
  coordinator().tick();
  agent(0).emitExit(0, ExitStatus{0, SIGTERM});
  const JobResult& r = onlyEnd();
  EXPECT_EQ(r.outcome, JobOutcome::kRankFailed);
  EXPECT_EQ(r.exitCode, 3);
  EXPECT_EQ(r.rank, 1);
}

TEST_F(CoordinatorTest, CancelWithAGraceUsesItAndRanksReportTheirPids) {
  makeJob({{"a", 2}}, 2);
  ASSERT_TRUE(coordinator().start());
  for (const RankSnapshot& r : coordinator().ranks()) {
    EXPECT_EQ(r.state, RankState::kRunning);
    EXPECT_EQ(r.host, "a");
    EXPECT_EQ(r.pid, FakeNodeAgent::kFakePidBase + r.rank);
  }
  EXPECT_TRUE(coordinator().launched());
  coordinator().cancel(250ms);
  ASSERT_EQ(agent(0).stops().size(), 1u);
  EXPECT_EQ(agent(0).stops()[0].signal, SIGTERM);
  EXPECT_EQ(agent(0).stops()[0].grace, 250ms);
}

}  // namespace
}  // namespace hvd::agent::coordinator
