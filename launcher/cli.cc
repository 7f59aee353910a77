#include "launcher/cli.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "agent/common/cli_checks.h"
#include "agent/relay/tree_shape.h"
#include "agent/rpc/defaults.h"
#include "contract/env_reader.h"
#include "contract/worker_values.h"
#include "contract/worker_variables.h"
#include "hvd/error.hpp"
#include "launcher/engine_options.h"
#include "launcher/horovodrun_flags.h"
#include "launcher/hosts.h"
#include "launcher/job_environment.h"
#include "launcher/job_spec.h"
#include "launcher/option_values.h"

namespace hvd::launcher {

namespace {

using agent::common::finiteRange;
using agent::common::inQuotes;
using agent::common::integerRange;
using agent::common::nonEmpty;

constexpr char kDescription[] =
    "Usage: hvdrun [run] -np N [options] [--] PROGRAM [ARGS...]\n"
    "       hvdrun submit -np N [options] [--] PROGRAM [ARGS...]\n"
    "       hvdrun ps | status JOB | logs JOB | attach JOB | cancel JOB  (see hvdrun ps --help)\n"
    "       hvdrun keygen [--key-file F]\n"
    "       hvdrun doctor [-H HOSTS | --hostfile F] [--json]  (see hvdrun doctor --help)\n"
    "       hvdrun --version | --check-build\n"
    "\n"
    "Runs PROGRAM as N ranks of one hvd job and waits for it. `hvdrun submit` hands the job to\n"
    "the agent instead, prints its id and exits: the job outlives the terminal, and ps,\n"
    "status, logs, attach and cancel find it later.\n"
    "\n"
    "Without -H (or when every host is this machine: localhost, 127.0.0.1, ::1 or its\n"
    "hostname) and without --agent-port the job runs embedded: hvdrun starts the ranks\n"
    "itself, with a job store on 127.0.0.1 and a fresh random token, and needs no daemon and\n"
    "no key file. Every rank gets the caller's whole environment.\n"
    "\n"
    "Otherwise the job is submitted to hvdagent on the first host (port --agent-port), which\n"
    "starts the ranks through the agents of all hosts. Every call is signed with the cluster\n"
    "key (--key-file; create one with `hvdrun keygen` and copy it to every host). Remote\n"
    "ranks get their agent's environment plus only what -x names.\n"
    "\n"
    "Inside a Slurm allocation (SLURM_JOB_ID set) with no -H or --hostfile, the hosts are\n"
    "the allocation's nodes (SLURM_JOB_NODELIST) with the slots of SLURM_TASKS_PER_NODE, and\n"
    "-np defaults to their sum. hvdrun starts one hvdagent per node itself (srun\n"
    "--ntasks-per-node=1 --overlap; no SSH, no daemon to install) with a one-time key that\n"
    "only those agents get, through srun's stdin, and stops them at the end. The ranks get\n"
    "the agents' environment (the one srun forwards) plus what -x names. --print-hosts shows\n"
    "the hosts hvdrun derived.\n"
    "\n"
    "Elastic mode (horovodrun's flags, listed under Elastic) is on when --min-np or\n"
    "--host-discovery-script is given: -np is then the slots the job starts with, and the\n"
    "job lives through rounds of between --min-np and --max-np ranks. The script's hosts\n"
    "may come and go; with -H or --hostfile (not with the script) the hosts are fixed:\n"
    "fault tolerance without scaling.\n"
    "\n"
    "horovodrun's command lines run as they are: its flags that hvdrun has under no name of\n"
    "its own are listed under \"horovodrun compatibility\"; each does what it does in\n"
    "horovodrun through hvd's own settings, or, where hvd has nothing it could mean (SSH,\n"
    "mpirun, autotuning), is accepted with one warning saying why it is ignored. Also\n"
    "horovodrun's spellings -np, -hostfile, -cb, -prefix-timestamp and -v, its --config-file\n"
    "and $HOROVOD_START_TIMEOUT (docs/horovodrun.md).\n"
    "\n"
    "Every rank also gets the hvd variables (HVD_RANK, HVD_SIZE, ..., RANK/WORLD_SIZE/...,\n"
    "HOROVOD_*). Output lines are prefixed '[rank]<stdout>: ' / '[rank]<stderr>: ' and go\n"
    "to hvdrun's stdout / stderr.\n"
    "\n"
    "Exit status: 0 when every rank exited 0; else the first failing rank's exit code\n"
    "(128+signal when a signal killed it), with one line naming it and its last stderr\n"
    "lines; 2 for usage errors (also a missing or unsafe key file); 69 agent unreachable\n"
    "(in a Slurm allocation also: its agents could not be started);\n"
    "70 internal error (a bug in hvdrun: please report the message); 71 launch failed\n"
    "(e.g. PROGRAM not found); 74 the leader agent could not record the job (its state\n"
    "directory's disk is full or failing); 75 agent lost (with --no-queue also: the GPUs or\n"
    "slots are busy); 77 authentication failed (wrong key); 124 time limit reached;\n"
    "130 cancelled.\n"
    "Ctrl-C (or SIGTERM) stops the job gracefully; a second one within 2 s kills it.";

constexpr char kJobsDescription[] =
    "Usage: hvdrun ps [agent options]\n"
    "       hvdrun status JOB [agent options]\n"
    "       hvdrun logs JOB [--rank R|R1-R2] [-f] [--tail N] [--stderr] [agent options]\n"
    "       hvdrun attach JOB [--tail N] [agent options]\n"
    "       hvdrun cancel JOB [--grace S] [agent options]\n"
    "\n"
    "Commands about the jobs the agents lead (submitted with `hvdrun submit`, or run attached\n"
    "through an agent). They ask the agents of the hosts given by -H or --hostfile (slots are\n"
    "ignored), else of $HVD_AGENT_HOSTS (a -H style list), else the agent on this machine.\n"
    "\n"
    "ps      every job: id, state, np, hosts, submitted, runtime, exit code, command.\n"
    "status  one job in detail: state (PENDING, QUEUED with what it waits for, RUNNING,\n"
    "        COMPLETED, FAILED, CANCELLED, TIMEOUT, LOST), what it holds on each host, every\n"
    "        attempt of a restarting job, every rank's host, pid, state and exit, the root\n"
    "        cause.\n"
    "logs    the job's output with the rank tags of an attached run, from the start; -f\n"
    "        follows it until the job ends. Works after the job ended. Where a restarting\n"
    "        job's lines pass to its next attempt, stderr says so and why.\n"
    "attach  follows the job's output from now (after the last --tail N lines) and exits\n"
    "        with the job's exit status; Ctrl-C detaches and the job keeps running.\n"
    "cancel  stops the job (its stop signal, SIGKILL after the grace) and waits for its end;\n"
    "        a job that already ended is left as it was.\n"
    "\n"
    "Exit status: 0; 1 no such job on those agents; 2 usage error; 69 agent unreachable;\n"
    "70 internal error (a bug in hvdrun); 77 authentication failed; 124 cancel: the job did\n"
    "not end in its grace plus a margin; attach: the job's exit status.";

constexpr char kDoctorDescription[] =
    "Usage: hvdrun doctor [-H HOSTS | --hostfile F] [--json] [agent options]\n"
    "\n"
    "Checks the agents of a cluster before a job, and starts none. Asks the agents of the\n"
    "hosts given by -H or --hostfile (slots are ignored), else of $HVD_AGENT_HOSTS, else the\n"
    "agent on this machine, all at once, each within --start-timeout, whether:\n"
    "  * it answers (UNREACHABLE: the host, the address asked and why not);\n"
    "  * it accepts hvdrun's key (AUTH FAILED: a different --key-file, or this host's clock\n"
    "    outside the agents' 30 s signature window);\n"
    "  * it runs hvdrun's own version (VERSION MISMATCH: a job needs one build everywhere);\n"
    "  * its clock is within 1 s of this host's (CLOCK): offset = the agent's clock as it\n"
    "    answers minus the midpoint of the call here, +- half the round trip. Log lines, job\n"
    "    records and timed-out waits are compared across hosts by wall-clock time, and the\n"
    "    agents' timeouts and leases are seconds long: beyond a second they mislead.\n"
    "It also lists each host's CPUs, its GPUs (model, memory) and which jobs hold them in the\n"
    "agent's ledger. It does not check the GPUs' driver, CUDA or NCCL versions, nor the links\n"
    "between the hosts.\n"
    "\n"
    "Prints one row per host (HOST, ADDRESS, STATUS, VERSION, CLOCK (ms), CPUS, GPUS), then\n"
    "one line per problem saying what is wrong and what to do. --json prints one JSON object\n"
    "instead: \"ok\", \"hvdrun_version\", \"clock_limit_us\", \"hosts\" (every field of each\n"
    "host; null where its agent did not say) and \"problems\" (host, address, kind, message).\n"
    "\n"
    "Exit status: 0 every agent is fine; 1 a problem was found; 2 usage error (also a\n"
    "missing or unsafe key file).";

constexpr char kKeygenDescription[] =
    "Usage: hvdrun keygen [--key-file F]\n"
    "\n"
    "Creates a new cluster key: 32 random bytes in F (mode 0600; its directory is created\n"
    "with mode 0700 if missing). Never overwrites an existing file. Prints the path and the\n"
    "key's fingerprint, never the key. Copy the file to every host (same path, mode 0600,\n"
    "owned by the user running hvdagent) and restart the agents.";

CLI::Validator exportCheck() {
  return CLI::Validator(
      [](std::string& entry) -> std::string {
        const std::string problem = exportProblem(entry);
        return problem.empty() ? problem : inQuotes(entry) + ": " + problem;
      },
      "NAME[=VALUE]");
}

// mpirun and horovodrun spell the rank count "-np", and horovodrun a few more options with one
// dash ("-hostfile", "-cb", "-prefix-timestamp"); CLI11 allows one character after a single
// dash. Options before PROGRAM are split from PROGRAM's own argv here (the first word that is
// neither an option nor an option's value, or everything after "--"), and those spellings become
// the options' own ("-np" -> "--np", "-hostfile=F" -> "--hostfile=F").
void splitArguments(int argc, char** argv, std::vector<std::string>* ours,
                    std::vector<std::string>* command) {
  struct TakesValues {
    const char* name;
    int count;
  };
  static const TakesValues kTakesValues[] = {{"-n", 1},
                                             {"--np", 1},
                                             {"--num-proc", 1},
                                             {"-H", 1},
                                             {"--hosts", 1},
                                             {"--hostfile", 1},
                                             {"-x", 1},
                                             {"--stop-signal", 1},
                                             {"--grace", 1},
                                             {"--output-filename", 1},
                                             {"--log-level", 1},
                                             {"--gpu-bind", 1},
                                             {"--gpus-per-rank", 1},
                                             {"--gpu-backend", 1},
                                             {"--agent-port", 1},
                                             {"--start-timeout", 1},
                                             {"--key-file", 1},
                                             {"--tls-cert", 1},
                                             {"--tls-key", 1},
                                             {"--tls-ca", 1},
                                             {"--fusion-threshold-mb", 1},
                                             {"--cycle-time-ms", 1},
                                             {"--cache-capacity", 1},
                                             {"--timeline-filename", 1},
                                             {"--stall-check-warning-time-seconds", 1},
                                             {"--stall-check-shutdown-time-seconds", 1},
                                             {"--time-limit", 1},
                                             {"--max-restarts", 1},
                                             {"--restart-min-uptime", 1},
                                             {"--no-restart-on-exit", 1},
                                             {"--tree-width", 1},
                                             {"--min-np", 1},
                                             {"--min-num-proc", 1},
                                             {"--max-np", 1},
                                             {"--max-num-proc", 1},
                                             {"--host-discovery-script", 1},
                                             {"--slots-per-host", 1},
                                             {"--slots", 1},
                                             {"--elastic-timeout", 1},
                                             {"--reset-limit", 1},
                                             {"--blacklist-cooldown-range", 2},
                                             {"--discovery-interval", 1},
                                             {"--network-interface", 1},
                                             {"--network-interfaces", 1},
                                             {"--gloo-timeout-seconds", 1},
                                             {"--num-nccl-streams", 1},
                                             {"--thread-affinity", 1},
                                             {"-p", 1},
                                             {"--ssh-port", 1},
                                             {"-i", 1},
                                             {"--ssh-identity-file", 1},
                                             {"--mpi-args", 1},
                                             {"--binding-args", 1},
                                             {"--config-file", 1},
                                             {"--autotune-log-file", 1},
                                             {"--autotune-warmup-samples", 1},
                                             {"--autotune-steps-per-sample", 1},
                                             {"--autotune-bayes-opt-max-samples", 1},
                                             {"--autotune-gaussian-process-noise", 1}};
  static const std::pair<const char*, const char*> kSingleDash[] = {
      {"-np", "--np"},
      {"-hostfile", "--hostfile"},
      {"-cb", "--check-build"},
      {"-prefix-timestamp", "--prefix-output-with-timestamp"}};
  ours->push_back(argc > 0 ? argv[0] : "hvdrun");
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      command->assign(argv + i + 1, argv + argc);
      return;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      command->assign(argv + i, argv + argc);
      return;
    }
    for (const auto& [single, full] : kSingleDash) {
      const std::string prefix = std::string(single) + "=";
      if (arg == single) arg = full;
      if (arg.rfind(prefix, 0) == 0) arg = full + arg.substr(prefix.size() - 1);
    }
    ours->push_back(arg);
    for (const TakesValues& option : kTakesValues) {
      if (arg != option.name) continue;
      for (int n = 0; n < option.count && i + 1 < argc; ++n) ours->push_back(argv[++i]);
    }
  }
}

