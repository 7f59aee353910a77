// LocalHost (agent/jobs/local_host.h), the one path by which ranks run on this machine, driven
// through FakeSpawner and FakeGpuDiscovery: what it says about the node, what it asks the spawner
// to start, how the ranks' events reach the job with global ranks, and how stops are applied.
#include "agent/jobs/local_host.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <csignal>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "agent/node/gpu_discovery.h"
#include "agent/process/fake_spawner.h"

namespace hvd::agent::coordinator {
namespace {

using jobs::LocalHost;
using namespace std::chrono_literals;
using process::ExitStatus;
using process::FakeSpawner;
using process::SpawnSpec;
using process::Stream;

class RecordingEvents : public JobEvents {
 public:
  struct Line {
    int rank;
    Stream stream;
    std::string text;
    bool operator==(const Line& o) const {
      return std::tie(rank, stream, text) == std::tie(o.rank, o.stream, o.text);
    }
  };
  struct Exit {
    int rank;
    int exitCode;
    int signal;
    bool operator==(const Exit& o) const {
      return std::tie(rank, exitCode, signal) == std::tie(o.rank, o.exitCode, o.signal);
    }
  };

  void onOutput(int rank, Stream stream, std::string_view line) override {
    std::lock_guard<std::mutex> lock(mu_);
    lines_.push_back({rank, stream, std::string(line)});
  }
  void onExit(int rank, const ExitStatus& status) override {
    std::lock_guard<std::mutex> lock(mu_);
    exits_.push_back({rank, status.exitCode, status.signal});
  }
  void onAgentLost(const std::string& host, const std::string&) override {
    std::lock_guard<std::mutex> lock(mu_);
    lost_.push_back(host);
  }

