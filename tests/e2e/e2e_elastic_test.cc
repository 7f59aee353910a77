// Elastic jobs through the agents (docs/elastic.md "Where it runs"): the leader agent (host 0)
// runs the job's rounds over itself and host 1's agent. The worker is
// tests/python/elastic_jobs/train.py under Debian's python3 with python3-torch and hvd's
// package (PYTHONPATH=<build>/python): each step's batch depends only on the step, so every
// surviving worker ends with the parameters of a one-process run, whatever the rounds were.
// Skipped with the reason where torch cannot be imported.
#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "e2e_support.h"

namespace hvd::e2e {
namespace {

using namespace std::chrono_literals;

constexpr const char* kPython = "/usr/bin/python3";

struct Done {
  int worker = 0;
  int rank = 0;
  int size = 0;
  int step = 0;
  double error = 1;
};

// train.py's "DONE worker=W rank=R size=S step=N error=E" lines.
std::vector<Done> doneLines(const std::string& output) {
  std::vector<Done> out;
  const std::regex line(R"(DONE worker=(\d+) rank=(\d+) size=(\d+) step=(\d+) error=(\S+))");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line);
       it != std::sregex_iterator(); ++it) {
    out.push_back({std::stoi((*it)[1]), std::stoi((*it)[2]), std::stoi((*it)[3]),
                   std::stoi((*it)[4]), std::stod((*it)[5])});
  }
  return out;
}

// `hvdrun status` of the job the leader recorded last (`hvdrun ps` lists the oldest first).
std::string statusOfLastJob(const Cluster& cluster) {
  const RunResult ps = run(jobCommand(cluster, "ps", {}), 20s);
  std::string id;
  const std::regex row(R"((?:^|\n)(hvd-[0-9a-f]{6}) )");
  for (auto it = std::sregex_iterator(ps.output.begin(), ps.output.end(), row);
       it != std::sregex_iterator(); ++it) {
    id = (*it)[1];
  }
  if (id.empty()) return "no job in `hvdrun ps`:\n" + ps.output;
  return run(jobCommand(cluster, "status", {id}), 20s).output;
}

// The step numbers worker `worker` printed (train.py's STEP lines), in order.
std::vector<int> stepsOf(const std::string& output, int worker) {
  std::vector<int> steps;
  const std::regex line("STEP worker=" + std::to_string(worker) +
                        R"( rank=\d+ size=\d+ step=(\d+))");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line);
       it != std::sregex_iterator(); ++it) {
    steps.push_back(std::stoi((*it)[1]));
  }
  return steps;
}

// Replaces `path` whole (a rename), so a discovery script reading it never sees half a list.
void writeFile(const std::filesystem::path& path, const std::string& text) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  std::ofstream(tmp) << text;
  std::filesystem::rename(tmp, path);
}

// Each of `workers` trained steps 1..steps once, in order: nothing was rolled back.
void expectEveryStepOnce(const RunResult& r, std::initializer_list<int> workers, int steps) {
  std::vector<int> expected(steps);
  for (int i = 0; i < steps; ++i) expected[i] = i + 1;
  for (int worker : workers) {
    EXPECT_EQ(stepsOf(r.output, worker), expected) << "worker " << worker << "\n" << describe(r);
  }
}

bool torchMissing() {
  return std::system("/usr/bin/python3 -c 'import torch' > /dev/null 2>&1") != 0;
}

// What every elastic job of these tests adds to hvdrun's arguments: --min-np 2, its timeouts,
// the Python path, `env` forwarded, and train.py as the command.
std::vector<std::string> elasticExtra(const std::vector<std::string>& env) {
  std::vector<std::string> extra = {"--min-np",
                                    "2",
                                    "--elastic-timeout",
                                    "60",
                                    "--grace",
                                    "2",
                                    "-x",
                                    "PYTHONPATH=" HVD_E2E_PYTHONPATH,
                                    "-x",
                                    "PYTHONDONTWRITEBYTECODE=1"};
  for (const std::string& e : env) {
    extra.push_back("-x");
    extra.push_back(e);
  }
  extra.insert(extra.end(), {"--", kPython, HVD_ELASTIC_TRAIN_SCRIPT});
  return extra;
}