// `hvdrun COMMAND ARGS...`: parses ARGS with `app`. nullopt to go on; else the exit code after
// the help (0) or the parse error (2) was printed.
std::optional<int> parseAfterCommand(CLI::App& app, int argc, char** argv) {
  std::vector<std::string> args(argv + 2, argv + argc);
  std::reverse(args.begin(), args.end());  // CLI11 takes a vector in reverse order
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp&) {
    std::printf("%s", app.help().c_str());
    return 0;
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  return std::nullopt;
}

// `hvdrun keygen [--key-file F]`: argv[1] is "keygen".
std::optional<int> parseKeygen(int argc, char** argv, Options* options) {
  CLI::App app(kKeygenDescription, "hvdrun keygen");
  agent::common::prefixErrorsWithName(&app);
  options->keyFile = agent::rpc::defaultKeyFile();
  app.add_option("--key-file", options->keyFile,
                 "where to write the key (default: $HVD_KEY_FILE, else ~/.hvd/cluster.key)")
      ->check(nonEmpty());
  if (std::optional<int> code = parseAfterCommand(app, argc, argv)) return code;
  if (options->keyFile.empty()) {
    std::fprintf(stderr, "hvdrun keygen: no key file: give --key-file (HOME is not set)\n");
    return 2;
  }
  options->action = Action::kKeygen;
  return std::nullopt;
}

