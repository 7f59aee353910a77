// Job coordinator (agent/coordinator): what each host is asked to launch, and how a job fails
// fast with one root cause, driven through fake agents and a manual clock (no threads, except
// the fallback timer of HeldAnswers).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agent/coordinator/fake_node_agent.h"
#include "agent/coordinator/job_coordinator.h"
#include "contract/exit_codes.h"

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
      contract::HostSlots h{name, std::nullopt};
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
  EXPECT_EQ(r.exitCode, hvd::contract::kExitUsage);
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
  EXPECT_EQ(r.exitCode, hvd::contract::kExitUsage);
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
  EXPECT_EQ(r.exitCode, hvd::contract::kExitAgentUnreachable);
  EXPECT_EQ(r.summary, "hvdrun: agent on b (b:7070) is unreachable: connection refused");
  EXPECT_TRUE(agent(0).launches().empty()) << "nothing may start before every host answered";
}

TEST_F(CoordinatorTest, AgentRefusingTheLeadersKeyIsAnAuthenticationFailure) {
  makeJob({{"a", 1}, {"b", 1}}, 2);
  agent(1).failDescribe("authentication failed: bad signature", /*authentication=*/true);
  EXPECT_FALSE(coordinator().start());
  const JobResult& r = onlyEnd();
  EXPECT_EQ(r.exitCode, hvd::contract::kExitAuthenticationFailed);
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
  EXPECT_EQ(r.exitCode, hvd::contract::kExitLaunchFailed);
  EXPECT_EQ(r.host, "b");
  EXPECT_EQ(r.summary,
            "hvdrun: launch on b failed: rank 1: cannot execute './train': No such file or "
            "directory");
}

TEST_F(CoordinatorTest, EveryHostsLaunchGoesOutBeforeTheLeaderWaitsForAnyAnswer) {
  makeJob({{"a", 1}, {"b", 1}, {"c", 1}}, 3);
  std::vector<std::string> calls;
  for (int h = 0; h < 3; ++h) agent(h).launchInTwoHalves(&calls);
  ASSERT_TRUE(coordinator().start());
  EXPECT_EQ(calls, (std::vector<std::string>{"begin a", "begin b", "begin c", "await a", "await b",
                                             "await c"}));
  for (int h = 0; h < 3; ++h) EXPECT_EQ(agent(h).launches().size(), 1u) << h;
}

TEST_F(CoordinatorTest, EveryHostIsDescribedAndReservedBeforeTheLeaderWaitsForAnyAnswer) {
  makeJob({{"a", 1}, {"b", 1}, {"c", 1}}, 3);
  HeldAnswers describes(3, 2s);
  HeldAnswers reserves(3, 2s);
  for (int h = 0; h < 3; ++h) {
    agent(h).holdDescribes(&describes);
    agent(h).holdReserves(&reserves);
  }
  ASSERT_TRUE(coordinator().start());
  const std::vector<std::string> together = {"ask a",    "ask b",    "ask c",
                                             "answer a", "answer b", "answer c"};
  EXPECT_EQ(describes.log(), together);
  EXPECT_EQ(reserves.log(), together);
  for (int h = 0; h < 3; ++h) EXPECT_EQ(agent(h).launches().size(), 1u) << h;
}

TEST_F(CoordinatorTest, AmongConcurrentDescribesTheFirstFailingHostInOrderIsReported) {
  makeJob({{"a", 1}, {"b", 1}, {"c", 1}}, 3);
  HeldAnswers describes(3, 2s);
  for (int h = 0; h < 3; ++h) agent(h).holdDescribes(&describes);
  agent(2).failDescribe("connection refused");
  agent(1).failDescribe("no answer within 5 s");
  EXPECT_FALSE(coordinator().start());
  EXPECT_EQ(onlyEnd().summary, "hvdrun: agent on b (b:7070) is unreachable: no answer within 5 s");
  for (int h = 0; h < 3; ++h) EXPECT_TRUE(agent(h).launches().empty()) << h;
}

