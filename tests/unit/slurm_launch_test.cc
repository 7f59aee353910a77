// hvdrun in a Slurm allocation: the pure pieces of starting the
// agents through srun (launcher/slurm_agents.h, agent/daemon/slurm_step.h) and the command
// line's Slurm defaults (launcher/cli.h, launcher/hosts.h). The whole path runs in
// tests/mp/hvdrun_slurm_test.cc (a stand-in srun) and tests/e2e/e2e_slurm_test.cc (real Slurm).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "agent/daemon/slurm_step.h"
#include "common/test_support.h"
#include "hvd/error.hpp"
#include "hvd_support/interfaces.h"
#include "hvdrun_parse.h"
#include "launcher/cli.h"
#include "launcher/hosts.h"
#include "launcher/slurm_agents.h"

namespace hvd::launcher {
namespace {

using cli_test::parse;
using contract::HostSlots;

std::map<std::string, std::string>* fakeEnv() {
  static std::map<std::string, std::string> env;
  return &env;
}
const char* fakeGetenv(const char* name) {
  auto it = fakeEnv()->find(name);
  return it == fakeEnv()->end() ? nullptr : it->second.c_str();
}

TEST(SlurmLaunch, SrunStartsOneAgentPerNodeInTheAllocationWithoutTheKeyOnTheCommandLine) {
  SlurmAgentsOptions o;
  o.agentPath = "/opt/hvd/bin/hvdagent";
  o.nodes = {"node01", "node02", "gpu-a1"};
  std::vector<std::string> want = {"srun",
                                   "--nodes=3",
                                   "--ntasks=3",
                                   "--ntasks-per-node=1",
                                   "--nodelist=node01,node02,gpu-a1",
                                   "--overlap",
                                   "--input=all",
                                   "--kill-on-bad-exit=0",
                                   "--job-name=hvdagent",
                                   "/opt/hvd/bin/hvdagent",
                                   "--slurm-step",
                                   "--log-level",
                                   "warn"};
  EXPECT_EQ(srunArgv(o), want);
  o.allowRunAsRoot = true;
  o.logLevel = "debug";
  o.srun = "/usr/bin/srun";
  want.front() = "/usr/bin/srun";
  want.back() = "debug";
  want.push_back("--allow-run-as-root");
  EXPECT_EQ(srunArgv(o), want);
  for (const std::string& arg : srunArgv(o)) {
    EXPECT_EQ(arg.find("key"), std::string::npos) << arg;
  }
}

TEST(SlurmLaunch, ReadyLinesRoundTripAndAnythingElseIsNotOne) {
  const std::string line = agent::daemon::readyLine("node01", "10.0.0.7:40123");
  EXPECT_EQ(line, "hvdagent-ready node01 10.0.0.7:40123");
  const auto parsed = parseReadyLine(line);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->first, "node01");
  EXPECT_EQ(parsed->second, "10.0.0.7:40123");
  for (const char* bad : {"", "hvdagent-ready", "hvdagent-ready [fe80::1]:5",
                          "hvdagent-ready node01", "hvdagent-ready  x", "hvdagent-ready a b c",
                          "[0] hvdagent-ready a b", "hvdagent: listening"}) {
    EXPECT_FALSE(parseReadyLine(bad)) << bad;
  }
}

TEST(SlurmLaunch, PrintHostsFormatsAnHostListAndNpDefaultsToTheSlots) {
  EXPECT_EQ(formatHostList({{"node01", 2}, {"node02", 2}, {"gpu-a1", std::nullopt}}),
            "node01:2,node02:2,gpu-a1");
  EXPECT_EQ(formatHostList({{"::1", 4}}), "[::1]:4");
  EXPECT_EQ(slotsTotal({{"a", 2}, {"b", 3}}), 5);
  try {
    slotsTotal({{"a", 2}, {"gpu-a1", std::nullopt}});
    FAIL() << "no error for unknown slots";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("-np is needed: the slots of 'gpu-a1'"), std::string::npos)
        << e.what();
  }
}