// The options every job command takes: which agents, and how to reach them.
void addAgentOptions(CLI::App* app, Options* options) {
  app->add_option("-H,--hosts", options->hostList,
                  "the agents of these hosts (host[:slots],...; slots ignored)")
      ->check(nonEmpty());
  app->add_option("--hostfile", options->hostfile, "the agents of this hostfile's hosts")
      ->check(nonEmpty());
  app->add_option("--agent-port", options->agentPort,
                  "port of hvdagent on every host (default " +
                      std::to_string(agent::rpc::kDefaultAgentPort) + ")")
      ->check(integerRange(1, 65535));
  app->add_option("--key-file", options->keyFile,
                  "cluster key (default: $HVD_KEY_FILE, else ~/.hvd/cluster.key)")
      ->check(nonEmpty());
  app->add_option("--tls-cert", options->tlsCert, "client certificate (PEM) for mutual TLS")
      ->check(nonEmpty());
  app->add_option("--tls-key", options->tlsKey, "its private key (PEM)")->check(nonEmpty());
  app->add_option("--tls-ca", options->tlsCa, "CA (PEM) that signed the agents' certificates")
      ->check(nonEmpty());
  app->add_flag("--verbose", options->verbose, "debug logs on stderr");
}

// --agent-port and --key-file when not given: the agents' defaults. Whether the port was given
// also decides the mode (usesAgents in hosts.h).
void setAgentDefaults(const CLI::App& app, Options* options) {
  options->agentPortGiven = app.count("--agent-port") > 0;
  if (!options->agentPortGiven) options->agentPort = agent::rpc::kDefaultAgentPort;
  if (app.count("--key-file") == 0) options->keyFile = agent::rpc::defaultKeyFile();
}

