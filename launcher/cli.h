// hvdrun's command line: parsing (CLI11) and the pure decisions made from it (which hosts are
// local, the environment to forward, the stop signal), kept apart from hvdrun_main.cc so they
// read as a specification and stay testable.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/node/worker_env.h"
#include "contract/host_spec.h"
#include "contract/slurm_hosts.h"

namespace hvd::launcher {

// What the command line asks for: run a job (the usual case, `hvdrun [run]`), submit one that
// outlives hvdrun (`hvdrun submit`), one of the commands about submitted jobs (ps, status, logs,
// attach, cancel), or one that touches no job (`--version`, `--check-build`, `hvdrun keygen`).
enum class Action {
  kRun,
  kSubmit,
  kPs,
  kStatus,
  kLogs,
  kAttach,
  kCancel,
  kVersion,
  kCheckBuild,
  kKeygen
};

// Seconds hvdrun waits for the leader agent to answer when --start-timeout is not given.
constexpr double kDefaultStartTimeoutSeconds = 10.0;

struct Options {
  Action action = Action::kRun;
  int np = 0;
  std::string hostList;  // -H
  std::string hostfile;  // --hostfile
  bool oversubscribe = false;
  std::vector<std::string> exports;  // -x NAME or -x NAME=VALUE, in order
  std::string stopSignal = "TERM";
  double graceSeconds = 10.0;
  std::string outputDir;  // --output-filename
  bool tagOutput = true;
  bool timestampOutput = false;  // --timestamp-output
  // --start-timeout: how long the leader agent may take to accept the job (remote mode); when
  // given explicitly it also reaches every rank as HVD_START_TIMEOUT (see startTimeoutEnv).
  double startTimeoutSeconds = kDefaultStartTimeoutSeconds;
  bool startTimeoutGiven = false;
  int agentPort = 0;  // --agent-port; rpc::kDefaultAgentPort unless given
  bool agentPortGiven = false;
  std::string keyFile;  // --key-file; rpc::defaultKeyFile() unless given
  std::string tlsCert;  // --tls-cert / --tls-key / --tls-ca: all three or none
  std::string tlsKey;
  std::string tlsCa;
  std::string gpuBind = "none";  // --gpu-bind: none | visible
  int gpusPerRank = 1;           // --gpus-per-rank
  bool verbose = false;          // --verbose: debug logs
  // Engine and GPU knobs (--fusion-threshold-mb, --cycle-time-ms, --cache-capacity,
  // --timeline-filename, --stall-check-*-seconds, --gpu-backend, --hierarchical-allreduce) as the
  // "NAME=VALUE" entries they set for every rank (see addEngineSettings), in the order given.
  std::vector<std::string> engineSettings;
  std::vector<std::string> command;  // PROGRAM ARGS...
  double timeLimitSeconds = 0;       // --time-limit; 0: none
  bool printHosts = false;           // --print-hosts: print the hosts (-H form) and exit
  bool allowRunAsRoot = false;       // --allow-run-as-root: for the agents hvdrun starts in Slurm
  // Restarts and the queue (run and submit): parsed and checked here, carried out by the job's
  // leader agent.
  int maxRestarts = 0;                 // --max-restarts: attempts after the first, whole job
  double restartMinUptimeSeconds = 0;  // --restart-min-uptime; 0: none
  std::vector<int> noRestartOnExit;    // --no-restart-on-exit: codes that end the job at once
  bool noQueue = false;                // --no-queue: fail (75) rather than wait for resources
  int treeWidth = 0;  // --tree-width: hosts the leader calls itself (0: the agents' default)