TEST(SlurmLaunch, MoreRanksThanTheAllocationsTasksSayHowToAskSlurmForThem) {
  Options options;
  options.np = 4;
  const std::vector<HostSlots> hosts = {{"n0", 1}, {"n1", 1}};
  try {
    checkAllocationFits(options, hosts);
    FAIL() << "no error for 4 ranks on 2 tasks";
  } catch (const InvalidArgumentError& e) {
    EXPECT_STREQ(e.what(),
                 "-np 4 exceeds the 2 tasks of this Slurm allocation (n0:1,n1:1, from "
                 "SLURM_TASKS_PER_NODE): ask salloc/sbatch for them (-n 4, --ntasks-per-node, or "
                 "--exclusive nodes), or pass --oversubscribe");
  }
  options.np = 2;
  EXPECT_NO_THROW(checkAllocationFits(options, hosts));
  options.np = 4;
  options.oversubscribe = true;
  EXPECT_NO_THROW(checkAllocationFits(options, hosts));
  options.oversubscribe = false;
  EXPECT_NO_THROW(checkAllocationFits(options, {{"n0", 1}, {"gpu1", std::nullopt}}))
      << "a node's GPUs decide";
}

TEST(SlurmLaunch, TheAllocationIsUsedOnlyWithoutHostsOnTheCommandLine) {
  fakeEnv()->clear();
  (*fakeEnv())["SLURM_JOB_ID"] = "42";
  (*fakeEnv())["SLURM_JOB_NODELIST"] = "node[01-02],gpu-a1";
  (*fakeEnv())["SLURM_TASKS_PER_NODE"] = "2(x2),1";
  Options options;
  const auto hosts = slurmHosts(options, fakeGetenv);
  ASSERT_TRUE(hosts);
  EXPECT_EQ(formatHostList(*hosts), "node01:2,node02:2,gpu-a1:1");
  options.hostList = "a:1";
  EXPECT_FALSE(slurmHosts(options, fakeGetenv)) << "-H wins";
  options.hostList.clear();
  options.hostfile = "/some/file";
  EXPECT_FALSE(slurmHosts(options, fakeGetenv)) << "--hostfile wins";
  fakeEnv()->erase("SLURM_JOB_ID");
  EXPECT_FALSE(slurmHosts(Options{}, fakeGetenv)) << "not in an allocation";
}

TEST(SlurmLaunch, NpIsOptionalInsideAnAllocationOnlyAndPrintHostsNeedsNoProgram) {
  ::unsetenv("SLURM_JOB_ID");
  auto p = parse({"hvdrun", "./train"});
  EXPECT_EQ(p.code, 2);
  EXPECT_NE(p.stderrText.find("-np N is required"), std::string::npos) << p.stderrText;
  p = parse({"hvdrun", "--print-hosts"});
  EXPECT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_TRUE(p.options.printHosts);

  ::setenv("SLURM_JOB_ID", "42", 1);
  p = parse({"hvdrun", "--allow-run-as-root", "./train"});
  EXPECT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(p.options.np, 0) << "main() takes the allocation's slots";
  EXPECT_TRUE(p.options.allowRunAsRoot);
  p = parse({"hvdrun", "-H", "a:2", "./train"});
  EXPECT_EQ(p.code, 2) << "with -H the allocation is not used, so -np is needed";
  ::unsetenv("SLURM_JOB_ID");
}

TEST(SlurmLaunch, AStepAgentListensTowardTheLaunchingHostOnAnEphemeralPort) {
  fakeEnv()->clear();
  EXPECT_EQ(agent::daemon::slurmStepListen(fakeGetenv), transport::firstInterfaceIpv4() + ":0");
  (*fakeEnv())["SLURM_LAUNCH_NODE_IPADDR"] = "127.0.0.1";
  EXPECT_EQ(agent::daemon::slurmStepListen(fakeGetenv), "127.0.0.1:0");
  EXPECT_FALSE(agent::daemon::slurmNodeName(fakeGetenv).empty());
  (*fakeEnv())["SLURMD_NODENAME"] = "node07";
  EXPECT_EQ(agent::daemon::slurmNodeName(fakeGetenv), "node07");
}

TEST(SlurmLaunch, AStepAgentsStateDirIsPrivateAndRemovedWithEverythingInIt) {
  test::TempDir tmp;
  fakeEnv()->clear();
  (*fakeEnv())["TMPDIR"] = tmp.path().string();
  (*fakeEnv())["SLURM_JOB_ID"] = "1234";
  std::string path;
  {
    agent::daemon::TemporaryStateDir dir(fakeGetenv);
    path = dir.path();
    EXPECT_EQ(path.rfind(tmp.path().string() + "/hvdagent-1234-", 0), 0u) << path;
    EXPECT_EQ(std::filesystem::status(path).permissions() & std::filesystem::perms::all,
              std::filesystem::perms::owner_all);
    std::filesystem::create_directories(path + "/jobs/hvd-abcdef");
    std::ofstream(path + "/jobs/hvd-abcdef/output.log") << "line\n";
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace hvd::launcher