// hvdrun --min-np 2 -np 4 -H host0:2,host1:2 ... python3 train.py, with `env` forwarded.
std::vector<std::string> elasticArgs(const Cluster& cluster, std::vector<std::string> env) {
  return hvdrunArgs(cluster, 4, cluster.hostList(2), elasticExtra(env));
}

// Workers 0 and 1 on host 0 finished at size 2 with the one-process parameters (train.py's
// error) and agree on everything they report.
void expectSurvivorsFinishedAtSize2(const RunResult& r, int steps) {
  const std::vector<Done> done = doneLines(r.output);
  ASSERT_EQ(done.size(), 2u) << describe(r);
  for (const Done& d : done) {
    EXPECT_TRUE(d.worker == 0 || d.worker == 1) << describe(r);
    EXPECT_EQ(d.size, 2) << describe(r);
    EXPECT_EQ(d.step, steps) << describe(r);
    EXPECT_LT(d.error, 1e-9) << describe(r);
  }
  EXPECT_NE(done[0].rank, done[1].rank) << describe(r);
  EXPECT_EQ(done[0].error, done[1].error) << describe(r);
}

TEST_F(E2e, ElasticJobThroughAgentsDropsTheHostOfAFailedWorkerAndFinishesAtSize2) {
  if (torchMissing())
    GTEST_SKIP() << "no torch for /usr/bin/python3 (apt-get install python3-torch)";
  const Cluster& c = cluster();
  const RunResult r = run(elasticArgs(c, {"HVD_TEST_FAIL=3:5:exit", "HVD_TEST_STEPS=20"}), 150s);
  ASSERT_EQ(r.status, 0) << describe(r);
  expectSurvivorsFinishedAtSize2(r, 20);
  // The rounds, as the leader logged them: 4 ranks on both hosts, then 2 on host 0 after
  // worker 3's failure blacklisted host 1.
  EXPECT_TRUE(agentLogHas(c, 0,
                          {"round 0: 4 rank(s) on " + c.address(0) + ":2, " + c.address(1) + ":2",
                           "round 1: 2 rank(s) on " + c.address(0) + ":2 (worker 3",
                           "host " + c.address(1) + " is blacklisted"},
                          10s))
      << c.agentLog(0);
  // The same rounds in the job's record, as `hvdrun status` shows them: round 1's cause is the
  // failure.
  const std::string status = statusOfLastJob(c);
  EXPECT_TRUE(std::regex_search(status, std::regex("\n  round 0 +size 4 on " + c.address(0) +
                                                   ":2, " + c.address(1) + ":2, .*: start\n")))
      << status;
  const std::string failure = "worker 3 \\(rank 3\\) on " + c.address(1) + " failed";
  EXPECT_TRUE(std::regex_search(
      status, std::regex("\n  round 1 +size 2 on " + c.address(0) + ":2, .*: " + failure)))
      << status;
  EXPECT_EQ(status.find("round 2"), std::string::npos) << status;
}