// `hvdrun ps|status|logs|attach|cancel ...`: argv[1] is the command.
std::optional<int> parseJobCommand(int argc, char** argv, Options* options) {
  const std::string command = argv[1];
  CLI::App app(kJobsDescription, "hvdrun " + command);
  agent::common::prefixErrorsWithName(&app);
  addAgentOptions(&app, options);
  options->startTimeoutSeconds = kDefaultAgentAnswerSeconds;
  app.add_option("--start-timeout", options->startTimeoutSeconds,
                 "seconds an agent may take to answer (logs without -f: to send each next part "
                 "of the log, however long the whole takes)")
      ->check(finiteRange(0.001, 86400, "seconds"))
      ->capture_default_str();
  if (command != "ps") {
    app.add_option("JOB", options->jobId, "the job id (hvd-...)")->required()->check(nonEmpty());
  }
  std::string ranks;
  CLI::Option* rankOption = nullptr;
  double grace = 0;
  CLI::Option* graceOption = nullptr;
  if (command == "logs") {
    rankOption = app.add_option("--rank", ranks, "only this rank (R) or these ranks (R1-R2)");
    app.add_flag("-f,--follow", options->follow, "keep printing new lines until the job ends");
    app.add_option("--tail", options->tailLines, "only the last N lines")
        ->check(integerRange(0, 1LL << 40));
    app.add_flag("--stderr", options->stderrOnly, "only the ranks' stderr");
  } else if (command == "attach") {
    app.add_option("--tail", options->tailLines, "first print the last N lines (default 0)")
        ->check(integerRange(0, 1LL << 40));
  } else if (command == "cancel") {
    graceOption = app.add_option("--grace", grace,
                                 "seconds between the stop signal and SIGKILL (default: the "
                                 "job's own)")
                      ->check(finiteRange(0, 86400, "seconds"));
  }
  if (std::optional<int> code = parseAfterCommand(app, argc, argv)) return code;
  // By count, not by value: `--rank ''` is an error, not "every rank".
  if (rankOption != nullptr && rankOption->count() > 0) {
    options->logRanks = parseRankRange(ranks);
    if (!options->logRanks) {
      std::fprintf(stderr, "hvdrun logs: --rank '%s': expected a rank R or a range R1-R2\n",
                   ranks.c_str());
      return 2;
    }
  }
  if (graceOption != nullptr && graceOption->count() > 0) options->cancelGraceSeconds = grace;
  setAgentDefaults(app, options);
  options->action = command == "ps"       ? Action::kPs
                    : command == "status" ? Action::kStatus
                    : command == "logs"   ? Action::kLogs
                    : command == "attach" ? Action::kAttach
                                          : Action::kCancel;
  return std::nullopt;
}

// `hvdrun doctor [-H ... | --hostfile F] [--json] [agent options]`: argv[1] is "doctor".
std::optional<int> parseDoctor(int argc, char** argv, Options* options) {
  CLI::App app(kDoctorDescription, "hvdrun doctor");
  agent::common::prefixErrorsWithName(&app);
  addAgentOptions(&app, options);
  options->startTimeoutSeconds = kDefaultAgentAnswerSeconds;
  app.add_option("--start-timeout", options->startTimeoutSeconds,
                 "seconds each agent may take to answer")
      ->check(finiteRange(0.001, 86400, "seconds"))
      ->capture_default_str();
  app.add_flag("--json", options->json, "print one JSON object instead of the table");
  if (std::optional<int> code = parseAfterCommand(app, argc, argv)) return code;
  setAgentDefaults(app, options);
  options->action = Action::kDoctor;
  return std::nullopt;
}

// The run options that stay text until checked after parsing, and the flags that end hvdrun
// before any job.
struct RunText {
  std::string timeLimit;
  std::string minUptime;
  std::string noRestartCodes;
  std::string logLevel;
  std::pair<int, int> cooldownRange;
  int resetLimit = 0;
  bool version = false;
  bool checkBuild = false;
};

// What runs where: -np, the hosts, and the environment -x adds.
void addPlacementOptions(CLI::App* app, Options* options) {
  // -np is checked after parsing (checkRunOptions) rather than by CLI11, so that --version and
  // --check-build need none.
  app->add_option("-n,--np,--num-proc", options->np,
                  "number of ranks to run (exact; in elastic mode: the slots to start with); "
                  "also -np")
      ->check(integerRange(1, 1 << 20));
  app->add_option("-H,--hosts", options->hostList,
                  "hosts as host[:slots],... (IPv6 as [addr]:slots); a host without slots gets "
                  "its GPU count, or 1; default: localhost:N")
      ->check(nonEmpty());
  app->add_option("--hostfile", options->hostfile,
                  "file with one 'host slots=N' (or host:N) per line, # comments; also -hostfile")
      ->check(nonEmpty());
  app->add_flag("--oversubscribe", options->oversubscribe, "allow more ranks than a host's slots");
  app->add_option("-x", options->exports,
                  "NAME=VALUE sets NAME for every rank; NAME forwards the caller's value "
                  "(embedded jobs forward the whole environment already; remote ranks get only "
                  "what -x names); repeatable")
      ->allow_extra_args(false)
      ->check(exportCheck());
}

