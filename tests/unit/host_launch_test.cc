// HostLaunch (agent/jobs/host_launch.h), the Launch RPC's logic without gRPC: real ranks
// (/bin/sh under PosixSpawner) on this host, a relay tree whose hosts are fake links, and a
// caller that records what it is told or goes away.
#include "agent/jobs/host_launch.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/process/posix_spawner.h"
#include "hvd/error.hpp"

namespace hvd::agent::jobs {
namespace {

using coordinator::LaunchRequest;
using coordinator::LaunchStatus;
using Kind = LaunchEvent::Kind;
using namespace std::chrono_literals;

LaunchRequest shellRanks(const std::string& jobId, const std::vector<int>& ranks,
                         const std::string& script) {
  LaunchRequest request;
  request.jobId = jobId;
  request.grace = 2000ms;
  for (int r : ranks) {
    coordinator::RankLaunch launch;
    launch.rank = r;
    launch.spec.argv = {"/bin/sh", "-c", script};
    launch.spec.env = {"R=" + std::to_string(r), "PATH=/usr/bin:/bin"};
    request.ranks.push_back(launch);
  }
  return request;
}

class RecordingCaller : public LaunchCaller {
 public:
  bool launched(const LaunchStatus& status) override {
    statuses.push_back(status);
    return true;
  }
  bool write(const LaunchEvent& event) override {
    events.push_back(event);
    return !(goneAfterLaunch || (goneAfterWrites >= 0 && int(events.size()) >= goneAfterWrites));
  }
  bool gone() override { return goneAfterLaunch; }

  std::vector<LaunchEvent> of(Kind kind) const {
    std::vector<LaunchEvent> out;
    for (const LaunchEvent& e : events) {
      if (e.kind == kind) out.push_back(e);
    }
    return out;
  }

  std::vector<LaunchStatus> statuses;
  std::vector<LaunchEvent> events;
  bool goneAfterLaunch = false;
  int goneAfterWrites = -1;
};

// A relayed host whose agent starts the ranks it is sent, which print one line and exit with
// their rank; or, with `lose`, an agent that is lost once it has answered.
class FakeLink : public relay::SubtreeLink {
 public:
  FakeLink(relay::Target target, bool lose) : target_(std::move(target)), lose_(lose) {}

  std::string host() const override { return target_.host; }
  std::string address() const override { return target_.address; }
  void describeTree(const std::vector<relay::Target>&, int,
                    std::function<void(std::vector<coordinator::DescribeResult>)>) override {
    ADD_FAILURE() << "a launch does not describe";
  }
  void reserveTree(const std::vector<ledger::Request>&, const std::vector<relay::Target>&, int,
                   std::function<void(std::vector<coordinator::ReserveResult>)>) override {
    ADD_FAILURE() << "a launch does not reserve";
  }
  void unreserveTree(const std::string&, const std::vector<relay::Target>&, int) override {}
  void stopTree(const std::string&, int, std::chrono::milliseconds,
                const std::vector<relay::Target>&, int) override {}
  std::string beginLaunchTree(const std::vector<LaunchRequest>& requests,
                              const std::vector<relay::Target>&, int,
                              coordinator::JobEvents* events) override {
    requests_ = requests;
    events_ = events;
    return "";
  }
  LaunchStatus awaitLaunchTree(const std::string& jobId, size_t index) override {
    EXPECT_EQ(index, 0u);
    EXPECT_EQ(jobId, requests_.at(0).jobId);
    if (lose_) {
      events_->onAgentLost(target_.host, "its stream broke");
      return {};
    }
    for (const coordinator::RankLaunch& r : requests_.at(0).ranks) {
      events_->onOutput(r.rank, process::Stream::kStdout, "from " + target_.host);
      events_->onExit(r.rank, process::ExitStatus{r.rank, 0});
    }
    return {};
  }
  void cancelLaunches() override {}
  void closeLaunches() override {}

