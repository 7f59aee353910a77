// What hvdrun's command line asks for, as parsed and checked by parseCommandLine (cli.h): the
// one value that the job's hosts (hosts.h), its environment (job_environment.h), the job built
// from them (job_spec.h) and the job commands (job_commands.h) all read.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hvd::launcher {

// What the command line asks for: run a job (the usual case, `hvdrun [run]`), submit one that
// outlives hvdrun (`hvdrun submit`), one of the commands about submitted jobs (ps, status, logs,
// attach, cancel), the agents' health check (`hvdrun doctor`), or one that touches no agent
// (`--version`, `--check-build`, `hvdrun keygen`).
enum class Action {
  kRun,
  kSubmit,
  kPs,
  kStatus,
  kLogs,
  kAttach,
  kCancel,
  kDoctor,
  kVersion,
  kCheckBuild,
  kKeygen
};

// Seconds hvdrun waits for the leader agent to answer when neither --start-timeout nor
// $HOROVOD_START_TIMEOUT is given: horovodrun's default.
constexpr double kDefaultStartTimeoutSeconds = 30.0;
// The job commands (ps, status, logs, attach, cancel) ask agents that run already, and a person
// waits for the answer: --start-timeout's default there.
constexpr double kDefaultAgentAnswerSeconds = 10.0;
// Horovod's: the elastic driver polls discovery every second, and a round waits 600 s for its
// slots (ELASTIC_TIMEOUT_SECS).
constexpr double kDefaultDiscoveryIntervalSeconds = 1.0;
constexpr double kDefaultElasticTimeoutSeconds = 600.0;

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
  bool timestampOutput = false;  // --timestamp-output, --prefix-output-with-timestamp
  // --start-timeout (else $HOROVOD_START_TIMEOUT, as horovodrun reads it): how long the leader
  // agent may take to accept the job (remote mode); when given either way it also reaches every
  // rank as HVD_START_TIMEOUT (see addStartTimeout in job_environment.h).
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
  // --timeline-filename, --stall-check-*-seconds, --gpu-backend, --hierarchical-allreduce), and
  // the variables of horovodrun's flags (--network-interface, --tcp, --no-stall-check, ...;
  // horovodrun_flags.h), as the "NAME=VALUE" entries they set for every rank (engine_options.h;
  // added to the ranks' environment by addEngineSettings in job_environment.h).
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
  // --log-level as the name the ranks' HVD_LOG_LEVEL takes ("debug"); empty when not given.
  std::string logLevel;

  // Elastic mode (horovodrun's flags, checked here; the job's rounds are the leader's): on when
  // --min-np or --host-discovery-script is given. The ElasticSpec built from these applies
  // Horovod's defaults (job_spec.h elasticSpec).
  bool elastic = false;
  int minNp = 0;                // --min-np; 0: -np
  int maxNp = 0;                // --max-np; 0: every slot there is (Horovod: unbounded)
  std::string discoveryScript;  // --host-discovery-script, absolute; empty: fixed hosts
  int slotsPerHost = 0;         // --slots-per-host; 0: not given
  double discoveryIntervalSeconds = kDefaultDiscoveryIntervalSeconds;
  // --elastic-timeout, else $HVD_ELASTIC_TIMEOUT / $HOROVOD_ELASTIC_TIMEOUT, else 600.
  double elasticTimeoutSeconds = kDefaultElasticTimeoutSeconds;
  std::optional<int> resetLimit;                     // --reset-limit; unset: no limit
  std::optional<std::pair<int, int>> cooldownRange;  // --blacklist-cooldown-range MIN MAX

  // The job commands (ps, status, logs, attach, cancel).
  std::string jobId;
  std::optional<std::pair<int, int>> logRanks;  // logs --rank R|R1-R2
  bool follow = false;                          // logs -f
  long long tailLines = 0;                      // logs/attach --tail N; 0: everything
  bool stderrOnly = false;                      // logs --stderr
  std::optional<double> cancelGraceSeconds;     // cancel --grace S

  bool json = false;  // doctor --json: one JSON object instead of the table
};

}  // namespace hvd::launcher
