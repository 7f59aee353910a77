// hvdrun's commands about jobs on the agents (launcher/cli.h, launcher/job_commands.h): what the
// command lines mean, and what ps and status print for fixed records.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "hvd/error.hpp"
#include "hvdrun_parse.h"
#include "launcher/cli.h"
#include "launcher/job_commands.h"
#include "launcher/job_render.h"
#include "launcher/option_values.h"

namespace hvd::launcher {
namespace {

using cli_test::Parsed;

// hvdrun ARGS...
Parsed parse(std::vector<std::string> args) {
  args.insert(args.begin(), "hvdrun");
  return cli_test::parse(std::move(args));
}

TEST(HvdrunJobsCli, DurationsInSecondsUnitsAndClockForms) {
  EXPECT_EQ(parseDuration("2"), 2.0);
  EXPECT_EQ(parseDuration("1.5"), 1.5);
  EXPECT_EQ(parseDuration("90s"), 90.0);
  EXPECT_EQ(parseDuration("15m"), 900.0);
  EXPECT_EQ(parseDuration("2h"), 7200.0);
  EXPECT_EQ(parseDuration("1d"), 86400.0);
  EXPECT_EQ(parseDuration("01:30"), 90.0);
  EXPECT_EQ(parseDuration("1:02:03"), 3723.0);
  EXPECT_EQ(parseDuration("2-01:00:00"), 2 * 86400.0 + 3600.0);
  for (const char* bad : {"", "0", "-3", "abc", "5x", "1:2:3:4", "2-01:00", "s", "1e3", ":"}) {
    EXPECT_EQ(parseDuration(bad), std::nullopt) << bad;
  }
}

TEST(HvdrunJobsCli, RankRanges) {
  EXPECT_EQ(parseRankRange("3"), std::make_pair(3, 3));
  EXPECT_EQ(parseRankRange("1-2"), std::make_pair(1, 2));
  EXPECT_EQ(parseRankRange("0-0"), std::make_pair(0, 0));
  for (const char* bad : {"", "-1", "2-1", "a", "1-", "-", "1-2-3", "99999999"}) {
    EXPECT_EQ(parseRankRange(bad), std::nullopt) << bad;
  }
}

TEST(HvdrunJobsCli, SubmitAndRunTakeTheRunOptionsAndATimeLimit) {
  Parsed p = parse({"submit", "-np", "4", "--time-limit", "15m", "--", "./train", "-x"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(p.options.action, Action::kSubmit);
  EXPECT_EQ(p.options.np, 4);
  EXPECT_EQ(p.options.timeLimitSeconds, 900.0);
  EXPECT_EQ(p.options.command, (std::vector<std::string>{"./train", "-x"}));

  p = parse({"run", "-np", "2", "./train"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(p.options.action, Action::kRun);
  EXPECT_EQ(p.options.timeLimitSeconds, 0.0);

  p = parse({"-np", "2", "--time-limit", "soon", "./train"});
  EXPECT_EQ(p.code, 2);
  EXPECT_NE(p.stderrText.find("--time-limit 'soon'"), std::string::npos) << p.stderrText;
}

TEST(HvdrunJobsCli, JobCommandsAndTheirOptions) {
  Parsed p = parse({"logs", "hvd-7f3a2c", "--rank", "1-2", "-f", "--tail", "50", "--stderr",
                    "--agent-port", "7000"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(p.options.action, Action::kLogs);
  EXPECT_EQ(p.options.jobId, "hvd-7f3a2c");
  EXPECT_EQ(p.options.logRanks, std::make_pair(1, 2));
  EXPECT_TRUE(p.options.follow);
  EXPECT_EQ(p.options.tailLines, 50);
  EXPECT_TRUE(p.options.stderrOnly);
  EXPECT_EQ(p.options.agentPort, 7000);

  p = parse({"cancel", "hvd-1", "--grace", "2.5"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(p.options.action, Action::kCancel);
  EXPECT_EQ(p.options.cancelGraceSeconds, 2.5);
  p = parse({"cancel", "hvd-1"});
  EXPECT_EQ(p.options.cancelGraceSeconds, std::nullopt);

  p = parse({"ps", "-H", "a,b:4"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(p.options.action, Action::kPs);
  EXPECT_EQ(p.options.hostList, "a,b:4");

  EXPECT_EQ(parse({"status"}).code, 2) << "the job id is required";
  EXPECT_EQ(parse({"attach", "hvd-1", "--follow"}).code, 2) << "attach follows anyway";
  p = parse({"logs", "hvd-1", "--rank", "3-1"});
  EXPECT_EQ(p.code, 2);
  EXPECT_NE(p.stderrText.find("--rank '3-1'"), std::string::npos) << p.stderrText;
}

TEST(HvdrunJobsCli, ValuesThatCannotBeMeantAreUsageErrorsNamingTheOption) {
  const auto refused = [](std::vector<std::string> args, const std::string& text) {
    Parsed p = parse(std::move(args));
    EXPECT_EQ(p.code, 2) << text;
    EXPECT_NE(p.stderrText.find(text), std::string::npos) << p.stderrText;
  };
  refused({"status", ""}, "hvdrun status: JOB: '' is empty");
  refused({"ps", "-H", ""}, "hvdrun ps: --hosts: '' is empty");
  refused({"ps", "--hostfile", ""}, "--hostfile: '' is empty");
  refused({"ps", "--key-file", " "}, "--key-file: ' ' is empty");
  refused({"ps", "--tls-ca", ""}, "--tls-ca: '' is empty");
  refused({"ps", "--agent-port", "7475x"}, "--agent-port: '7475x' is not a whole number");
  // `--rank ''` would otherwise mean every rank.
  refused({"logs", "hvd-1", "--rank", ""}, "--rank '': expected a rank R or a range R1-R2");
  refused({"logs", "hvd-1", "--tail", "-5"}, "--tail: '-5' is out of range");
  refused({"attach", "hvd-1", "--tail", "ten"}, "--tail: 'ten' is not a whole number");
  for (const char* bad : {"nan", "inf", "-1", "86401"}) {
    refused({"cancel", "hvd-1", "--grace", bad},
            "hvdrun cancel: --grace: '" + std::string(bad) + "'");
  }
  refused({"keygen", "--key-file", ""}, "hvdrun keygen: --key-file: '' is empty");
}

TEST(HvdrunJobsCli, AgentsComeFromTheHostsTheEnvironmentOrThisMachine) {
  Options o;
  o.agentPort = 7475;
  std::vector<AgentTarget> t = jobCommandAgents(o, nullptr);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].address, "127.0.0.1:7475");
  t = jobCommandAgents(o, "n1,n2:4");
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[1].host, "n2");
  EXPECT_EQ(t[1].address, "n2:7475");
  o.hostList = "m1";
  t = jobCommandAgents(o, "n1,n2");
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].host, "m1") << "-H wins over HVD_AGENT_HOSTS";
  o.hostList.clear();
  try {
    jobCommandAgents(o, "n1,,n2");
    ADD_FAILURE() << "a malformed HVD_AGENT_HOSTS was accepted";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("HVD_AGENT_HOSTS"), std::string::npos) << e.what();
  }
}

v1::JobInfo sampleJob() {
  v1::JobInfo job;
  job.set_job_id("hvd-7f3a2c");
  job.set_state(v1::JOB_FAILED);
  job.set_np(2);
  job.add_hosts("node-a");
  job.add_hosts("node-b");
  job.add_argv("./train");
  job.add_argv("--epochs");
  job.add_argv("3");
  job.set_cwd("/home/u");
  job.set_submitted_unix_ms(1000);
  job.set_started_unix_ms(2000);
  job.set_ended_unix_ms(2000 + 3723000);
  job.set_detached(true);
  v1::JobEnd* end = job.mutable_end();
  end->set_exit_code(3);
  end->set_rank(1);
  end->set_summary("hvdrun: rank 1 on node-b exited with code 3");
  end->add_stderr_tail("Traceback: boom");
  v1::RankInfo* r0 = job.add_ranks();
  r0->set_rank(0);
  r0->set_host("node-a");
  r0->set_pid(111);
  r0->set_state(v1::RANK_EXITED);
  r0->set_signal(15);
  v1::RankInfo* r1 = job.add_ranks();
  r1->set_rank(1);
  r1->set_host("node-b");
  r1->set_pid(222);
  r1->set_state(v1::RANK_EXITED);
  r1->set_exit_code(3);
  return job;
}

TEST(HvdrunJobsCli, PsTableHasOneRowPerJobWithRuntimeAndExit) {
  v1::JobInfo running;
  running.set_job_id("hvd-000001");
  running.set_state(v1::JOB_RUNNING);
  running.set_np(16);
  running.add_hosts("h1");
  running.add_argv("python3");
  running.set_started_unix_ms(10000);
  const std::string table = formatJobTable({sampleJob(), running}, 10000 + 61000);
  EXPECT_EQ(table.rfind("JOB ID", 0), 0u) << table;
  EXPECT_NE(table.find("hvd-7f3a2c  FAILED     2    node-a,node-b"), std::string::npos) << table;
  EXPECT_NE(table.find("1:02:03    3     ./train --epochs 3"), std::string::npos) << table;
  EXPECT_NE(table.find("hvd-000001  RUNNING    16   h1"), std::string::npos) << table;
  EXPECT_NE(table.find("0:01:01    -     python3"), std::string::npos) << table;
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 3);
}

TEST(HvdrunJobsCli, StatusNamesEveryRankAndTheRootCause) {
  const std::string text = formatJobStatus(sampleJob(), 0);
  EXPECT_EQ(text.rfind("job hvd-7f3a2c: FAILED\n", 0), 0u) << text;
  EXPECT_NE(text.find("np          2 on node-a, node-b"), std::string::npos) << text;
  EXPECT_NE(text.find("(hvdrun submit)"), std::string::npos) << text;
  EXPECT_NE(text.find("runtime     1:02:03"), std::string::npos) << text;
  EXPECT_NE(text.find("exit code   3"), std::string::npos) << text;
  EXPECT_NE(text.find("cause       rank 1 on node-b exited with code 3"), std::string::npos)
      << text;
  EXPECT_NE(text.find("    Traceback: boom"), std::string::npos) << text;
  EXPECT_NE(text.find("0     node-a                  111      EXITED   signal 15"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("1     node-b                  222      EXITED   3"), std::string::npos)
      << text;
}

TEST(HvdrunJobsCli, StatusListsEveryRoundOfAnElasticJobWithItsSizeHostsTimesAndCause) {
  ::setenv("TZ", "UTC", 1);
  ::tzset();
  v1::JobInfo job;
  job.set_job_id("hvd-e1a571");
  job.set_state(v1::JOB_RUNNING);
  job.set_np(4);
  job.add_hosts("node-a");
  job.add_hosts("node-b");
  job.add_argv("python3");
  job.set_started_unix_ms(1796155586000);
  v1::RoundInfo* r0 = job.add_rounds();
  r0->set_round(0);
  r0->add_hosts("node-a:2");
  r0->add_hosts("node-b:2");
  r0->set_size(4);
  r0->set_started_unix_ms(1796155586000);
  r0->set_ended_unix_ms(1796155646000);
  r0->set_cause("start");
  v1::RoundInfo* r1 = job.add_rounds();
  r1->set_round(1);
  r1->add_hosts("node-a:2");
  r1->set_size(2);
  r1->set_started_unix_ms(1796155646000);
  r1->set_cause("worker 3 (rank 3) on node-b failed with exit code 1");
  const std::string text = formatJobStatus(job, 1796155700000);
  EXPECT_NE(text.find("  round 0     size 4 on node-a:2, node-b:2, 2026-12-01 20:06:26 to "
                      "2026-12-01 20:07:26: start\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  round 1     size 2 on node-a:2, 2026-12-01 20:07:26 to -: worker 3 "
                      "(rank 3) on node-b failed with exit code 1\n"),
            std::string::npos)
      << text;
  EXPECT_LT(text.find("round 0"), text.find("round 1")) << text;
  // An elastic job lists its rounds, not its one attempt.
  EXPECT_EQ(text.find("attempt"), std::string::npos) << text;
}

TEST(HvdrunJobsCli, StatusOfAJobWithoutRoundsListsNone) {
  EXPECT_EQ(formatJobStatus(sampleJob(), 0).find("round "), std::string::npos);
}

TEST(HvdrunJobsCli, RuntimesAndTimes) {
  EXPECT_EQ(formatRuntime(0), "0:00:00");
  EXPECT_EQ(formatRuntime(59999), "0:00:59");
  EXPECT_EQ(formatRuntime(3723000), "1:02:03");
  EXPECT_EQ(formatRuntime((2 * 86400 + 5) * 1000LL), "2-00:00:05");
  EXPECT_EQ(formatLocalTime(0), "-");
  ::setenv("TZ", "UTC", 1);
  ::tzset();
  EXPECT_EQ(formatLocalTime(1796155586324), "2026-12-01 20:06:26");
}

}  // namespace
}  // namespace hvd::launcher