 private:
  const relay::Target target_;
  const bool lose_;
  std::vector<LaunchRequest> requests_;
  coordinator::JobEvents* events_ = nullptr;
};

std::unique_ptr<relay::TreeHosts> fakeTree(const std::vector<std::string>& hosts,
                                           const std::set<std::string>& lost = {}) {
  std::vector<relay::Target> targets;
  for (const std::string& h : hosts) targets.push_back({h, h + ":7000"});
  return std::make_unique<relay::TreeHosts>(
      targets, static_cast<int>(targets.size()), [lost](const relay::Target& t) {
        return std::make_unique<FakeLink>(t, lost.count(t.host) > 0);
      });
}

class HostLaunchTest : public ::testing::Test {
 protected:
  process::PosixSpawner spawner_;
  LocalHost local_{"node-a", &spawner_, nullptr};
};

TEST_F(HostLaunchTest, LocalRanksOutputAndExitsReachTheCallerInOrder) {
  HostLaunch launch(&local_,
                    shellRanks("job-1", {0, 1}, "echo hello $R; echo second $R; exit $((R + 3))"),
                    {}, nullptr);
  EXPECT_EQ(launch.command(), "/bin/sh");
  RecordingCaller caller;
  EXPECT_EQ(launch.run(caller, "test"), HostLaunch::Outcome::kFinished);
  ASSERT_EQ(caller.statuses.size(), 1u);
  EXPECT_TRUE(caller.statuses[0].ok()) << caller.statuses[0].error;
  EXPECT_EQ(caller.statuses[0].pids.size(), 2u);
  std::map<int, std::vector<std::string>> lines;
  for (const LaunchEvent& e : caller.of(Kind::kOutput)) lines[e.rank].push_back(e.line);
  EXPECT_EQ(lines[0], (std::vector<std::string>{"hello 0", "second 0"}));
  EXPECT_EQ(lines[1], (std::vector<std::string>{"hello 1", "second 1"}));
  std::map<int, int> codes;
  for (const LaunchEvent& e : caller.of(Kind::kExit)) codes[e.rank] = e.exit.exitCode;
  EXPECT_EQ(codes, (std::map<int, int>{{0, 3}, {1, 4}}));
  // Each rank's exit comes after its output.
  for (int rank : {0, 1}) {
    size_t lastLine = 0, exitAt = 0;
    for (size_t i = 0; i < caller.events.size(); ++i) {
      if (caller.events[i].rank != rank) continue;
      if (caller.events[i].kind == Kind::kOutput) lastLine = i;
      if (caller.events[i].kind == Kind::kExit) exitAt = i;
    }
    EXPECT_LT(lastLine, exitAt) << "rank " << rank;
  }
  EXPECT_TRUE(local_.runningJobs().empty());  // released
}

TEST_F(HostLaunchTest, ACallerThatGoesAwayGetsEveryRankStopped) {
  HostLaunch launch(&local_, shellRanks("job-2", {0, 1}, "exec sleep 60"), {}, nullptr);
  RecordingCaller caller;
  caller.goneAfterLaunch = true;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(launch.run(caller, "test"), HostLaunch::Outcome::kCallerGone);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  ASSERT_EQ(caller.statuses.size(), 1u);
  for (const auto& [rank, pid] : caller.statuses[0].pids) {
    EXPECT_NE(::kill(pid, 0), 0) << "rank " << rank << " (pid " << pid << ") outlived its caller";
  }
  EXPECT_TRUE(local_.runningJobs().empty());
}

TEST_F(HostLaunchTest, ADrainableLaunchTellsItsCallerOnceThatTheAgentDrainsAndRunsOn) {
  LaunchRequest request = shellRanks("job-d1", {0, 1}, "sleep 1; exit 0");
  request.drainable = true;
  HostLaunch launch(&local_, std::move(request), {}, nullptr);
  EXPECT_TRUE(launch.drainable());
  RecordingCaller caller;
  std::thread agent([&] {
    std::this_thread::sleep_for(100ms);
    launch.drain();
    launch.drain();  // a second word changes nothing
  });
  EXPECT_EQ(launch.run(caller, "test"), HostLaunch::Outcome::kFinished);
  agent.join();
  const std::vector<LaunchEvent> draining = caller.of(Kind::kDraining);
  ASSERT_EQ(draining.size(), 1u);
  EXPECT_EQ(draining[0].host, "");  // this agent
  // The word comes before the exits, and the ranks were not stopped: they left by themselves.
  EXPECT_EQ(caller.events.front().kind, Kind::kDraining);
  std::map<int, int> codes;
  for (const LaunchEvent& e : caller.of(Kind::kExit)) codes[e.rank] = e.exit.exitCode;
  EXPECT_EQ(codes, (std::map<int, int>{{0, 0}, {1, 0}}));
}

TEST_F(HostLaunchTest, ALaunchThatIsNotDrainableSaysNothingOfADrain) {
  HostLaunch launch(&local_, shellRanks("job-d2", {0}, "sleep 0.5"), {}, nullptr);
  EXPECT_FALSE(launch.drainable());
  launch.drain();
  RecordingCaller caller;
  EXPECT_EQ(launch.run(caller, "test"), HostLaunch::Outcome::kFinished);
  EXPECT_TRUE(caller.of(Kind::kDraining).empty());
  EXPECT_EQ(caller.of(Kind::kExit).size(), 1u);
}

TEST_F(HostLaunchTest, AWriteThatFailsCountsAsTheCallerGone) {
  HostLaunch launch(&local_, shellRanks("job-3", {0}, "echo one; exec sleep 60"), {}, nullptr);
  RecordingCaller caller;
  caller.goneAfterWrites = 1;
  EXPECT_EQ(launch.run(caller, "test"), HostLaunch::Outcome::kCallerGone);
  ASSERT_EQ(caller.events.size(), 1u);  // nothing more is written once a write failed
  EXPECT_EQ(caller.events[0].line, "one");
}

TEST_F(HostLaunchTest, RelayedHostsAnswerAndTheirRanksAreFollowedToTheEnd) {
  std::vector<RelayedLaunch> relayed = {{"node-b", shellRanks("job-4", {1, 2}, "")},
                                        {"node-c", shellRanks("job-4", {3}, "")}};
  HostLaunch launch(&local_, shellRanks("job-4", {0}, "echo local"), std::move(relayed),
                    fakeTree({"node-b", "node-c"}));
  RecordingCaller caller;
  EXPECT_EQ(launch.run(caller, "test"), HostLaunch::Outcome::kFinished);
  std::map<std::string, bool> answered;
  for (const LaunchEvent& e : caller.of(Kind::kHostLaunched)) answered[e.host] = e.result.ok();
  EXPECT_EQ(answered, (std::map<std::string, bool>{{"node-b", true}, {"node-c", true}}));
  std::map<int, std::string> lines;
  for (const LaunchEvent& e : caller.of(Kind::kOutput)) lines[e.rank] = e.line;
  EXPECT_EQ(lines, (std::map<int, std::string>{
                       {0, "local"}, {1, "from node-b"}, {2, "from node-b"}, {3, "from node-c"}}));
  std::map<int, int> codes;
  for (const LaunchEvent& e : caller.of(Kind::kExit)) codes[e.rank] = e.exit.exitCode;
  EXPECT_EQ(codes, (std::map<int, int>{{0, 0}, {1, 1}, {2, 2}, {3, 3}}));
}

TEST_F(HostLaunchTest, ALostRelayedHostSettlesItsRanks) {
  std::vector<RelayedLaunch> relayed = {{"node-b", shellRanks("job-5", {1}, "")}};
  HostLaunch launch(&local_, shellRanks("job-5", {0}, "exit 0"), std::move(relayed),
                    fakeTree({"node-b"}, {"node-b"}));
  RecordingCaller caller;
  // Without the loss settling rank 1, this would wait for its exit for ever (the test's timeout).
  EXPECT_EQ(launch.run(caller, "test"), HostLaunch::Outcome::kFinished);
  const std::vector<LaunchEvent> lost = caller.of(Kind::kHostLost);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].host, "node-b");
  EXPECT_EQ(lost[0].reason, "its stream broke");
  EXPECT_EQ(caller.of(Kind::kExit).size(), 1u);
}

