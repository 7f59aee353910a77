// hvdrun inside a Slurm allocation with no -H: the agents of the
// job are started by hvdrun itself, one per node of the allocation, as one Slurm step
//
//   srun --nodes=N --ntasks=N --ntasks-per-node=1 --overlap --input=all --kill-on-bad-exit=0
//        --job-name=hvdagent <dir of hvdrun>/hvdagent --slurm-step [--allow-run-as-root]
//
// (SSH-less: slurmd starts them, as it starts every step). The cluster key is a one-time key
// made for this job (ClusterKey::random) that exists only in memory: hvdrun writes it to srun's
// stdin, which srun broadcasts to every agent's stdin. It is never in a file, on a command line
// or in a log, and it dies with the step. Each agent answers with one "hvdagent-ready NODE
// ADDRESS" line on stdout (agent/daemon/slurm_step.h); once every node has answered, hvdrun
// runs the job through them as it does with -H. At the end hvdrun closes srun's stdin, which
// stops the agents; srun that is still there after a grace gets SIGTERM (it cancels the step),
// then SIGKILL.
//
// srun runs in its own process group, so a Ctrl-C at the terminal reaches hvdrun alone, which
// stops the job gracefully before the agents go. If hvdrun itself dies, the agents see their
// stdin end and stop their ranks.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "agent/auth/cluster_key.h"

namespace hvd::launcher {

// Ctrl-C (or SIGTERM) while the agents were starting: hvdrun exits as cancelled.
struct SlurmStartInterrupted : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct SlurmAgentsOptions {
  std::string srun = "srun";       // the srun to run (PATH lookup; hvdrun: $HVD_SRUN if set)
  std::string agentPath;           // hvdagent on the nodes (see defaultAgentPath)
  std::vector<std::string> nodes;  // the allocation's nodes, in order
  bool allowRunAsRoot = false;     // hvdrun --allow-run-as-root
  std::string logLevel = "warn";   // of the agents (their log goes to hvdrun's stderr)
  std::chrono::milliseconds readyTimeout{60000};
};

// srun's argv for `options` (pure, for tests).
std::vector<std::string> srunArgv(const SlurmAgentsOptions& options);

// "hvdagent-ready NODE ADDRESS" -> (NODE, ADDRESS); nullopt for any other line.
std::optional<std::pair<std::string, std::string>> parseReadyLine(const std::string& line);

// hvdagent next to the running hvdrun (/proc/self/exe), where an installation puts both; else
// "hvdagent" from the PATH of the nodes.
std::string defaultAgentPath();

class SlurmAgents {
 public:
  // Starts the step, hands it `key` and waits until every node's agent is ready, `cancelFd`
  // becomes readable (Ctrl-C: the step is stopped and SlurmStartInterrupted thrown) or the timeout.
  // Throws hvd::BackendError naming the nodes that did not answer and why (srun's exit status;
  // its own messages are on hvdrun's stderr).
  SlurmAgents(const SlurmAgentsOptions& options, const agent::auth::ClusterKey& key, int cancelFd);
  // stop().
  ~SlurmAgents();
  SlurmAgents(const SlurmAgents&) = delete;
  SlurmAgents& operator=(const SlurmAgents&) = delete;

  // "host:port" of each node's agent, in the order of options.nodes.
  std::vector<std::string> addresses() const;

  // Ends the step (see above) and waits for srun. Idempotent.
  void stop();

 private:
  void spawn(const agent::auth::ClusterKey& key);
  void waitReady(int cancelFd);
  // srun's exit status once it has exited (waitpid WNOHANG), else nullopt.
  std::optional<int> reap(bool block);
  // "node a" / "nodes a,b" of the nodes whose agent has not reported ready; empty for none.
  std::string missingNodes() const;

  SlurmAgentsOptions options_;
  pid_t pid_ = -1;
  int stdinFd_ = -1;   // srun's stdin: closing it ends the agents
  int stdoutFd_ = -1;  // srun's stdout: the ready lines, then drained by drain_
  std::map<std::string, std::string> ready_;
  std::string pending_;  // an incomplete line
  std::thread drain_;
  std::atomic<bool> draining_{false};  // stop() reaped srun: drain_ ends once the pipe is idle
  std::optional<int> status_;
};

}  // namespace hvd::launcher