TEST_F(CoordinatorTest, ALaunchFailureAmongConcurrentLaunchesStopsEveryStartedHost) {
  makeJob({{"a", 1}, {"b", 1}, {"c", 1}}, 3);
  for (int h = 0; h < 3; ++h) agent(h).launchInTwoHalves();
  agent(1).failLaunch("rank 1: cannot execute './train': No such file or directory");
  EXPECT_TRUE(coordinator().start()) << "ranks 0 and 2 still have to report their exits";
  // c's launch was out before b's answer came: it started, so it is stopped too.
  ASSERT_EQ(agent(0).stops().size(), 1u);
  ASSERT_EQ(agent(2).stops().size(), 1u);
  EXPECT_EQ(agent(2).stops()[0].signal, SIGTERM);
  EXPECT_TRUE(agent(1).stops().empty());
  agent(0).emitExit(0, ExitStatus{0, SIGTERM});
  EXPECT_TRUE(client_.ends.empty()) << "rank 2 has not reported yet";
  agent(2).emitExit(2, ExitStatus{0, SIGTERM});
  const JobResult& r = onlyEnd();
  EXPECT_EQ(r.outcome, JobOutcome::kLaunchFailed);
  EXPECT_EQ(r.host, "b");
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
  EXPECT_EQ(r.exitCode, hvd::contract::kExitAgentLost);
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
  EXPECT_EQ(r.exitCode, hvd::contract::kExitCancelled);
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
  EXPECT_EQ(r.exitCode, hvd::contract::kExitCancelled);
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
  EXPECT_EQ(r.exitCode, hvd::contract::kExitTimeout);
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

// The ledger path: two coordinators share each host's ledger, as jobs share a node.
class LedgerCoordinatorTest : public ::testing::Test {
 protected:
  static std::vector<node::GpuInfo> gpus(int n) {
    std::vector<node::GpuInfo> out;
    for (int i = 0; i < n; ++i) out.push_back({i, "GPU-fake-" + std::to_string(i), "", "", 0});
    return out;
  }
  JobSpec spec(const std::string& id, int np) {
    JobSpec s;
    s.jobId = id;
    s.argv = {"./train"};
    s.np = np;
    s.hosts = {{"a", std::nullopt}, {"b", std::nullopt}};
    s.gpuBind = node::GpuBind::kVisible;
    return s;
  }
  std::unique_ptr<JobCoordinator> make(const JobSpec& s) {
    return std::make_unique<JobCoordinator>(s, std::vector<NodeAgent*>{&a_, &b_},
                                            StoreEndpoint{"a:5555", "tok"}, &client_, &clock_);
  }
  void SetUp() override {
    for (FakeNodeAgent* agent : {&a_, &b_}) agent->setGpuCount(4);
    a_.useLedger(&ledgerA_);
    b_.useLedger(&ledgerB_);
  }
  std::chrono::steady_clock::time_point now_{};
  ledger::ResourceLedger ledgerA_{"a", gpus(4), 0, [this] { return now_; }};
  ledger::ResourceLedger ledgerB_{"b", gpus(4), 0, [this] { return now_; }};
  FakeNodeAgent a_{"a"};
  FakeNodeAgent b_{"b"};
  RecordingClient client_;
  ManualClock clock_;
};

TEST_F(LedgerCoordinatorTest, ConcurrentJobsGetDisjointGpusOnEveryHost) {
  JobSpec small = spec("hvd-2", 2);
  small.hosts = {{"a", 1}, {"b", 1}};
  auto second = make(small);
  JobSpec s1 = spec("hvd-1", 4);
  s1.hosts = {{"a", 2}, {"b", 2}};
  auto firstSlots = make(s1);
  ASSERT_EQ(firstSlots->tryStart(true), JobCoordinator::Start::kRunning);
  ASSERT_EQ(second->tryStart(true), JobCoordinator::Start::kRunning);
  // hvd-1's ranks see GPUs 0 and 1 on each host, hvd-2's rank GPU 2: never the same GPU.
  const std::vector<LaunchRequest> launches = a_.launches();
  ASSERT_EQ(launches.size(), 2u);
  const LaunchRequest& r1 = launches[0];
  const LaunchRequest& r2 = launches[1];
  EXPECT_EQ(envOf(r1.ranks[0])["CUDA_VISIBLE_DEVICES"], "0");
  EXPECT_EQ(envOf(r1.ranks[1])["CUDA_VISIBLE_DEVICES"], "1");
  EXPECT_EQ(envOf(r2.ranks[0])["CUDA_VISIBLE_DEVICES"], "2");
  EXPECT_TRUE(r1.reserved);
  ASSERT_EQ(firstSlots->resources().size(), 2u);
  EXPECT_EQ(firstSlots->resources()[1].host, "b");
  EXPECT_EQ(firstSlots->resources()[1].gpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(firstSlots->resources()[1].gpuUuids,
            (std::vector<std::string>{"GPU-fake-0", "GPU-fake-1"}));
}

TEST_F(LedgerCoordinatorTest, ABusyHostGivesBackWhatOtherHostsGrantedAndSaysWhy) {
  // Another job holds 3 of b's GPUs.
  ASSERT_EQ(ledgerB_.reserve({"hvd-x", "hvd-x", 3, 1, false, {}, 30s}).verdict,
            ledger::Verdict::kGranted);
  JobSpec s = spec("hvd-1", 4);
  s.hosts = {{"a", 2}, {"b", 2}};
  auto job = make(s);
  EXPECT_EQ(job->tryStart(true), JobCoordinator::Start::kBusy);
  EXPECT_EQ(job->busyReason(), "waiting for 2 GPUs on b (1 free); held by hvd-x");
  EXPECT_TRUE(a_.launches().empty());
  EXPECT_TRUE(b_.launches().empty());
  EXPECT_EQ(a_.unreserves(), (std::vector<std::string>{"hvd-1"}));  // all or nothing
  EXPECT_TRUE(ledgerA_.holdings().empty());
  EXPECT_TRUE(client_.ends.empty());
  // Once b is free the same coordinator starts.
  ledgerB_.release("hvd-x");
  EXPECT_EQ(job->tryStart(true), JobCoordinator::Start::kRunning);
  EXPECT_EQ(b_.launches().size(), 1u);
}

TEST_F(LedgerCoordinatorTest, WithoutTheQueueABusyHostEndsTheJob) {
  ASSERT_EQ(ledgerA_.reserve({"hvd-x", "hvd-x", 4, 1, false, {}, 30s}).verdict,
            ledger::Verdict::kGranted);
  auto job = make(spec("hvd-1", 2));
  EXPECT_FALSE(job->start());
  ASSERT_EQ(client_.ends.size(), 1u);
  EXPECT_EQ(client_.ends[0].outcome, JobOutcome::kResourcesBusy);
  EXPECT_EQ(client_.ends[0].exitCode, hvd::contract::kExitResourcesBusy);
  EXPECT_EQ(client_.ends[0].summary,
            "hvdrun: job hvd-1 was not queued (--no-queue): waiting for 2 GPUs on a (0 free); "
            "held by hvd-x");
}

TEST_F(LedgerCoordinatorTest, ACancelWhileQueuedEndsTheJobWithoutStartingIt) {
  ASSERT_EQ(ledgerA_.reserve({"hvd-x", "hvd-x", 4, 1, false, {}, 30s}).verdict,
            ledger::Verdict::kGranted);
  auto job = make(spec("hvd-1", 2));
  ASSERT_EQ(job->tryStart(true), JobCoordinator::Start::kBusy);
  job->cancel();
  EXPECT_EQ(job->tryStart(true), JobCoordinator::Start::kEnded);
  ASSERT_EQ(client_.ends.size(), 1u);
  EXPECT_EQ(client_.ends[0].outcome, JobOutcome::kCancelled);
  EXPECT_TRUE(a_.launches().empty());
}

TEST_F(LedgerCoordinatorTest, ABusyFirstHostAlsoGivesBackWhatTheHostsAskedWithItGranted) {
  // Every host is asked at once, so b grants before a's refusal is known: b's share goes back.
  ASSERT_EQ(ledgerA_.reserve({"hvd-x", "hvd-x", 3, 1, false, {}, 30s}).verdict,
            ledger::Verdict::kGranted);
  JobSpec s = spec("hvd-1", 4);
  s.hosts = {{"a", 2}, {"b", 2}};
  auto job = make(s);
  EXPECT_EQ(job->tryStart(true), JobCoordinator::Start::kBusy);
  EXPECT_EQ(job->busyReason(), "waiting for 2 GPUs on a (1 free); held by hvd-x");
  EXPECT_EQ(b_.reserves().size(), 1u);
  EXPECT_EQ(b_.unreserves(), (std::vector<std::string>{"hvd-1"}));
  EXPECT_TRUE(ledgerB_.holdings().empty());
  EXPECT_TRUE(a_.unreserves().empty()) << "a granted nothing";
}

TEST_F(LedgerCoordinatorTest, AnAgentThatCannotReserveFailsTheJobNamingIt) {
  b_.failReserve("connection refused");
  JobSpec s = spec("hvd-1", 4);
  s.hosts = {{"a", 2}, {"b", 2}};
  auto job = make(s);
  EXPECT_EQ(job->tryStart(true), JobCoordinator::Start::kEnded);
  ASSERT_EQ(client_.ends.size(), 1u);
  EXPECT_EQ(client_.ends[0].outcome, JobOutcome::kAgentUnreachable);
  EXPECT_EQ(client_.ends[0].host, "b");
  EXPECT_TRUE(ledgerA_.holdings().empty());
}

TEST_F(LedgerCoordinatorTest, ALaunchFailureGivesBackTheHostsThatNeverLaunched) {
  a_.failLaunch("cannot execute './train': No such file or directory");
  JobSpec s = spec("hvd-1", 4);
  s.hosts = {{"a", 2}, {"b", 2}};
  auto job = make(s);
  EXPECT_FALSE(job->start());
  EXPECT_TRUE(b_.launches().empty());
  EXPECT_TRUE(ledgerB_.holdings().empty());
  EXPECT_EQ(b_.unreserves(), (std::vector<std::string>{"hvd-1"}));
}

TEST_F(LedgerCoordinatorTest, ARestartAttemptHasItsOwnLaunchIdAndTellsTheRanks) {
  JobSpec s = spec("hvd-1", 2);
  s.hosts = {{"a", 2}};
  s.attempt = 2;
  s.restart.maxRestarts = 3;
  s.preferredGpus = {{2, 3}};
  auto job = std::make_unique<JobCoordinator>(s, std::vector<NodeAgent*>{&a_},
                                              StoreEndpoint{"a:5555", "tok"}, &client_, &clock_);
  ASSERT_TRUE(job->start());
  const LaunchRequest r = a_.launches().back();
  EXPECT_EQ(r.jobId, "hvd-1.2");
  std::map<std::string, std::string> env = envOf(r.ranks[1]);
  EXPECT_EQ(env["HVD_JOB_ID"], "hvd-1");  // the store namespace keeps the job's name
  EXPECT_EQ(env["HVD_RESTART_COUNT"], "2");
  EXPECT_EQ(env["TORCHELASTIC_RESTART_COUNT"], "2");
  EXPECT_EQ(env["TORCHELASTIC_MAX_RESTARTS"], "3");
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "3");  // the previous attempt's GPUs, asked again
}

// The agents know a restart's ranks by its launch id: a stop by the job's id would find nothing
// and leave them running until the stop's deadline.
TEST_F(LedgerCoordinatorTest, ARestartAttemptIsStoppedByItsLaunchId) {
  JobSpec s = spec("hvd-1", 2);
  s.hosts = {{"a", 2}};
  s.attempt = 1;
  s.restart.maxRestarts = 1;
  auto job = std::make_unique<JobCoordinator>(s, std::vector<NodeAgent*>{&a_},
                                              StoreEndpoint{"a:5555", "tok"}, &client_, &clock_);
  ASSERT_TRUE(job->start());
  a_.emitExit(1, ExitStatus{1, 0});
  ASSERT_EQ(a_.stops().size(), 1u);
  EXPECT_EQ(a_.stops()[0].jobId, "hvd-1.1");
  job->cancel(std::nullopt);
  for (const FakeNodeAgent::StopCall& stop : a_.stops()) EXPECT_EQ(stop.jobId, "hvd-1.1");
}

TEST_F(CoordinatorTest, UptimeIsMeasuredFromEveryRankStartedToTheFailure) {
  makeJob({{"a", 2}}, 2);
  ASSERT_TRUE(coordinator().start());
  clock_.advance(1500ms);
  agent(0).emitExit(1, ExitStatus{3, 0});
  clock_.advance(800ms);  // the stop's consequences do not count
  agent(0).emitExit(0, ExitStatus{0, 15});
  EXPECT_EQ(onlyEnd().uptime, 1500ms);
}

JobResult rankFailure(int code, std::chrono::milliseconds uptime) {
  JobResult r;
  r.outcome = JobOutcome::kRankFailed;
  r.exitCode = code;
  r.status = ExitStatus{code, 0};
  r.uptime = uptime;
  return r;
}

TEST(RestartPolicy, ARankFailureRestartsWhileTheBudgetLasts) {
  RestartPolicy p;
  p.maxRestarts = 2;
  EXPECT_TRUE(decideRestart(p, rankFailure(1, 10s), 0).restart);
  EXPECT_TRUE(decideRestart(p, rankFailure(1, 10s), 1).restart);
  const RestartDecision last = decideRestart(p, rankFailure(1, 10s), 2);
  EXPECT_FALSE(last.restart);
  EXPECT_EQ(last.why, "no restarts left (--max-restarts 2)");
}

TEST(RestartPolicy, ListedExitCodesAndStartUpFailuresEndTheJob) {
  RestartPolicy p;
  p.maxRestarts = 5;
  p.noRestartOnExit = {2, 3};
  p.minUptime = 5s;
  const RestartDecision listed = decideRestart(p, rankFailure(3, 60s), 0);
  EXPECT_FALSE(listed.restart);
  EXPECT_EQ(listed.why, "exit code 3 is listed in --no-restart-on-exit");
  const RestartDecision early = decideRestart(p, rankFailure(1, 1200ms), 1);
  EXPECT_FALSE(early.restart);
  EXPECT_EQ(early.why,
            "attempt 1 failed after 1.2 s, sooner than --restart-min-uptime 5 s: a start-up "
            "failure, not restarted");
  EXPECT_TRUE(decideRestart(p, rankFailure(1, 5s), 1).restart);
}

TEST(RestartPolicy, OnlyFailuresTheProgramMaySurviveRestart) {
  RestartPolicy p;
  p.maxRestarts = 3;
  JobResult lost;
  lost.outcome = JobOutcome::kAgentLost;
  lost.uptime = 60s;
  EXPECT_TRUE(decideRestart(p, lost, 0).restart);
  for (JobOutcome o : {JobOutcome::kSucceeded, JobOutcome::kCancelled, JobOutcome::kTimedOut,
                       JobOutcome::kLaunchFailed, JobOutcome::kInvalidJob,
                       JobOutcome::kAgentUnreachable, JobOutcome::kResourcesBusy}) {
    JobResult r;
    r.outcome = o;
    r.uptime = 60s;
    const RestartDecision d = decideRestart(p, r, 0);
    EXPECT_FALSE(d.restart) << static_cast<int>(o);
    EXPECT_TRUE(d.why.empty());
  }
  RestartPolicy none;  // the default: never, and nothing to say about it
  const RestartDecision d = decideRestart(none, rankFailure(1, 60s), 0);
  EXPECT_FALSE(d.restart);
  EXPECT_TRUE(d.why.empty());
}

}  // namespace
}  // namespace hvd::agent::coordinator