TEST_F(HostLaunchTest, AFailedLocalLaunchRelaysNothingAndSaysWhyForEveryHost) {
  LaunchRequest request = shellRanks("job-6", {0}, "");
  request.ranks[0].spec.argv = {"/nonexistent/hvd-test-program"};
  std::vector<RelayedLaunch> relayed = {{"node-b", shellRanks("job-6", {1}, "")},
                                        {"node-c", shellRanks("job-6", {2}, "")}};
  std::unique_ptr<relay::TreeHosts> tree = fakeTree({"node-b", "node-c"});
  relay::TreeHosts* treeSeen = tree.get();
  HostLaunch launch(&local_, request, std::move(relayed), std::move(tree));
  RecordingCaller caller;
  EXPECT_EQ(launch.run(caller, "test"), HostLaunch::Outcome::kNotStarted);
  ASSERT_EQ(caller.statuses.size(), 1u);
  EXPECT_FALSE(caller.statuses[0].ok());
  EXPECT_NE(caller.statuses[0].error.find("/nonexistent/hvd-test-program"), std::string::npos)
      << caller.statuses[0].error;
  const std::vector<LaunchEvent> answers = caller.of(Kind::kHostLaunched);
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_EQ(answers[0].host, "node-b");
  EXPECT_EQ(answers[1].host, "node-c");
  for (const LaunchEvent& e : answers) {
    EXPECT_NE(e.result.error.find("not launched: the launch on the relaying agent failed first"),
              std::string::npos)
        << e.result.error;
  }
  EXPECT_EQ(treeSeen->linksBuilt(), 0u);  // nothing went out
}

TEST_F(HostLaunchTest, MalformedRequestsAreRefusedBeforeAnythingStarts) {
  const auto refused = [&](LaunchRequest request, std::vector<RelayedLaunch> relayed,
                           std::unique_ptr<relay::TreeHosts> tree) -> std::string {
    try {
      HostLaunch launch(&local_, std::move(request), std::move(relayed), std::move(tree));
    } catch (const InvalidArgumentError& e) {
      return e.what();
    }
    return "accepted";
  };
  EXPECT_EQ(refused(shellRanks("", {0}, "true"), {}, nullptr), "the launch request has no job id");
  EXPECT_EQ(refused(shellRanks("j", {}, "true"), {}, nullptr), "the launch request has no ranks");
  EXPECT_EQ(refused(shellRanks("j", {0}, "true"), {{"node-b", shellRanks("other", {1}, "")}},
                    fakeTree({"node-b"})),
            "the relayed launch for node-b is not one of job j or has no ranks");
  EXPECT_EQ(refused(shellRanks("j", {0}, "true"), {{"node-b", shellRanks("j", {}, "")}},
                    fakeTree({"node-b"})),
            "the relayed launch for node-b is not one of job j or has no ranks");
  EXPECT_EQ(refused(shellRanks("j", {0}, "true"), {}, fakeTree({"node-b"})),
            "the launch request relays 0 launches for 1 hosts");
  EXPECT_TRUE(local_.runningJobs().empty());
}

}  // namespace
}  // namespace hvd::agent::jobs