  std::vector<Line> lines() const {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }
  std::vector<Exit> exits() const {
    std::lock_guard<std::mutex> lock(mu_);
    return exits_;
  }
  std::vector<std::string> lost() const {
    std::lock_guard<std::mutex> lock(mu_);
    return lost_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<Line> lines_;
  std::vector<Exit> exits_;
  std::vector<std::string> lost_;
};

SpawnSpec spec(std::vector<std::string> argv, std::vector<std::string> env, std::string cwd) {
  SpawnSpec s;
  s.argv = std::move(argv);
  s.env = std::move(env);
  s.cwd = std::move(cwd);
  return s;
}

bool sameSpec(const SpawnSpec& a, const SpawnSpec& b) {
  return a.argv == b.argv && a.env == b.env && a.cwd == b.cwd;
}

// Global ranks 4 and 5 of a job: this host's share, as the coordinator would send it.
LaunchRequest twoRanks(const std::string& jobId = "job-1") {
  LaunchRequest request;
  request.jobId = jobId;
  request.ranks.push_back({4, spec({"train", "--epochs", "1"}, {"HVD_RANK=4", "A=1"}, "/w")});
  request.ranks.push_back({5, spec({"train", "--epochs", "1"}, {"HVD_RANK=5", "A=1"}, "")});
  return request;
}

node::GpuInfo gpu(int index) {
  node::GpuInfo g;
  g.index = index;
  g.uuid = "GPU-test-" + std::to_string(index);
  g.name = "Test GPU";
  g.pciBusId = "00000000:0" + std::to_string(index + 1) + ":00.0";
  g.memoryBytes = 16ull << 30;
  return g;
}

TEST(LocalHost, HostAndAddressAreTheGivenNameAndInProcess) {
  FakeSpawner spawner;
  LocalHost agent("localhost", &spawner, nullptr);
  EXPECT_EQ(agent.host(), "localhost");
  EXPECT_EQ(agent.address(), "in-process");
}

TEST(LocalHost, DescribeReportsHostnameCpusAndGpus) {
  FakeSpawner spawner;
  node::FakeGpuDiscovery gpus({gpu(0), gpu(1)});
  LocalHost agent("localhost", &spawner, &gpus);
  DescribeResult d = agent.describe();
  ASSERT_TRUE(d.ok());
  char name[256] = {};
  ASSERT_EQ(::gethostname(name, sizeof(name) - 1), 0);
  EXPECT_EQ(d.description->hostname, name);
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(::sched_getaffinity(0, sizeof(set), &set), 0);
  EXPECT_EQ(d.description->cpus, CPU_COUNT(&set));
  EXPECT_GT(d.description->cpus, 0);
  EXPECT_EQ(d.description->gpus, (std::vector<node::GpuInfo>{gpu(0), gpu(1)}));
  EXPECT_EQ(d.description->addresses, (std::vector<std::string>{"127.0.0.1"}));
  EXPECT_EQ(d.description->version, "embedded");
}

TEST(LocalHost, DescribeWithoutGpuDiscoveryHasNoGpus) {
  FakeSpawner spawner;
  LocalHost agent("localhost", &spawner, nullptr);
  DescribeResult d = agent.describe();
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d.description->gpus.empty());
}

TEST(LocalHost, LaunchPassesEachRanksSpecInOrder) {
  FakeSpawner spawner;
  RecordingEvents events;
  LocalHost agent("localhost", &spawner, nullptr);
  const LaunchRequest request = twoRanks();
  EXPECT_TRUE(agent.launch(request, &events).ok());
  ASSERT_EQ(spawner.groupCount(), 1u);
  const std::vector<SpawnSpec> specs = spawner.group(0)->specs();
  ASSERT_EQ(specs.size(), 2u);
  EXPECT_TRUE(sameSpec(specs[0], request.ranks[0].spec));
  EXPECT_TRUE(sameSpec(specs[1], request.ranks[1].spec));
  EXPECT_EQ(specs[0].argv, (std::vector<std::string>{"train", "--epochs", "1"}));
  EXPECT_EQ(specs[1].env, (std::vector<std::string>{"HVD_RANK=5", "A=1"}));
  EXPECT_EQ(specs[0].cwd, "/w");
  agent.shutdown();
}

TEST(LocalHost, LaunchWithNoRanksStartsNothing) {
  FakeSpawner spawner;
  RecordingEvents events;
  LocalHost agent("localhost", &spawner, nullptr);
  LaunchRequest empty;
  empty.jobId = "job-1";
  EXPECT_TRUE(agent.launch(empty, &events).ok());
  EXPECT_EQ(spawner.groupCount(), 0u);
}

TEST(LocalHost, SecondLaunchOfTheSameJobIsRefused) {
  FakeSpawner spawner;
  RecordingEvents events;
  LocalHost agent("node-a", &spawner, nullptr);
  ASSERT_TRUE(agent.launch(twoRanks("job-1"), &events).ok());
  LaunchStatus again = agent.launch(twoRanks("job-1"), &events);
  EXPECT_EQ(again.error, "job job-1 is already running on node-a");
  EXPECT_EQ(spawner.groupCount(), 1u);
  EXPECT_TRUE(agent.launch(twoRanks("job-2"), &events).ok());
  EXPECT_EQ(spawner.groupCount(), 2u);
  agent.shutdown();
}

TEST(LocalHost, OutputAndExitsArriveWithGlobalRanks) {
  FakeSpawner spawner;
  RecordingEvents events;
  LocalHost agent("localhost", &spawner, nullptr);
  ASSERT_TRUE(agent.launch(twoRanks(), &events).ok());
  auto group = spawner.group(0);
  group->emitLine(0, Stream::kStdout, "hello from 4");
  group->emitLine(1, Stream::kStderr, "warning from 5");
  group->emitExit(1, ExitStatus{3, 0});
  group->emitExit(0, ExitStatus{0, 0});
  EXPECT_EQ(events.lines(),
            (std::vector<RecordingEvents::Line>{{4, Stream::kStdout, "hello from 4"},
                                                {5, Stream::kStderr, "warning from 5"}}));
  EXPECT_EQ(events.exits(), (std::vector<RecordingEvents::Exit>{{5, 3, 0}, {4, 0, 0}}));
  EXPECT_TRUE(events.lost().empty());
  agent.shutdown();
}

TEST(LocalHost, StopOfAnUnknownJobDoesNothing) {
  FakeSpawner spawner;
  RecordingEvents events;
  LocalHost agent("localhost", &spawner, nullptr);
  agent.stop("never-launched", SIGTERM, 1s);
  // The stop is not remembered for a later launch of that id.
  ASSERT_TRUE(agent.launch(twoRanks("never-launched"), &events).ok());
  EXPECT_TRUE(spawner.group(0)->stopRequests().empty());
  EXPECT_TRUE(events.exits().empty());
  agent.shutdown();
}

TEST(LocalHost, StopAfterLaunchAsksTheGroupWithoutWaiting) {
  FakeSpawner spawner;
  RecordingEvents events;
  LocalHost agent("localhost", &spawner, nullptr);
  ASSERT_TRUE(agent.launch(twoRanks(), &events).ok());
  agent.stop("job-1", SIGINT, 3000ms);
  const auto stops = spawner.group(0)->stopRequests();
  ASSERT_EQ(stops.size(), 1u);
  EXPECT_EQ(stops[0].signal, SIGINT);
  EXPECT_EQ(stops[0].grace, 3000ms);
  EXPECT_FALSE(stops[0].wait);
  // The fake's ranks obey the stop: both exits reach the job with their global ranks.
  EXPECT_EQ(events.exits(), (std::vector<RecordingEvents::Exit>{{4, 0, SIGINT}, {5, 0, SIGINT}}));
  agent.shutdown();
}

// Calls stop() for the job from inside spawn(), as a coordinator would when another host's rank
// fails while this host is still spawning.
class StopDuringSpawn : public process::Spawner {
 public:
  StopDuringSpawn(FakeSpawner* inner, std::vector<std::pair<int, std::chrono::milliseconds>> stops)
      : inner_(inner), stops_(std::move(stops)) {}
  void setAgent(LocalHost* agent, std::string jobId) {
    agent_ = agent;
    jobId_ = std::move(jobId);
  }
  process::SpawnResult spawn(const std::vector<SpawnSpec>& ranks, process::OutputSink* sink,
                             process::ExitCallback onExit) override {
    for (const auto& [signal, grace] : stops_) agent_->stop(jobId_, signal, grace);
    return inner_->spawn(ranks, sink, std::move(onExit));
  }