  // The job commands (ps, status, logs, attach, cancel).
  std::string jobId;
  std::optional<std::pair<int, int>> logRanks;  // logs --rank R|R1-R2
  bool follow = false;                          // logs -f
  long long tailLines = 0;                      // logs/attach --tail N; 0: everything
  bool stderrOnly = false;                      // logs --stderr
  std::optional<double> cancelGraceSeconds;     // cancel --grace S
};

// Parses argv (`hvdrun [options] PROGRAM ...` or `hvdrun keygen [--key-file F]`). Returns nullopt
// when options->action should be carried out; otherwise the exit code hvdrun ends with after
// printing what there is to say: 0 for --help, 2 (usage error) for every parse error. Every
// option's value is checked here, and a value that cannot be meant (an empty path or host list,
// NaN or an infinite number, a number out of range, -x with a name that is not an environment
// variable's) is a usage error whose message names the option and quotes the value.
std::optional<int> parseCommandLine(int argc, char** argv, Options* options);

// --time-limit values: seconds ("90", "1.5"), a number with a unit ("90s", "15m", "2h", "1d"),
// or Slurm's clock forms ("MM:SS", "HH:MM:SS", "D-HH:MM:SS"). nullopt for anything else or a
// value that is not positive (or not finite).
std::optional<double> parseDuration(const std::string& text);

// parseDuration's forms, and zero ("0", "0s", "00:00"): for options where 0 means none.
std::optional<double> parseDurationOrZero(const std::string& text);

// "2,3" -> {2, 3}: exit codes 0..255 separated by commas (blanks around them allowed; repeats
// dropped). nullopt for an empty list, an empty entry or anything that is not such a code, with
// *problem (when given) saying which.
std::optional<std::vector<int>> parseExitCodeList(const std::string& text,
                                                  std::string* problem = nullptr);

// "3" -> (3, 3), "1-2" -> (1, 2); nullopt for anything else (negative, reversed, junk).
std::optional<std::pair<int, int>> parseRankRange(const std::string& text);

// "none" -> kNone, "visible" -> kVisible; nullopt for anything else.
std::optional<agent::node::GpuBind> parseGpuBind(const std::string& name);

// "TERM", "SIGTERM", "sigterm" or "15" -> 15; nullopt for anything else.
std::optional<int> parseSignal(const std::string& name);

// True for the names that mean this machine: loopback names and addresses (rpc::isLoopbackName)
// and `ownHostname`.
bool isLocalHost(const std::string& host, const std::string& ownHostname);

// The hosts of the job: -H, else --hostfile, else "localhost:np" (Horovod's default). Throws
// hvd::InvalidArgumentError for a malformed list, both options given, or an unreadable file.
std::vector<contract::HostSlots> resolveHosts(const Options& options);

// Inside a Slurm allocation (SLURM_JOB_ID set) with neither -H nor --hostfile: the allocation's
// hosts (contract/slurm_hosts.h), which hvdrun reaches through agents it starts itself
// (launcher/slurm_agents.h). nullopt otherwise. Throws hvd::InvalidArgumentError for malformed
// Slurm variables. `getenv` is injectable for tests.
bool usesSlurmAllocation(const Options& options,
                         contract::EnvReader getenv);  // SLURM_JOB_ID, no -H
std::optional<std::vector<contract::HostSlots>> slurmHosts(const Options& options,
                                                           contract::EnvReader getenv);

// The hosts as a -H value: "node01:2,node02:2" (a host without slots has no ":N"); IPv6
// addresses in brackets. What --print-hosts prints.
std::string formatHostList(const std::vector<contract::HostSlots>& hosts);

// -np when none was given inside a Slurm allocation: the sum of the hosts' slots (srun's and
// mpirun's default there). Throws hvd::InvalidArgumentError when a host's slots are unknown.
int slotsTotal(const std::vector<contract::HostSlots>& hosts);

// Before any agent starts: -np more than the allocation's tasks (when every node's are known)
// without --oversubscribe is an hvd::InvalidArgumentError that says how to ask Slurm for them.
void checkAllocationFits(const Options& options, const std::vector<contract::HostSlots>& hosts);

// The environment forwarded to every rank as "NAME=VALUE" entries. Embedded jobs forward the
// caller's whole environment, as mpirun does for local ranks: a local job should behave like
// running the program in this shell (PATH, PYTHONPATH, virtualenvs, CUDA settings). Then each
// -x applies in order: NAME=VALUE sets a value; NAME re-forwards the caller's value (a no-op
// locally, accepted so command lines keep working when remote hosts arrive) and is an error when
// NAME is unset, because a silently missing variable is a hard-to-find bug. Throws
// hvd::InvalidArgumentError naming the offending -x.
std::vector<std::string> forwardedEnvironment(const std::vector<std::string>& callerEnv,
                                              const std::vector<std::string>& exports);

// Remote jobs forward only what -x names (mpirun's rule for remote hosts: the caller's PATH or
// HOME mean nothing there; each agent supplies its own base environment). Same -x rules and
// errors as forwardedEnvironment.
std::vector<std::string> exportedEnvironment(const std::vector<std::string>& exports);

// Adds HVD_START_TIMEOUT=<--start-timeout> to `env` when --start-timeout was given and `env` does
// not set HVD_START_TIMEOUT through -x (an explicit -x wins). Without --start-timeout the ranks
// keep the runtime's own default (or the caller's variable, in embedded mode).
void addStartTimeout(const Options& options, std::vector<std::string>* env);

// Adds each of options.engineSettings to `env` (replacing an inherited value) unless -x names the
// same variable: an explicit -x wins, as for --start-timeout.
void addEngineSettings(const Options& options, std::vector<std::string>* env);

// True when the job goes through hvdagent: some host is not this machine, or --agent-port was
// given (then even a local job is submitted to the agent on this machine).
bool usesAgents(const Options& options, const std::vector<contract::HostSlots>& hosts,
                const std::string& ownHostname);

// "host:port" of a host's agent: IPv6 literals in brackets; localhost is contacted at 127.0.0.1
// (where hvdagent listens by default) so the result does not depend on name resolution order.
std::string agentAddress(const std::string& host, int port);

}  // namespace hvd::launcher
