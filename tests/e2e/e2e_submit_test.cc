// Submitted jobs on the netns cluster, several at once on the same agents without interfering: two
// jobs submitted with `hvdrun submit` run at the same time on the same two
// agents, each with its own store namespace, token, ports and process groups, and both complete
// with correct results; a worker of one job that presents its token for the other job's store
// namespace is refused. The jobs are followed with `hvdrun status` and `hvdrun logs`, as a user
// back at the login node would.
#include <chrono>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "e2e_support.h"

namespace hvd::e2e {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::string submit(const Cluster& cluster, std::vector<std::string> worker) {
  std::vector<std::string> argv = hvdrunArgs(cluster, 4, cluster.hostList(2), {"--"});
  argv.insert(argv.begin() + 1, "submit");
  argv.insert(argv.end(), worker.begin(), worker.end());
  const RunResult r = run(argv, 60s);
  EXPECT_EQ(r.status, 0) << describe(r);
  std::smatch m;
  EXPECT_TRUE(std::regex_search(r.output, m, std::regex("(hvd-[0-9a-f]{6})"))) << describe(r);
  return m.size() > 1 ? m[1].str() : "";
}

// `hvdrun status` until the job is no longer PENDING or RUNNING; the last text.
std::string waitEnded(const Cluster& cluster, const std::string& id,
                      std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::string text;
  while (Clock::now() < deadline) {
    text = run(jobCommand(cluster, "status", {id}), 20s).output;
    if (text.find(": RUNNING\n") == std::string::npos &&
        text.find(": PENDING\n") == std::string::npos) {
      return text;
    }
    std::this_thread::sleep_for(200ms);
  }
  return text;
}

TEST_F(E2e, TwoSubmittedJobsOnTheSameAgentsBothCompleteAndCannotReadEachOthersStore) {
  TempDir dir;
  const std::string stopFile = (dir.path() / "stop-first").string();
  // The first job keeps allreducing until told to stop, so the second runs beside it.
  const std::string first = submit(cluster(), {HVD_E2E_WORKER_PATH, "allreduce-until", stopFile});
  ASSERT_FALSE(first.empty());
  const RunResult running = run(jobCommand(cluster(), "status", {first}), 20s);
  ASSERT_NE(running.output.find(": RUNNING"), std::string::npos) << describe(running);

  const std::string second = submit(cluster(), {HVD_E2E_WORKER_PATH, "probe-store", first});
  ASSERT_FALSE(second.empty());
  ASSERT_NE(first, second);
  const std::string secondDone = waitEnded(cluster(), second, 60s);
  EXPECT_NE(secondDone.find("job " + second + ": COMPLETED"), std::string::npos) << secondDone;
  EXPECT_NE(run(jobCommand(cluster(), "status", {first}), 20s).output.find(": RUNNING"),
            std::string::npos)
      << "the first job runs on while the second completes";

  std::ofstream(stopFile) << "stop";
  const std::string firstDone = waitEnded(cluster(), first, 60s);
  EXPECT_NE(firstDone.find("job " + first + ": COMPLETED"), std::string::npos) << firstDone;

  const RunResult firstLogs = run(jobCommand(cluster(), "logs", {first}), 30s);
  const RunResult secondLogs = run(jobCommand(cluster(), "logs", {second}), 30s);
  for (int rank = 0; rank < 4; ++rank) {
    const std::string r = "e2e rank=" + std::to_string(rank);
    EXPECT_EQ(countOf(firstLogs.output, r + " allreduce ok rounds="), 1u) << describe(firstLogs);
    EXPECT_EQ(countOf(secondLogs.output, r + " allreduce ok sum=10"), 1u) << describe(secondLogs);
    EXPECT_EQ(countOf(secondLogs.output, r + " foreign store refused: the store at "), 1u)
        << describe(secondLogs);
    EXPECT_EQ(countOf(secondLogs.output, r + " foreign store OPEN"), 0u) << describe(secondLogs);
  }
  // Refused for its credentials, not for anything else (an address, a timeout): every rank.
  EXPECT_EQ(countOf(secondLogs.output, "refused the credentials for job '" + first + "'"), 4u)
      << describe(secondLogs);
  // Each job ran each rank once, in the namespaces of both hosts.
  EXPECT_EQ(identities(firstLogs.output).size(), 4u) << describe(firstLogs);
  EXPECT_EQ(identities(secondLogs.output).size(), 4u) << describe(secondLogs);
  const RunResult ps = run(jobCommand(cluster(), "ps", {}), 20s);
  EXPECT_TRUE(std::regex_search(ps.output, std::regex(first + " +COMPLETED +4 "))) << describe(ps);
  EXPECT_TRUE(std::regex_search(ps.output, std::regex(second + " +COMPLETED +4 "))) << describe(ps);
}

}  // namespace
}  // namespace hvd::e2e