 private:
  FakeSpawner* inner_;
  std::vector<std::pair<int, std::chrono::milliseconds>> stops_;
  LocalHost* agent_ = nullptr;
  std::string jobId_;
};

TEST(LocalHost, StopDuringLaunchIsAppliedOnceTheGroupExists) {
  FakeSpawner fake;
  fake.setExitOnStop(false);
  StopDuringSpawn spawner(&fake, {{SIGTERM, 5000ms}});
  RecordingEvents events;
  LocalHost agent("localhost", &spawner, nullptr);
  spawner.setAgent(&agent, "job-1");
  ASSERT_TRUE(agent.launch(twoRanks(), &events).ok());
  ASSERT_EQ(fake.groupCount(), 1u);
  const auto stops = fake.group(0)->stopRequests();
  ASSERT_EQ(stops.size(), 1u);
  EXPECT_EQ(stops[0].signal, SIGTERM);
  EXPECT_EQ(stops[0].grace, 5000ms);
  agent.shutdown();
}

TEST(LocalHost, OfTwoStopsDuringLaunchTheShorterGraceIsApplied) {
  FakeSpawner fake;
  fake.setExitOnStop(false);
  StopDuringSpawn spawner(&fake, {{SIGTERM, 5000ms}, {SIGINT, 100ms}, {SIGUSR1, 9000ms}});
  RecordingEvents events;
  LocalHost agent("localhost", &spawner, nullptr);
  spawner.setAgent(&agent, "job-1");
  ASSERT_TRUE(agent.launch(twoRanks(), &events).ok());
  const auto stops = fake.group(0)->stopRequests();
  ASSERT_EQ(stops.size(), 1u);
  EXPECT_EQ(stops[0].signal, SIGINT);
  EXPECT_EQ(stops[0].grace, 100ms);
  agent.shutdown();
}

TEST(LocalHost, SpawnFailureNamesTheGlobalRank) {
  FakeSpawner spawner;
  RecordingEvents events;
  LocalHost agent("localhost", &spawner, nullptr);
  spawner.failNextSpawn("rank 1: cannot execute 'train': No such file or directory");
  LaunchStatus status = agent.launch(twoRanks(), &events);
  EXPECT_EQ(status.error, "rank 5: cannot execute 'train': No such file or directory");
  EXPECT_EQ(spawner.groupCount(), 0u);
  EXPECT_TRUE(events.exits().empty());
  // Nothing of the job is left: the same id can be launched again.
  EXPECT_TRUE(agent.launch(twoRanks(), &events).ok());
  EXPECT_EQ(spawner.groupCount(), 1u);
  agent.shutdown();
}

TEST(LocalHost, SpawnFailureWithoutARankIsPassedOnUnchanged) {
  FakeSpawner spawner;
  RecordingEvents events;
  LocalHost agent("localhost", &spawner, nullptr);
  spawner.failNextSpawn("fork failed: Resource temporarily unavailable");
  EXPECT_EQ(agent.launch(twoRanks(), &events).error,
            "fork failed: Resource temporarily unavailable");
}

TEST(LocalHost, ShutdownDestroysTheGroupAndStopsEvents) {
  FakeSpawner spawner;
  RecordingEvents events;
  LocalHost agent("localhost", &spawner, nullptr);
  ASSERT_TRUE(agent.launch(twoRanks(), &events).ok());
  auto group = spawner.group(0);
  EXPECT_FALSE(group->destroyed());
  agent.shutdown();
  EXPECT_TRUE(group->destroyed());
  group->emitLine(0, Stream::kStdout, "too late");
  group->emitExit(0, ExitStatus{0, 0});
  EXPECT_TRUE(events.lines().empty());
  EXPECT_TRUE(events.exits().empty());
  // A stop after shutdown finds no job.
  agent.stop("job-1", SIGTERM, 1s);
  EXPECT_TRUE(group->stopRequests().empty());
}

}  // namespace
}  // namespace hvd::agent::coordinator