// How the ranks are stopped and how their output is shown.
void addStopAndOutputOptions(CLI::App* app, Options* options, RunText* text) {
  app->add_option("--stop-signal", options->stopSignal,
                  "signal of a graceful stop (name or number)")
      ->capture_default_str();
  app->add_option("--grace", options->graceSeconds, "seconds between the stop signal and SIGKILL")
      ->check(finiteRange(0, 86400, "seconds"))
      ->capture_default_str();
  app->add_option("--output-filename", options->outputDir,
                  "also write each rank's output to DIR/rank.<r>/stdout and stderr")
      ->check(nonEmpty());
  app->add_flag("--tag-output,!--no-tag-output", options->tagOutput,
                "prefix each line with [rank]<stdout>: or [rank]<stderr>: (default on)");
  app->add_flag("--timestamp-output", options->timestampOutput,
                "prefix each line with the local time it arrived (YYYY-MM-DDTHH:MM:SS.mmm)");
  app->add_option("--log-level", text->logLevel,
                  "the ranks' hvd log level: TRACE, DEBUG, INFO, WARNING, ERROR or FATAL (as "
                  "horovodrun), or trace, debug, info, warn, error, off; default warn -> " +
                      std::string(contract::worker::kLogLevel.name));
}

// Which GPUs each rank gets (the GPU knobs of the engine follow them in --help).
void addGpuOptions(CLI::App* app, Options* options) {
  app->add_option("--gpu-bind", options->gpuBind,
                  "none: each rank gets HVD_GPU only; visible: also CUDA_VISIBLE_DEVICES=<that "
                  "GPU>")
      ->capture_default_str();
  app->add_option("--gpus-per-rank", options->gpusPerRank,
                  "GPUs each rank gets (consecutive, in local-rank order); a host's default slots "
                  "are then its GPUs / this")
      ->check(integerRange(1, 1024))
      ->capture_default_str();
}

// How a job reaches the agents; worded for a run (the job commands have addAgentOptions).
void addRunAgentOptions(CLI::App* app, Options* options) {
  app->add_option("--start-timeout", options->startTimeoutSeconds,
                  "seconds the agents may take to answer and accept the job (default "
                  "$HOROVOD_START_TIMEOUT, else 30, as horovodrun); when given either way, also "
                  "the ranks' rendezvous timeout (HVD_START_TIMEOUT) unless -x sets it")
      ->check(finiteRange(0.001, 86400, "seconds"));
  app->add_option("--agent-port", options->agentPort,
                  "port of hvdagent on every host (default " +
                      std::to_string(agent::rpc::kDefaultAgentPort) +
                      "); given, even a local job goes through the agent")
      ->check(integerRange(1, 65535));
  app->add_option("--key-file", options->keyFile,
                  "cluster key that signs the agent calls (default: $HVD_KEY_FILE, else "
                  "~/.hvd/cluster.key)")
      ->check(nonEmpty());
  app->add_option("--tls-cert", options->tlsCert, "client certificate (PEM) for mutual TLS")
      ->check(nonEmpty());
  app->add_option("--tls-key", options->tlsKey, "its private key (PEM)")->check(nonEmpty());
  app->add_option("--tls-ca", options->tlsCa, "CA (PEM) that signed the agents' certificates")
      ->check(nonEmpty());
  app->add_flag("--verbose", options->verbose, "debug logs on stderr");
}

// The job's life: its time limit, restarts, the queue and the relay tree. Restarts and the queue
// are parsed and checked here and carried out by the job's leader agent, which keeps the one
// restart budget (docs/architecture.md "Resources, queue and restarts").
void addJobControlOptions(CLI::App* app, Options* options, RunText* text) {
  app->add_option("--time-limit", text->timeLimit,
                  "stop the job gracefully once it has run this long; it ends in TIMEOUT (exit "
                  "124). Seconds, or 90s, 15m, 2h, 1d, MM:SS, HH:MM:SS, D-HH:MM:SS");
  app->add_option("--max-restarts", options->maxRestarts,
                  "when a rank fails, stop every rank and start the job again, up to N times for "
                  "the whole job (default 0)")
      ->check(integerRange(0, std::numeric_limits<int>::max()));
  app->add_option("--restart-min-uptime", text->minUptime,
                  "an attempt that fails sooner than T ends the job (a start-up failure) instead "
                  "of restarting; T as for --time-limit (default 0: none)");
  app->add_option("--no-restart-on-exit", text->noRestartCodes,
                  "a rank exiting with one of these codes (comma-separated, 0-255, e.g. 2,3) "
                  "ends the job at once, without restart");
  app->add_option("--tree-width", options->treeWidth,
                  "the leader agent calls at most this many hosts itself; beyond, agents relay "
                  "the job's calls as a tree of this width (default " +
                      std::to_string(agent::relay::kDefaultTreeWidth) + ")")
      ->check(integerRange(1, 1000000));
  app->add_flag("--no-queue", options->noQueue,
                "fail at once (exit 75) instead of waiting in the agent's queue when the GPUs or "
                "slots are busy");
}

