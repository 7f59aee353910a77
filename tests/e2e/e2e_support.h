// What the e2e tests share: the cluster fixture, running hvdrun against a cluster, reading the
// workers' identity lines, and waiting for processes to go away.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "e2e_cluster.h"
#include "e2e_process.h"
#include "gtest/gtest.h"

namespace hvd::e2e {

// hvdrun's exit codes for outcomes that are not a rank's own status (agent/coordinator/
// exit_codes.h; spelled out here as the user-visible contract).
inline constexpr int kExitAgentUnreachable = 69;
inline constexpr int kExitAgentLost = 75;
inline constexpr int kExitInterrupted = 130;  // 128 + SIGINT

using test::TempDir;

// One rank's "e2e rank=..." identity line (hvd-e2e-worker), as key -> value.
using Fields = std::map<std::string, std::string>;

// The identity lines of hvdrun's (tagged) output, by rank.
std::map<int, std::vector<Fields>> identities(const std::string& output);

// Checks that an allreduce job of hvd-e2e-worker on hosts with `slots` (in host order) ran each
// rank once, in its host's namespace, with the contract's local and cross ranks (cross rank:
// the host's index among the hosts that have a rank with this local rank), and that every rank
// got the right sums.
void expectPlacement(const Cluster& cluster, const RunResult& r, const std::vector<int>& slots);

// Brings up a cluster of `n` hosts for one test, with a prefix of its own ("e2e" + pid + `tag`,
// apart from the shared cluster's) into *cluster. Skips the test without root or `ip netns`;
// fails it (fatally) when the cluster does not come up. Call from SetUp().
void upOwnCluster(int n, const std::string& tag, std::optional<Cluster>* cluster);

// How often `needle` occurs in `text`.
size_t countOf(const std::string& text, const std::string& needle);

// The process exists and has not exited (a zombie counts as gone).
bool alive(pid_t pid);

std::string readFile(const std::string& path);

// hvdrun -np NP -H HOSTS --key-file <cluster key> --agent-port <cluster port> EXTRA...
std::vector<std::string> hvdrunArgs(const Cluster& cluster, int np, const std::string& hosts,
                                    std::vector<std::string> extra = {});

// hvdrun COMMAND ARGS... (ps, status, logs, ...) against the cluster's leader (host 0), where
// the jobs' records are.
std::vector<std::string> jobCommand(const Cluster& cluster, const std::string& command,
                                    std::vector<std::string> args);

// Waits until namespace i holds no process but its agent (or none when the agent is gone), for
// up to `timeout`; returns what is left beyond that, with each process's command line.
std::string leftoversIn(const Cluster& cluster, int i, std::chrono::milliseconds timeout);

// Starts `hvdrun ... hvd-e2e-worker sleep` (grace 2 s) and waits until every rank is ready;
// *workers gets the ranks' pids in rank order. Fails the test (fatally) otherwise.
void startSleepingJob(const Cluster& cluster, int np, const std::string& hosts,
                      std::unique_ptr<Child>* hvdrun, std::vector<pid_t>* workers);

// Waits up to `timeout` for every pid to be gone; returns the ones still alive.
std::vector<pid_t> survivors(const std::vector<pid_t>& pids, std::chrono::milliseconds timeout);

// True once agent i's log contains every one of `needles` (within `timeout`).
bool agentLogHas(const Cluster& cluster, int i, const std::vector<std::string>& needles,
                 std::chrono::milliseconds timeout);

// Tests on the shared 2-host cluster: the one the ctest fixture e2e_cluster_up brought up
// ($HVD_E2E_CLUSTER_ENV names its env file), or, when the binary is run by hand, one that each
// suite brings up and tears down. Skips without root or `ip netns`. After every test, the
// cluster's agents must be alive and no other process left in its namespaces.
class E2e : public ::testing::Test {
 protected:
  static void SetUpTestSuite();
  static void TearDownTestSuite();
  void SetUp() override;
  void TearDown() override;

  static const Cluster& cluster() { return **cluster_; }

 private:
  static std::string* skipReason_;
  static std::string* error_;
  static std::optional<Cluster>* cluster_;
};

}  // namespace hvd::e2e