// A discovery script and no -H: hvdrun runs the script once and the first host it lists (host 0)
// leads the job through its agent, which runs the script from then on. Once training is under
// way the script lists host 1 too: the job grows to 4 ranks and the new workers take the state;
// then it drops host 1 again: its workers leave at a commit, without blame. Both changes come at
// a commit, so the survivors train every step exactly once, and every worker ends with the
// one-process parameters.
TEST_F(E2e, ElasticDiscoveryThroughAgentsGrowsAndShrinksAsTheScriptListsHosts) {
  if (torchMissing())
    GTEST_SKIP() << "no torch for /usr/bin/python3 (apt-get install python3-torch)";
  const Cluster& c = cluster();
  TempDir dir("hvd-e2e-grow");
  const std::filesystem::path hosts = dir.path() / "hosts";
  const std::filesystem::path script = dir.path() / "discover.sh";
  writeFile(hosts, c.address(0) + ":2\n");
  writeFile(script, "#!/bin/sh\ncat " + hosts.string() + "\n");
  std::filesystem::permissions(script, std::filesystem::perms::owner_all);
  constexpr int kSteps = 60;
  std::vector<std::string> args = {HVDRUN_PATH,
                                   "-np",
                                   "2",
                                   "--host-discovery-script",
                                   script.string(),
                                   "--key-file",
                                   c.keyFile(),
                                   "--agent-port",
                                   std::to_string(c.port())};
  const std::vector<std::string> extra =
      elasticExtra({"HVD_TEST_STEPS=" + std::to_string(kSteps), "HVD_TEST_SLEEP=0.1"});
  args.insert(args.end(), extra.begin(), extra.end());
  Child hvdrun(args);
  ASSERT_TRUE(hvdrun.waitForOutput(
      [](const std::string& out) { return countOf(out, " size=2 step=4") >= 2; }, 90s))
      << hvdrun.output();
  writeFile(hosts, c.address(0) + ":2\n" + c.address(1) + ":2\n");
  // Every worker of the grown job has trained a few steps at size 4.
  ASSERT_TRUE(hvdrun.waitForOutput(
      [](const std::string& out) {
        return std::regex_search(out, std::regex("STEP worker=3 rank=\\d+ size=4 step=\\d+"));
      },
      90s))
      << hvdrun.output();
  writeFile(hosts, c.address(0) + ":2\n");
  const RunResult r = hvdrun.finish(150s);
  ASSERT_EQ(r.status, 0) << describe(r);
  expectSurvivorsFinishedAtSize2(r, kSteps);
  expectEveryStepOnce(r, {0, 1}, kSteps);
  EXPECT_TRUE(agentLogHas(c, 0,
                          {"round 0: 2 rank(s) on " + c.address(0) + ":2",
                           "round 1: 4 rank(s) on " + c.address(0) + ":2, " + c.address(1) + ":2",
                           "round 2: 2 rank(s) on " + c.address(0) + ":2"},
                          10s))
      << c.agentLog(0);
  // No blame in this job's part of the leader's log (the cluster's earlier jobs share it).
  const std::string leaderLog = c.agentLog(0);
  const std::string thisJob = leaderLog.substr(leaderLog.rfind("elastic, discovery started"));
  EXPECT_EQ(thisJob.find("is blacklisted"), std::string::npos) << leaderLog;
}

// Host 1's agent SIGKILLed mid-job: a failure like any other (its host blacklisted), and the job
// goes on at size 2 on host 0. A cluster of its own: this one loses an agent.
class E2eElasticAgentLoss : public ::testing::Test {
 protected:
  void SetUp() override { upOwnCluster(2, "el", &cluster_); }
  void TearDown() override { cluster_.reset(); }
  std::optional<Cluster> cluster_;
};

TEST_F(E2eElasticAgentLoss, AgentKilledMidJobBlacklistsItsHostAndTheJobGoesOn) {
  if (torchMissing())
    GTEST_SKIP() << "no torch for /usr/bin/python3 (apt-get install python3-torch)";
  const Cluster& c = *cluster_;
  Child hvdrun(elasticArgs(c, {"HVD_TEST_STEPS=40", "HVD_TEST_SLEEP=0.1"}));
  // Every round-0 worker has trained a few steps.
  ASSERT_TRUE(hvdrun.waitForOutput(
      [](const std::string& out) { return countOf(out, " size=4 step=6") >= 4; }, 90s))
      << hvdrun.output();
  const pid_t agent = c.agentPid(1);
  ASSERT_GT(agent, 0);
  ASSERT_EQ(::kill(agent, SIGKILL), 0);
  const RunResult r = hvdrun.finish(150s);
  ASSERT_EQ(r.status, 0) << describe(r);
  expectSurvivorsFinishedAtSize2(r, 40);
  EXPECT_TRUE(agentLogHas(c, 0,
                          {"the agent on " + c.address(1) + " was lost",
                           "round 1: 2 rank(s) on " + c.address(0) + ":2"},
                          10s))
      << c.agentLog(0);
}