// Elastic mode: horovodrun's flags (and their aliases), plus hvd's --discovery-interval. Listed
// under their own heading, as horovodrun's "elastic arguments". Checked after parsing by
// convertElastic; the defaults that depend on -np are elasticSpec's (job_spec.h).
void addElasticOptions(CLI::App* app, Options* options, RunText* text) {
  const char* const kGroup = "Elastic (on with --min-np or --host-discovery-script)";
  app->add_option("--min-np,--min-num-proc", options->minNp,
                  "elastic mode: the fewest ranks the job runs with; with fewer slots it waits "
                  "for more, up to --elastic-timeout (default -np)")
      ->check(integerRange(1, 1 << 20))
      ->group(kGroup);
  app->add_option("--max-np,--max-num-proc", options->maxNp,
                  "elastic mode: the most ranks the job runs with (default: every slot there is)")
      ->check(integerRange(1, 1 << 20))
      ->group(kGroup);
  app->add_option("--host-discovery-script", options->discoveryScript,
                  "an executable printing the hosts the job may use, one host[:slots] per line, "
                  "run every --discovery-interval; turns elastic mode on. Not with -H or "
                  "--hostfile (which give fixed hosts: fault tolerance without scaling)")
      ->check(nonEmpty())
      ->group(kGroup);
  app->add_option("--slots-per-host,--slots", options->slotsPerHost,
                  "slots of a host the discovery script prints without :slots (default 1)")
      ->check(integerRange(1, 1 << 20))
      ->group(kGroup);
  app->add_option("--elastic-timeout", options->elasticTimeoutSeconds,
                  "seconds a round waits for --min-np slots, and workers for their next round "
                  "(default $HVD_ELASTIC_TIMEOUT or $HOROVOD_ELASTIC_TIMEOUT, else 600)")
      ->check(finiteRange(0.001, 1e6, "seconds"))
      ->group(kGroup);
  app->add_option("--reset-limit", text->resetLimit,
                  "at most N resets (new rounds after a failure or a change of hosts); the "
                  "next one fails the job (default: no limit)")
      ->check(integerRange(0, std::numeric_limits<int>::max()))
      ->group(kGroup);
  app->add_option("--blacklist-cooldown-range", text->cooldownRange,
                  "a host whose rank failed may return after a backoff of MIN to MAX seconds "
                  "(each 1-3600; default: never)")
      ->check(integerRange(1, 3600))
      ->type_name("MIN MAX")
      ->group(kGroup);
  app->add_option("--discovery-interval", options->discoveryIntervalSeconds,
                  "seconds between two discoveries of the hosts (default 1, as horovodrun)")
      ->check(finiteRange(0.001, 3600, "seconds"))
      ->group(kGroup);
}

// The options that run no job, or only change how hvdrun starts the agents in Slurm.
void addOtherOptions(CLI::App* app, Options* options, RunText* text) {
  app->add_flag("--print-hosts", options->printHosts,
                "print the hosts the job would use, as a -H list (in a Slurm allocation: derived "
                "from it), and exit");
  app->add_flag("--allow-run-as-root", options->allowRunAsRoot,
                "in a Slurm allocation: let the agents hvdrun starts run the ranks as root (they "
                "also need HVD_ALLOW_RUN_AS_ROOT_CONFIRM=1 in the environment)");
  app->add_flag("-v,--version", text->version, "print hvdrun's version and exit");
  app->add_flag("--check-build", text->checkBuild,
                "print what this build has (transports, NCCL, MPI, TLS) and exit; also -cb");
}

