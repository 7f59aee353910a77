// hvdagent's command line: what to listen on, which key and TLS files to
// use, where job records live, and the root guard. Parsing only; main() acts on the result.
#pragma once

#include <optional>
#include <string>

#include "agent/common/net.h"
#include "agent/rpc/credentials.h"

namespace hvd::agent::daemon {

struct AgentCliOptions {
  std::string listen;  // default 127.0.0.1:<kDefaultAgentPort>
  std::string keyFile;
  rpc::TlsOptions tls;
  std::string stateDir;
  bool allowRunAsRoot = false;
  std::string portFile;
  std::string logLevel = "info";
  double shutdownGraceSeconds = 5;
  // --slots: ranks this node runs at once across all jobs; 0: one per GPU on a GPU node, no
  // limit on a CPU-only node. Parsed here; the node's ledger applies it.
  int slots = 0;
  size_t keepJobs = 1000;    // finished job records (and logs) kept
  uint64_t maxLogMb = 1024;  // per job
  uint64_t maxStoreMb = 64;  // per job: keys and values in the agent's store
  bool version = false;
  // --slurm-step: started by hvdrun inside a Slurm allocation (launcher/slurm_agents.h): the
  // one-time cluster key comes on stdin, the listen address defaults to this node's address
  // toward the launching host on an ephemeral port, the state dir to a fresh temporary one
  // (removed at exit), "hvdagent-ready NODE ADDRESS" goes to stdout once serving, and stdin's
  // end (hvdrun is done, or gone) shuts the agent down as SIGTERM does.
  bool slurmStep = false;
  // --metrics-listen: Prometheus metrics at GET /metrics (agent/metrics), parsed and checked
  // here; unset: not served. --metrics-port-file: the bound port, as --port-file for --listen.
  std::optional<common::ListenAddress> metricsListen;
  std::string metricsPortFile;
  bool listenGiven = false;
  bool stateDirGiven = false;
};

// Parses argv. Returns an exit code when the process should exit now (--help: 0, a usage error:
// 2, after printing the message), else nullopt with `options` filled and defaults applied
// (key file: rpc::defaultKeyFile(); state dir: defaultStateDir()). A value that cannot be meant
// (an empty path or address, NaN or an infinite number, a number out of range) is a usage error
// naming the option and quoting the value.
std::optional<int> parseAgentCommandLine(int argc, char** argv, AgentCliOptions* options);

// The message that refuses to run as root, or empty when allowed: root needs both
// --allow-run-as-root and HVD_ALLOW_RUN_AS_ROOT_CONFIRM=1 (`confirmEnv` is that variable's
// value, or null).
std::string rootRefusal(bool isRoot, bool allowFlag, const char* confirmEnv);

}  // namespace hvd::agent::daemon