// Host 1's agent stopped gracefully (SIGTERM) mid-job: it tells the leader its host is
// draining, its workers leave at their next commit, and it exits within its shutdown grace
// (5 s, the cluster's default). No blame (host 1 is not blacklisted) and no rollback: the
// survivors train every step exactly once. A cluster of its own: this one loses an agent.
class E2eElasticDrain : public ::testing::Test {
 protected:
  void SetUp() override { upOwnCluster(2, "ed", &cluster_); }
  void TearDown() override { cluster_.reset(); }
  std::optional<Cluster> cluster_;
};

TEST_F(E2eElasticDrain, AgentStoppedGracefullyDrainsItsHostAtACommitAndTheJobLosesNoStep) {
  if (torchMissing())
    GTEST_SKIP() << "no torch for /usr/bin/python3 (apt-get install python3-torch)";
  const Cluster& c = *cluster_;
  constexpr int kSteps = 40;
  Child hvdrun(elasticArgs(c, {"HVD_TEST_STEPS=" + std::to_string(kSteps), "HVD_TEST_SLEEP=0.1"}));
  ASSERT_TRUE(hvdrun.waitForOutput(
      [](const std::string& out) { return countOf(out, " size=4 step=6") >= 4; }, 90s))
      << hvdrun.output();
  const pid_t agent = c.agentPid(1);
  ASSERT_GT(agent, 0);
  const auto stopped = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(agent, SIGTERM), 0);
  // Within its grace (5 s), plus a moment for the server's own shutdown.
  while (alive(agent) && std::chrono::steady_clock::now() - stopped < 20s) {
    std::this_thread::sleep_for(50ms);
  }
  const auto took = std::chrono::steady_clock::now() - stopped;
  EXPECT_FALSE(alive(agent));
  EXPECT_LT(took, 7s) << "hvdagent took "
                      << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                      << " ms to stop\n"
                      << c.agentLog(1);

  const RunResult r = hvdrun.finish(150s);
  ASSERT_EQ(r.status, 0) << describe(r);
  expectSurvivorsFinishedAtSize2(r, kSteps);
  // Each step of the survivors once: nothing was rolled back to an earlier commit.
  expectEveryStepOnce(r, {0, 1}, kSteps);
  EXPECT_TRUE(agentLogHas(
      c, 0,
      {"host " + c.address(1) + " is draining",
       "round 1: 2 rank(s) on " + c.address(0) + ":2 (host " + c.address(1) + " is draining"},
      10s))
      << c.agentLog(0);
  const std::string leaderLog = c.agentLog(0);
  EXPECT_EQ(leaderLog.find("host " + c.address(1) + " is blacklisted"), std::string::npos)
      << leaderLog;
  EXPECT_EQ(leaderLog.find("the agent on " + c.address(1) + " was lost"), std::string::npos)
      << leaderLog;
  EXPECT_TRUE(agentLogHas(c, 1, {"told", "so that the ranks leave the job"}, 1s)) << c.agentLog(1);
  const std::string status = statusOfLastJob(c);
  EXPECT_TRUE(
      std::regex_search(status, std::regex("\n  round 1 +size 2 on " + c.address(0) +
                                           ":2, .*: host " + c.address(1) + " is draining\n")))
      << status;
}

}  // namespace
}  // namespace hvd::e2e