// Parses argv (options first, then PROGRAM into options->command) with `app`. nullopt to go on;
// else the exit code after the help (0) or the parse error (2) was printed.
std::optional<int> parseRunArguments(CLI::App& app, int argc, char** argv, Options* options) {
  std::vector<std::string> ours;
  splitArguments(argc, argv, &ours, &options->command);
  std::vector<char*> ourArgv;
  for (std::string& arg : ours) ourArgv.push_back(arg.data());
  try {
    app.parse(static_cast<int>(ourArgv.size()), ourArgv.data());
  } catch (const CLI::CallForHelp& e) {
    std::printf("%s", app.help().c_str());
    std::printf("  PROGRAM [ARGS...]           what every rank runs (an argv list, no shell)\n");
    return 0;
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  return std::nullopt;
}

// --time-limit, --restart-min-uptime and --no-restart-on-exit from their text. nullopt to go on;
// else 2 after saying which value is wrong.
std::optional<int> convertJobControl(const CLI::App& app, const RunText& text, Options* options) {
  // By count, not by value: `--time-limit ''` is an error, not "no limit".
  if (app.count("--time-limit") > 0) {
    const std::optional<double> seconds = parseDuration(text.timeLimit);
    if (!seconds) {
      std::fprintf(stderr,
                   "hvdrun: --time-limit '%s': expected seconds, a number with s, m, h or d, or "
                   "[D-]HH:MM:SS\n",
                   text.timeLimit.c_str());
      return 2;
    }
    options->timeLimitSeconds = *seconds;
  }
  if (app.count("--restart-min-uptime") > 0) {
    const std::optional<double> seconds = parseDurationOrZero(text.minUptime);
    if (!seconds) {
      std::fprintf(stderr,
                   "hvdrun: --restart-min-uptime '%s': expected 0, seconds, a number with s, m, h "
                   "or d, or [D-]HH:MM:SS\n",
                   text.minUptime.c_str());
      return 2;
    }
    options->restartMinUptimeSeconds = *seconds;
  }
  if (app.count("--no-restart-on-exit") > 0) {
    std::string problem;
    std::optional<std::vector<int>> codes = parseExitCodeList(text.noRestartCodes, &problem);
    if (!codes) {
      std::fprintf(stderr, "hvdrun: --no-restart-on-exit '%s': %s\n", text.noRestartCodes.c_str(),
                   problem.c_str());
      return 2;
    }
    options->noRestartOnExit = std::move(*codes);
  }
  return std::nullopt;
}

// --host-discovery-script's path made absolute against hvdrun's working directory (the driver
// runs it from wherever it runs), checked now rather than at the job's first discovery: Horovod
// fails the job at once when the first run of the script fails. "" with *absolute set, else the
// problem.
std::string discoveryScriptProblem(const std::string& given, std::string* absolute) {
  std::error_code failure;
  const std::filesystem::path path = std::filesystem::absolute(given, failure);
  if (failure) return inQuotes(given) + ": " + failure.message();
  *absolute = path.lexically_normal().string();
  const std::string named =
      inQuotes(given) + (*absolute == given ? std::string() : " (" + *absolute + ")");
  const std::filesystem::file_status status = std::filesystem::status(path, failure);
  if (failure || !std::filesystem::exists(status)) return named + ": no such file";
  if (std::filesystem::is_directory(status)) return named + ": is a directory, not a script";
  if (::access(absolute->c_str(), X_OK) != 0) {
    return named + ": not executable (chmod +x it; it is run as a program, not through a shell)";
  }
  return {};
}

// The elastic flags after parsing: whether elastic mode is on (horovodrun's rule: a discovery
// script or --min-np), the script, the timeout from the environment, and the flags that mean
// nothing in the mode the job is in (horovodrun ignores them; hvdrun says so). nullopt to go on;
// else 2 after saying why.
std::optional<int> convertElastic(const CLI::App& app, const RunText& text, Options* options) {
  const bool script = app.count("--host-discovery-script") > 0;
  options->elastic = script || app.count("--min-np") > 0;
  if (!options->elastic) {
    std::string ignored;
    for (const char* name : {"--max-np", "--slots-per-host", "--elastic-timeout", "--reset-limit",
                             "--blacklist-cooldown-range", "--discovery-interval"}) {
      if (app.count(name) > 0) ignored += (ignored.empty() ? "" : ", ") + std::string(name);
    }
    if (!ignored.empty()) {
      std::fprintf(stderr,
                   "hvdrun: warning: %s ignored: not an elastic job (elastic mode needs --min-np "
                   "or --host-discovery-script)\n",
                   ignored.c_str());
    }
    return std::nullopt;
  }
  if (script) {
    // horovodrun: -H, --hostfile and --host-discovery-script are mutually exclusive.
    for (const char* hosts : {"-H", "--hostfile"}) {
      if (app.count(hosts) > 0) {
        std::fprintf(stderr,
                     "hvdrun: --host-discovery-script and %s exclude each other: the script names "
                     "the hosts (give %s without the script for fixed hosts)\n",
                     hosts, hosts);
        return 2;
      }
    }
    if (options->printHosts) {
      std::fprintf(stderr,
                   "hvdrun: --print-hosts: the hosts of this job are what "
                   "--host-discovery-script prints; run the script instead\n");
      return 2;
    }
    std::string absolute;
    if (const std::string problem = discoveryScriptProblem(options->discoveryScript, &absolute);
        !problem.empty()) {
      std::fprintf(stderr, "hvdrun: --host-discovery-script %s\n", problem.c_str());
      return 2;
    }
    options->discoveryScript = absolute;
  } else if (app.count("--slots-per-host") > 0) {
    std::fprintf(stderr,
                 "hvdrun: warning: --slots-per-host ignored: it gives the slots of the hosts a "
                 "--host-discovery-script prints, and this job's hosts are fixed\n");
  }
  // Horovod reads HOROVOD_ELASTIC_TIMEOUT when --elastic-timeout is not given (the option wins);
  // hvd's own name wins over it, as for every worker variable.
  if (app.count("--elastic-timeout") == 0) {
    try {
      if (const std::optional<contract::WorkerValue> value = contract::readWorkerValue(
              contract::worker::kElasticTimeout,
              [](const char* name) -> const char* { return std::getenv(name); })) {
        options->elasticTimeoutSeconds = value->number;
      }
    } catch (const InvalidArgumentError& e) {
      std::fprintf(stderr, "hvdrun: %s\n", e.what());
      return 2;
    }
  }
  // As horovodrun: 0 allows no reset at all (the job fails at its first one); absent, any number.
  if (app.count("--reset-limit") > 0) options->resetLimit = text.resetLimit;
  if (app.count("--blacklist-cooldown-range") > 0) {
    const auto [low, high] = text.cooldownRange;
    if (low > high) {
      std::fprintf(stderr,
                   "hvdrun: --blacklist-cooldown-range %d %d: MIN is more than MAX (expected MIN "
                   "MAX, e.g. 60 300)\n",
                   low, high);
      return 2;
    }
    options->cooldownRange = text.cooldownRange;
  }
  return std::nullopt;
}

// --start-timeout when not given: $HOROVOD_START_TIMEOUT, as horovodrun reads it, which then
// counts as given (the ranks' rendezvous timeout too). nullopt to go on; else 2 after saying why.
std::optional<int> startTimeoutFromEnvironment(const CLI::App& app, Options* options) {
  const char* const kName = "HOROVOD_START_TIMEOUT";
  options->startTimeoutGiven = app.count("--start-timeout") > 0;
  const char* value = std::getenv(kName);
  if (options->startTimeoutGiven || value == nullptr || *value == '\0') return std::nullopt;
  if (const std::string problem = agent::common::finiteRangeProblem(value, 0.001, 86400, "seconds");
      !problem.empty()) {
    std::fprintf(stderr, "hvdrun: %s (the default of --start-timeout): %s\n", kName,
                 problem.c_str());
    return 2;
  }
  options->startTimeoutSeconds = std::strtod(value, nullptr);
  options->startTimeoutGiven = true;
  return std::nullopt;
}

// --config-file's keys (horovodrun_flags.h), as the flags they stand for, with the file's
// warnings added to `warnings`. nullopt to go on; else 2 after saying why.
std::optional<int> readConfigFileFlags(CLI::App& app, HorovodrunFlags* flags,
                                       std::vector<std::string>* warnings) {
  try {
    *warnings = applyConfigFile(app, flags);
  } catch (const InvalidArgumentError& e) {
    std::fprintf(stderr, "hvdrun: %s\n", e.what());
    return 2;
  }
  return std::nullopt;
}

// What a job to run needs beyond what CLI11 checked: -np (unless a Slurm allocation gives it),
// a PROGRAM, a known stop signal and --gpu-bind. nullopt to go on; else 2 after saying why.
std::optional<int> checkRunOptions(const Options& options) {
  // In a Slurm allocation -np defaults to its slots (hvdrun_main.cc), and --print-hosts runs
  // nothing.
  const contract::EnvReader environment = [](const char* name) -> const char* {
    return std::getenv(name);
  };
  // A discovery script's hosts are not known before the job, so they give no -np (horovodrun
  // requires -np in elastic mode too).
  if (options.np == 0 && (!options.discoveryScript.empty() ||
                          (!usesSlurmAllocation(options, environment) && !options.printHosts))) {
    std::fprintf(
        stderr, "hvdrun: -np N is required (%s; see hvdrun --help)\n",
        options.elastic ? "in elastic mode: the slots the job starts with" : "the number of ranks");
    return 2;
  }
  if (options.np > 0) {
    try {
      elasticSpec(options);
    } catch (const InvalidArgumentError& e) {
      std::fprintf(stderr, "hvdrun: %s\n", e.what());
      return 2;
    }
  }
  if (options.printHosts) return std::nullopt;
  if (options.command.empty()) {
    std::fprintf(stderr, "hvdrun: no PROGRAM to run (see hvdrun --help)\n");
    return 2;
  }
  if (!parseSignal(options.stopSignal)) {
    std::fprintf(stderr, "hvdrun: --stop-signal: unknown signal '%s'\n",
                 options.stopSignal.c_str());
    return 2;
  }
  if (!parseGpuBind(options.gpuBind)) {
    std::fprintf(stderr, "hvdrun: --gpu-bind: unknown value '%s' (expected none or visible)\n",
                 options.gpuBind.c_str());
    return 2;
  }
  return std::nullopt;
}

std::optional<int> parseRunCommandLine(int argc, char** argv, Options* options) {
  CLI::App app(kDescription, "hvdrun");
  agent::common::prefixErrorsWithName(&app);
  RunText text;
  EngineKnobs knobs;
  HorovodrunFlags horovodrun;
  // In the order --help lists them.
  addPlacementOptions(&app, options);
  addStopAndOutputOptions(&app, options, &text);
  addGpuOptions(&app, options);
  addGpuEngineOptions(&app, &knobs);
  addRunAgentOptions(&app, options);
  addEngineOptions(&app, &knobs);
  addJobControlOptions(&app, options, &text);
  addOtherOptions(&app, options, &text);
  addElasticOptions(&app, options, &text);
  addHorovodrunFlags(&app, options, &horovodrun);
  if (std::optional<int> code = parseRunArguments(app, argc, argv, options)) return code;
  // The config file's keys before anything reads an option they may set.
  std::vector<std::string> warnings;
  if (std::optional<int> code = readConfigFileFlags(app, &horovodrun, &warnings)) return code;
  if (std::optional<int> code = startTimeoutFromEnvironment(app, options)) return code;
  if (std::optional<int> code = convertJobControl(app, text, options)) return code;
  std::string problem;
  if (!engineSettings(app, knobs, &options->engineSettings, &problem)) {
    std::fprintf(stderr, "hvdrun: %s\n", problem.c_str());
    return 2;
  }
  for (std::string& w : horovodrunSettings(app, horovodrun, &options->engineSettings)) {
    warnings.push_back(std::move(w));
  }
  for (const std::string& w : warnings) std::fprintf(stderr, "hvdrun: warning: %s\n", w.c_str());
  // By count, not by value: `--log-level ''` is an error, not "the default".
  if (app.count("--log-level") > 0) {
    const std::optional<std::string> level = parseLogLevel(text.logLevel);
    if (!level) {
      std::fprintf(stderr,
                   "hvdrun: --log-level '%s': expected TRACE, DEBUG, INFO, WARNING, ERROR, FATAL, "
                   "or trace, debug, info, warn, error, off\n",
                   text.logLevel.c_str());
      return 2;
    }
    options->logLevel = *level;
    options->engineSettings.push_back(std::string(contract::worker::kLogLevel.name) + "=" + *level);
  }
  setAgentDefaults(app, options);
  if (text.version || text.checkBuild) {
    options->action = text.version ? Action::kVersion : Action::kCheckBuild;
    return std::nullopt;
  }
  if (std::optional<int> code = convertElastic(app, text, options)) return code;
  return checkRunOptions(*options);
}

}  // namespace

std::optional<int> parseCommandLine(int argc, char** argv, Options* options) {
  const std::string first = argc > 1 ? argv[1] : "";
  if (first == "keygen") return parseKeygen(argc, argv, options);
  if (first == "doctor") return parseDoctor(argc, argv, options);
  if (first == "ps" || first == "status" || first == "logs" || first == "attach" ||
      first == "cancel") {
    return parseJobCommand(argc, argv, options);
  }
  if (first == "run" || first == "submit") {
    std::vector<char*> rest = {argv[0]};
    rest.insert(rest.end(), argv + 2, argv + argc);
    std::optional<int> code =
        parseRunCommandLine(static_cast<int>(rest.size()), rest.data(), options);
    if (!code && first == "submit" && options->action == Action::kRun) {
      options->action = Action::kSubmit;
    }
    return code;
  }
  return parseRunCommandLine(argc, argv, options);
}

}  // namespace hvd::launcher
