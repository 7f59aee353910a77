// hvdrun inside a Slurm allocation with no -H, on one machine:
// the real hvdrun, hvdagent and workers, with tests/mp/fake_srun.sh standing in for srun
// (HVD_SRUN). It starts one agent per "node" of SLURM_JOB_NODELIST as srun would, broadcasting
// hvdrun's stdin (the one-time key) to them. The same path under the real Slurm runs in
// tests/e2e/e2e_slurm_test.cc.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "common/test_support.h"

namespace {

using namespace std::chrono_literals;
using hvd::test::ProcessOptions;
using hvd::test::ProcessResult;
using hvd::test::TempDir;

std::string readAll(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class HvdrunSlurm : public ::testing::Test {
 protected:
  // hvdrun ARGS in an allocation of n[0-1] with 2 tasks each, srun being the stand-in.
  ProcessResult hvdrun(std::vector<std::string> args,
                       std::vector<std::string> env = {"SLURM_JOB_NODELIST=n[0-1]",
                                                       "SLURM_TASKS_PER_NODE=2(x2)"},
                       const std::string& srun = HVD_FAKE_SRUN) {
    std::vector<std::string> argv = {HVDRUN_PATH};
    if (!args.empty() && args.front() == "submit") {  // a subcommand comes first
      argv.push_back("submit");
      args.erase(args.begin());
    }
    if (::geteuid() == 0) argv.push_back("--allow-run-as-root");
    argv.insert(argv.end(), args.begin(), args.end());
    ProcessOptions o;
    o.env = std::move(env);
    o.env.push_back("SLURM_JOB_ID=" + std::to_string(::getpid()));
    o.env.push_back("HVD_SRUN=" + srun);
    o.env.push_back("FAKE_SRUN_LOG=" + (dir_.path() / "srun.log").string());
    o.env.push_back("TMPDIR=" + tmp_.string());
    o.env.push_back("HVD_ALLOW_RUN_AS_ROOT_CONFIRM=1");
    o.env.push_back("HVD_TIMEOUT=30");
    o.stdinDevNull = true;
    return hvd::test::runProcess(argv, 120s, o);
  }

  // The agents' temporary state dirs still under TMPDIR.
  std::vector<std::string> leftoverStateDirs() const {
    std::vector<std::string> out;
    for (const auto& entry : std::filesystem::directory_iterator(tmp_)) {
      out.push_back(entry.path().filename().string());
    }
    return out;
  }

  void SetUp() override { std::filesystem::create_directories(tmp_); }

  TempDir dir_;
  std::filesystem::path tmp_ = dir_.path() / "tmp";
};

TEST_F(HvdrunSlurm, NoHostListRunsTheMatrixOnEveryNodeThroughAgentsStartedWithSrun) {
  // No -np: the allocation's 4 slots.
  const ProcessResult matrix = hvdrun({HVD_WORKER_PATH, "matrix", "2"});
  ASSERT_EQ(matrix.status, 0) << matrix.out << matrix.err;
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_TRUE(std::regex_search(matrix.out, std::regex("rank " + std::to_string(rank) +
                                                         ": [1-9][0-9]* checks, 0 failures")))
        << matrix.out;
  }
  EXPECT_EQ(leftoverStateDirs(), std::vector<std::string>{}) << "agents removed their state";

  // srun was asked for one agent per node, and the key was not on its command line.
  const std::string log = readAll(dir_.path() / "srun.log");
  EXPECT_NE(log.find("n0 n1 :: " + std::string(HVDAGENT_PATH) + " --slurm-step --log-level warn"),
            std::string::npos)
      << log;
  EXPECT_FALSE(std::regex_search(log, std::regex("[0-9a-f]{32}"))) << log;

  // Each node's ranks are its local ranks, and the nodes are the cross ranks.
  const ProcessResult id = hvdrun({"-np", "4", HVD_E2E_WORKER_PATH, "allreduce"});
  ASSERT_EQ(id.status, 0) << id.out << id.err;
  for (int rank = 0; rank < 4; ++rank) {
    const std::string r = std::to_string(rank);
    EXPECT_NE(
        id.out.find("e2e rank=" + r + " size=4 local_rank=" + std::to_string(rank % 2) +
                    " local_size=2 cross_rank=" + std::to_string(rank / 2) + " cross_size=2 "),
        std::string::npos)
        << id.out;
    EXPECT_NE(id.out.find("e2e rank=" + r + " allreduce ok sum=10"), std::string::npos) << id.out;
  }
}

TEST_F(HvdrunSlurm, PrintHostsShowsWhatTheAllocationGivesAndBadVariablesAreNamed) {
  ProcessResult r = hvdrun(
      {"--print-hosts"}, {"SLURM_JOB_NODELIST=node[01-02],gpu-a1", "SLURM_TASKS_PER_NODE=2(x2),1"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "node01:2,node02:2,gpu-a1:1\n");
  r = hvdrun({"--print-hosts"}, {"SLURM_JOB_NODELIST=node[01-02", "SLURM_TASKS_PER_NODE=2(x2)"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("node[01-02"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST_F(HvdrunSlurm, AStepThatCannotStartItsAgentsIsNamedAndLeavesNothing) {
  const std::filesystem::path failing = dir_.path() / "srun-fails.sh";
  std::ofstream(failing) << "#!/bin/sh\necho 'srun: error: Unable to create step' >&2\nexit 3\n";
  std::filesystem::permissions(failing, std::filesystem::perms::owner_all);
  ProcessResult r =
      hvdrun({HVD_WORKER_PATH, "init"}, {"SLURM_JOB_NODELIST=n[0-1]", "SLURM_TASKS_PER_NODE=2(x2)"},
             failing.string());
  EXPECT_EQ(r.status, 69) << r.err;
  EXPECT_NE(r.err.find("srun: error: Unable to create step"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("ended (exit code 3) before the hvdagent of nodes n0,n1 was ready"),
            std::string::npos)
      << r.err;

  r = hvdrun({HVD_WORKER_PATH, "init"}, {"SLURM_JOB_NODELIST=n[0-1]", "SLURM_TASKS_PER_NODE=2(x2)"},
             (dir_.path() / "no-such-srun").string());
  EXPECT_EQ(r.status, 69) << r.err;
  EXPECT_NE(r.err.find("cannot run " + (dir_.path() / "no-such-srun").string()), std::string::npos)
      << r.err;
  EXPECT_EQ(leftoverStateDirs(), std::vector<std::string>{});
}

TEST_F(HvdrunSlurm, MoreRanksThanTheAllocationHasAreRefusedBeforeAnyAgentStarts) {
  const ProcessResult r = hvdrun({"-np", "4", HVD_WORKER_PATH, "init"},
                                 {"SLURM_JOB_NODELIST=n[0-1]", "SLURM_TASKS_PER_NODE=1(x2)"});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("-np 4 exceeds the 2 tasks of this Slurm allocation (n0:1,n1:1"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "srun.log")) << "no srun was run";
}

TEST_F(HvdrunSlurm, SubmitNeedsAgentsThatOutliveHvdrun) {
  const ProcessResult r = hvdrun({"submit", "-np", "2", HVD_WORKER_PATH, "init"});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("hvdrun submit in a Slurm allocation needs agents that outlive hvdrun"),
            std::string::npos)
      << r.err;
}

}  // namespace
