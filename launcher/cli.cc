#include "launcher/cli.h"

#include <strings.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <system_error>
#include <utility>

#include "agent/common/cli_checks.h"
#include "agent/relay/tree_shape.h"
#include "agent/rpc/defaults.h"
#include "agent/rpc/net.h"
#include "contract/names.h"
#include "contract/slurm_hosts.h"
#include "hvd/error.hpp"

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

constexpr char kKeygenDescription[] =
    "Usage: hvdrun keygen [--key-file F]\n"
    "\n"
    "Creates a new cluster key: 32 random bytes in F (mode 0600; its directory is created\n"
    "with mode 0700 if missing). Never overwrites an existing file. Prints the path and the\n"
    "key's fingerprint, never the key. Copy the file to every host (same path, mode 0600,\n"
    "owned by the user running hvdagent) and restart the agents.";

struct SignalName {
  const char* name;
  int number;
};
constexpr SignalName kSignals[] = {
    {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"KILL", SIGKILL},
    {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"ALRM", SIGALRM},
};

// What is wrong with a -x entry (NAME or NAME=VALUE), or "": a NAME that is not an environment
// variable's name reaches the ranks as an entry that shells drop and programs cannot look up, a
// typo that would otherwise surface as a setting silently not taken.
std::string exportProblem(const std::string& entry) {
  const std::string name = entry.substr(0, entry.find('='));
  if (name.empty()) return "expected NAME[=VALUE]";
  if (!contract::isEnvName(name)) {
    return inQuotes(name) +
           " is not an environment variable name (expected NAME[=VALUE], NAME of letters, digits "
           "and '_', not starting with a digit)";
  }
  return {};
}

CLI::Validator exportCheck() {
  return CLI::Validator(
      [](std::string& entry) -> std::string {
        const std::string problem = exportProblem(entry);
        return problem.empty() ? problem : inQuotes(entry) + ": " + problem;
      },
      "NAME[=VALUE]");
}

// mpirun and horovodrun spell the rank count "-np"; CLI11 allows one character after a single
// dash. Options before PROGRAM are split from PROGRAM's own argv here (the first word that is
// neither an option nor an option's value, or everything after "--"), and "-np" becomes "--np".
void splitArguments(int argc, char** argv, std::vector<std::string>* ours,
                    std::vector<std::string>* command) {
  static const char* const kTakesValue[] = {"-n",
                                            "--np",
                                            "--num-proc",
                                            "-H",
                                            "--hosts",
                                            "--hostfile",
                                            "-x",
                                            "--stop-signal",
                                            "--grace",
                                            "--output-filename",
                                            "--gpu-bind",
                                            "--gpus-per-rank",
                                            "--gpu-backend",
                                            "--agent-port",
                                            "--start-timeout",
                                            "--key-file",
                                            "--tls-cert",
                                            "--tls-key",
                                            "--tls-ca",
                                            "--fusion-threshold-mb",
                                            "--cycle-time-ms",
                                            "--cache-capacity",
                                            "--timeline-filename",
                                            "--stall-check-warning-time-seconds",
                                            "--stall-check-shutdown-time-seconds",
                                            "--time-limit",
                                            "--max-restarts",
                                            "--restart-min-uptime",
                                            "--no-restart-on-exit",
                                            "--tree-width"};
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
    if (arg == "-np") arg = "--np";
    ours->push_back(arg);
    for (const char* name : kTakesValue) {
      if (arg == name && i + 1 < argc) ours->push_back(argv[++i]);
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

// `hvdrun ps|status|logs|attach|cancel ...`: argv[1] is the command.
std::optional<int> parseJobCommand(int argc, char** argv, Options* options) {
  const std::string command = argv[1];
  CLI::App app(kJobsDescription, "hvdrun " + command);
  agent::common::prefixErrorsWithName(&app);
  addAgentOptions(&app, options);
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
  options->agentPortGiven = app.count("--agent-port") > 0;
  if (!options->agentPortGiven) options->agentPort = agent::rpc::kDefaultAgentPort;
  if (app.count("--key-file") == 0) options->keyFile = agent::rpc::defaultKeyFile();
  options->action = command == "ps"       ? Action::kPs
                    : command == "status" ? Action::kStatus
                    : command == "logs"   ? Action::kLogs
                    : command == "attach" ? Action::kAttach
                                          : Action::kCancel;
  return std::nullopt;
}

std::optional<int> parseRunCommandLine(int argc, char** argv, Options* options);

}  // namespace

std::optional<int> parseCommandLine(int argc, char** argv, Options* options) {
  const std::string first = argc > 1 ? argv[1] : "";
  if (first == "keygen") return parseKeygen(argc, argv, options);
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

namespace {

std::optional<int> parseRunCommandLine(int argc, char** argv, Options* options) {
  CLI::App app(kDescription, "hvdrun");
  agent::common::prefixErrorsWithName(&app);
  // -np is checked below rather than by CLI11, so that --version and --check-build need none.
  app.add_option("-n,--np,--num-proc", options->np, "number of ranks to run (exact); also -np")
      ->check(integerRange(1, 1 << 20));
  app.add_option("-H,--hosts", options->hostList,
                 "hosts as host[:slots],... (IPv6 as [addr]:slots); a host without slots gets "
                 "its GPU count, or 1; default: localhost:N")
      ->check(nonEmpty());
  app.add_option("--hostfile", options->hostfile,
                 "file with one 'host slots=N' (or host:N) per line, # comments")
      ->check(nonEmpty());
  app.add_flag("--oversubscribe", options->oversubscribe, "allow more ranks than a host's slots");
  app.add_option("-x", options->exports,
                 "NAME=VALUE sets NAME for every rank; NAME forwards the caller's value "
                 "(embedded jobs forward the whole environment already; remote ranks get only "
                 "what -x names); repeatable")
      ->allow_extra_args(false)
      ->check(exportCheck());
  app.add_option("--stop-signal", options->stopSignal, "signal of a graceful stop (name or number)")
      ->capture_default_str();
  app.add_option("--grace", options->graceSeconds, "seconds between the stop signal and SIGKILL")
      ->check(finiteRange(0, 86400, "seconds"))
      ->capture_default_str();
  app.add_option("--output-filename", options->outputDir,
                 "also write each rank's output to DIR/rank.<r>/stdout and stderr")
      ->check(nonEmpty());
  app.add_flag("--tag-output,!--no-tag-output", options->tagOutput,
               "prefix each line with [rank]<stdout>: or [rank]<stderr>: (default on)");
  app.add_flag("--timestamp-output", options->timestampOutput,
               "prefix each line with the local time it arrived (YYYY-MM-DDTHH:MM:SS.mmm)");
  app.add_option("--gpu-bind", options->gpuBind,
                 "none: each rank gets HVD_GPU only; visible: also CUDA_VISIBLE_DEVICES=<that GPU>")
      ->capture_default_str();
  app.add_option("--gpus-per-rank", options->gpusPerRank,
                 "GPUs each rank gets (consecutive, in local-rank order); a host's default slots "
                 "are then its GPUs / this")
      ->check(integerRange(1, 1024))
      ->capture_default_str();
  std::string gpuBackend;
  app.add_option("--gpu-backend", gpuBackend,
                 "device buffers: auto (NCCL if it loads, else staged through host memory), nccl "
                 "or host -> HVD_GPU_BACKEND")
      ->check(CLI::IsMember({"auto", "nccl", "host"}));
  bool hierarchical = false;
  app.add_flag("--hierarchical-allreduce", hierarchical,
               "GPU allreduce as reduce-scatter in each node, allreduce across nodes, allgather "
               "in each node -> HVD_HIERARCHICAL_ALLREDUCE=1");
  app.add_option("--start-timeout", options->startTimeoutSeconds,
                 "seconds the agents may take to answer and accept the job; when given, also "
                 "the ranks' rendezvous timeout (HVD_START_TIMEOUT) unless -x sets it")
      ->check(finiteRange(0.001, 86400, "seconds"))
      ->capture_default_str();
  app.add_option("--agent-port", options->agentPort,
                 "port of hvdagent on every host (default " +
                     std::to_string(agent::rpc::kDefaultAgentPort) +
                     "); given, even a local job goes through the agent")
      ->check(integerRange(1, 65535));
  app.add_option("--key-file", options->keyFile,
                 "cluster key that signs the agent calls (default: $HVD_KEY_FILE, else "
                 "~/.hvd/cluster.key)")
      ->check(nonEmpty());
  app.add_option("--tls-cert", options->tlsCert, "client certificate (PEM) for mutual TLS")
      ->check(nonEmpty());
  app.add_option("--tls-key", options->tlsKey, "its private key (PEM)")->check(nonEmpty());
  app.add_option("--tls-ca", options->tlsCa, "CA (PEM) that signed the agents' certificates")
      ->check(nonEmpty());
  app.add_flag("--verbose", options->verbose, "debug logs on stderr");
  // Engine knobs: each becomes an environment variable of every rank (HVD_*; the runtime also
  // reads the HOROVOD_* names). Kept as text and checked here, converted after parsing.
  double fusionMb = 0, cycleMs = 0, stallWarn = 0, stallShutdown = 0;
  long long cacheCapacity = 0;
  std::string timeline;
  bool markCycles = false;
  app.add_option("--fusion-threshold-mb", fusionMb,
                 "engine: fuse ready allreduces into buffers of up to this many MiB (default "
                 "128; 0 disables fusion) -> HVD_FUSION_THRESHOLD")
      ->check(finiteRange(0, 1048576, "MiB"));
  app.add_option("--cycle-time-ms", cycleMs,
                 "engine: milliseconds between negotiation cycles (default 1) -> HVD_CYCLE_TIME")
      ->check(finiteRange(0, 60000, "milliseconds"));
  app.add_option("--cache-capacity", cacheCapacity,
                 "engine: response cache entries (default 1024; 0 disables) -> "
                 "HVD_CACHE_CAPACITY")
      ->check(integerRange(0, 1LL << 30));
  app.add_option("--timeline-filename", timeline,
                 "engine: write a Chrome-trace timeline (Perfetto, chrome://tracing) of rank 0 "
                 "to this file; DYNAMIC: none until the program calls start_timeline() -> "
                 "HVD_TIMELINE")
      ->check(nonEmpty());
  app.add_flag("--timeline-mark-cycles", markCycles,
               "engine: mark each negotiation cycle that ran ops in the timeline -> "
               "HVD_TIMELINE_MARK_CYCLES=1");
  app.add_option("--stall-check-warning-time-seconds", stallWarn,
                 "engine: warn about ops some ranks submitted and others did not after this "
                 "long (default 60; 0 disables) -> HVD_STALL_CHECK_TIME")
      ->check(finiteRange(0, 1e7, "seconds"));
  app.add_option("--stall-check-shutdown-time-seconds", stallShutdown,
                 "engine: fail the job after a stall this long (default 300; 0 never) -> "
                 "HVD_STALL_SHUTDOWN_TIME")
      ->check(finiteRange(0, 1e7, "seconds"));
  std::string timeLimit;
  app.add_option("--time-limit", timeLimit,
                 "stop the job gracefully once it has run this long; it ends in TIMEOUT (exit "
                 "124). Seconds, or 90s, 15m, 2h, 1d, MM:SS, HH:MM:SS, D-HH:MM:SS");
  // Restarts and the queue: parsed and checked here, carried out by the job's leader agent, which
  // keeps the one restart budget (docs/architecture.md "Resources, queue and restarts").
  app.add_option("--max-restarts", options->maxRestarts,
                 "when a rank fails, stop every rank and start the job again, up to N times for "
                 "the whole job (default 0)")
      ->check(integerRange(0, std::numeric_limits<int>::max()));
  std::string minUptime;
  app.add_option("--restart-min-uptime", minUptime,
                 "an attempt that fails sooner than T ends the job (a start-up failure) instead "
                 "of restarting; T as for --time-limit (default 0: none)");
  std::string noRestartCodes;
  app.add_option("--no-restart-on-exit", noRestartCodes,
                 "a rank exiting with one of these codes (comma-separated, 0-255, e.g. 2,3) ends "
                 "the job at once, without restart");
  app.add_option("--tree-width", options->treeWidth,
                 "the leader agent calls at most this many hosts itself; beyond, agents relay "
                 "the job's calls as a tree of this width (default " +
                     std::to_string(agent::relay::kDefaultTreeWidth) + ")")
      ->check(integerRange(1, 1000000));
  app.add_flag("--no-queue", options->noQueue,
               "fail at once (exit 75) instead of waiting in the agent's queue when the GPUs or "
               "slots are busy");
  app.add_flag("--print-hosts", options->printHosts,
               "print the hosts the job would use, as a -H list (in a Slurm allocation: derived "
               "from it), and exit");
  app.add_flag("--allow-run-as-root", options->allowRunAsRoot,
               "in a Slurm allocation: let the agents hvdrun starts run the ranks as root (they "
               "also need HVD_ALLOW_RUN_AS_ROOT_CONFIRM=1 in the environment)");
  bool version = false;
  bool checkBuild = false;
  app.add_flag("--version", version, "print hvdrun's version and exit");
  app.add_flag("--check-build", checkBuild,
               "print what this build has (transports, NCCL, MPI, TLS) and exit");

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
  options->startTimeoutGiven = app.count("--start-timeout") > 0;
  // By count, not by value: `--time-limit ''` is an error, not "no limit".
  if (app.count("--time-limit") > 0) {
    const std::optional<double> seconds = parseDuration(timeLimit);
    if (!seconds) {
      std::fprintf(stderr,
                   "hvdrun: --time-limit '%s': expected seconds, a number with s, m, h or d, or "
                   "[D-]HH:MM:SS\n",
                   timeLimit.c_str());
      return 2;
    }
    options->timeLimitSeconds = *seconds;
  }
  if (app.count("--restart-min-uptime") > 0) {
    const std::optional<double> seconds = parseDurationOrZero(minUptime);
    if (!seconds) {
      std::fprintf(stderr,
                   "hvdrun: --restart-min-uptime '%s': expected 0, seconds, a number with s, m, h "
                   "or d, or [D-]HH:MM:SS\n",
                   minUptime.c_str());
      return 2;
    }
    options->restartMinUptimeSeconds = *seconds;
  }
  if (app.count("--no-restart-on-exit") > 0) {
    std::string problem;
    std::optional<std::vector<int>> codes = parseExitCodeList(noRestartCodes, &problem);
    if (!codes) {
      std::fprintf(stderr, "hvdrun: --no-restart-on-exit '%s': %s\n", noRestartCodes.c_str(),
                   problem.c_str());
      return 2;
    }
    options->noRestartOnExit = std::move(*codes);
  }
  const auto number = [](double v) {
    char text[64];
    std::snprintf(text, sizeof(text), "%.17g", v);
    return std::string(text);
  };
  if (!gpuBackend.empty()) options->engineSettings.push_back("HVD_GPU_BACKEND=" + gpuBackend);
  if (hierarchical) options->engineSettings.push_back("HVD_HIERARCHICAL_ALLREDUCE=1");
  if (app.count("--fusion-threshold-mb") > 0) {
    options->engineSettings.push_back("HVD_FUSION_THRESHOLD=" +
                                      std::to_string(static_cast<long long>(fusionMb * 1048576.0)));
  }
  if (app.count("--cycle-time-ms") > 0) {
    options->engineSettings.push_back("HVD_CYCLE_TIME=" + number(cycleMs));
  }
  if (app.count("--cache-capacity") > 0) {
    options->engineSettings.push_back("HVD_CACHE_CAPACITY=" + std::to_string(cacheCapacity));
  }
  if (app.count("--timeline-filename") > 0) {
    // Relative to where hvdrun runs, whatever the ranks' working directory; DYNAMIC is the
    // engine's keyword (no file until start_timeline()), not a file name.
    std::string path = timeline;
    if (timeline != "DYNAMIC") {
      std::error_code error;  // e.g. hvdrun's working directory was removed
      const std::filesystem::path absolute = std::filesystem::absolute(timeline, error);
      if (error) {
        std::fprintf(stderr, "hvdrun: --timeline-filename '%s': %s\n", timeline.c_str(),
                     error.message().c_str());
        return 2;
      }
      path = absolute.lexically_normal().string();
    }
    options->engineSettings.push_back("HVD_TIMELINE=" + path);
  }
  if (markCycles) options->engineSettings.push_back("HVD_TIMELINE_MARK_CYCLES=1");
  if (app.count("--stall-check-warning-time-seconds") > 0) {
    options->engineSettings.push_back("HVD_STALL_CHECK_TIME=" + number(stallWarn));
  }
  if (app.count("--stall-check-shutdown-time-seconds") > 0) {
    options->engineSettings.push_back("HVD_STALL_SHUTDOWN_TIME=" + number(stallShutdown));
  }
  options->agentPortGiven = app.count("--agent-port") > 0;
  if (!options->agentPortGiven) options->agentPort = agent::rpc::kDefaultAgentPort;
  if (app.count("--key-file") == 0) options->keyFile = agent::rpc::defaultKeyFile();
  if (version || checkBuild) {
    options->action = version ? Action::kVersion : Action::kCheckBuild;
    return std::nullopt;
  }
  // In a Slurm allocation -np defaults to its slots (hvdrun_main.cc), and --print-hosts runs
  // nothing.
  const contract::EnvReader environment = [](const char* name) -> const char* {
    return std::getenv(name);
  };
  if (options->np == 0 && !usesSlurmAllocation(*options, environment) && !options->printHosts) {
    std::fprintf(stderr, "hvdrun: -np N is required (the number of ranks; see hvdrun --help)\n");
    return 2;
  }
  if (options->printHosts) return std::nullopt;
  if (options->command.empty()) {
    std::fprintf(stderr, "hvdrun: no PROGRAM to run (see hvdrun --help)\n");
    return 2;
  }
  if (!parseSignal(options->stopSignal)) {
    std::fprintf(stderr, "hvdrun: --stop-signal: unknown signal '%s'\n",
                 options->stopSignal.c_str());
    return 2;
  }
  if (!parseGpuBind(options->gpuBind)) {
    std::fprintf(stderr, "hvdrun: --gpu-bind: unknown value '%s' (expected none or visible)\n",
                 options->gpuBind.c_str());
    return 2;
  }
  return std::nullopt;
}

}  // namespace

namespace {

// parseDuration's forms; a zero duration is accepted only with `allowZero`.
std::optional<double> parseDurationText(const std::string& text, bool allowZero) {
  if (text.empty()) return std::nullopt;
  const auto number = [](const std::string& t, double* out) {
    if (t.empty() || t.find_first_not_of("0123456789.") != std::string::npos) return false;
    char* end = nullptr;
    *out = std::strtod(t.c_str(), &end);
    return end == t.c_str() + t.size();
  };
  double value = 0;
  if (text.find(':') == std::string::npos) {
    double unit = 1;
    std::string digits = text;
    switch (text.back()) {
      case 's':
        digits.pop_back();
        break;
      case 'm':
        unit = 60, digits.pop_back();
        break;
      case 'h':
        unit = 3600, digits.pop_back();
        break;
      case 'd':
        unit = 86400, digits.pop_back();
        break;
      default:
        break;
    }
    if (!number(digits, &value)) return std::nullopt;
    value *= unit;
    // Hundreds of digits overflow to infinity: not a duration anyone means.
    if (!std::isfinite(value) || value < 0 || (value == 0 && !allowZero)) return std::nullopt;
    return value;
  }
  // [D-]HH:MM:SS or MM:SS
  std::string rest = text;
  double days = 0;
  if (const size_t dash = rest.find('-'); dash != std::string::npos) {
    if (!number(rest.substr(0, dash), &days)) return std::nullopt;
    rest = rest.substr(dash + 1);
  }
  std::vector<double> parts;
  size_t start = 0;
  for (;;) {
    const size_t colon = rest.find(':', start);
    double part = 0;
    if (!number(rest.substr(start, colon - start), &part)) return std::nullopt;
    parts.push_back(part);
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  if (parts.size() > 3 || (parts.size() < 3 && days > 0)) return std::nullopt;
  for (double p : parts) value = value * 60 + p;
  value += days * 86400;
  if (!std::isfinite(value) || value < 0 || (value == 0 && !allowZero)) return std::nullopt;
  return value;
}

}  // namespace

std::optional<double> parseDuration(const std::string& text) {
  return parseDurationText(text, /*allowZero=*/false);
}

std::optional<double> parseDurationOrZero(const std::string& text) {
  return parseDurationText(text, /*allowZero=*/true);
}

std::optional<std::vector<int>> parseExitCodeList(const std::string& text, std::string* problem) {
  const auto refuse = [problem](const std::string& why) -> std::optional<std::vector<int>> {
    if (problem != nullptr) {
      *problem = why + " (expected exit codes 0 to 255, separated by commas, e.g. 2,3)";
    }
    return std::nullopt;
  };
  std::vector<int> codes;
  size_t start = 0;
  for (int position = 1;; ++position) {
    const size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? comma : comma - start);
    const size_t first = item.find_first_not_of(" \t");
    item = first == std::string::npos
               ? ""
               : item.substr(first, item.find_last_not_of(" \t") - first + 1);
    if (item.empty()) {
      return refuse(text.find_first_not_of(" \t,") == std::string::npos
                        ? std::string("no exit code given")
                        : "an empty entry at position " + std::to_string(position));
    }
    if (item.size() > 3 || item.find_first_not_of("0123456789") != std::string::npos ||
        std::atoi(item.c_str()) > 255) {
      return refuse(inQuotes(item) + " is not an exit code");
    }
    const int code = std::atoi(item.c_str());
    if (std::find(codes.begin(), codes.end(), code) == codes.end()) codes.push_back(code);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return codes;
}

std::optional<std::pair<int, int>> parseRankRange(const std::string& text) {
  const auto rank = [](const std::string& t) -> std::optional<int> {
    if (t.empty() || t.size() > 7 || t.find_first_not_of("0123456789") != std::string::npos) {
      return std::nullopt;
    }
    return std::atoi(t.c_str());
  };
  const size_t dash = text.find('-');
  if (dash == std::string::npos) {
    const std::optional<int> r = rank(text);
    if (!r) return std::nullopt;
    return std::make_pair(*r, *r);
  }
  const std::optional<int> first = rank(text.substr(0, dash));
  const std::optional<int> last = rank(text.substr(dash + 1));
  if (!first || !last || *last < *first) return std::nullopt;
  return std::make_pair(*first, *last);
}

std::optional<agent::node::GpuBind> parseGpuBind(const std::string& name) {
  if (name == "none") return agent::node::GpuBind::kNone;
  if (name == "visible") return agent::node::GpuBind::kVisible;
  return std::nullopt;
}

std::optional<int> parseSignal(const std::string& name) {
  if (name.empty()) return std::nullopt;
  if (std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    if (name.size() > 2) return std::nullopt;
    int n = std::atoi(name.c_str());
    return n >= 1 && n < NSIG ? std::optional<int>(n) : std::nullopt;
  }
  std::string bare = name;
  if (bare.size() > 3 && strncasecmp(bare.c_str(), "SIG", 3) == 0) bare = bare.substr(3);
  for (const SignalName& s : kSignals) {
    if (strcasecmp(bare.c_str(), s.name) == 0) return s.number;
  }
  return std::nullopt;
}

bool isLocalHost(const std::string& host, const std::string& ownHostname) {
  return agent::rpc::isLoopbackName(host) || (!ownHostname.empty() && host == ownHostname);
}

std::vector<contract::HostSlots> resolveHosts(const Options& options) {
  if (!options.hostList.empty() && !options.hostfile.empty()) {
    throw InvalidArgumentError("give either -H or --hostfile, not both");
  }
  if (!options.hostList.empty()) return contract::parseHostList(options.hostList);
  if (!options.hostfile.empty()) return contract::parseHostfile(options.hostfile);
  return {contract::HostSlots{"localhost", options.np}};
}

bool usesSlurmAllocation(const Options& options, contract::EnvReader getenv) {
  const char* job = getenv("SLURM_JOB_ID");
  return job != nullptr && *job != '\0' && options.hostList.empty() && options.hostfile.empty();
}

std::optional<std::vector<contract::HostSlots>> slurmHosts(const Options& options,
                                                           contract::EnvReader getenv) {
  if (!usesSlurmAllocation(options, getenv)) return std::nullopt;
  return contract::slurmAllocationHosts(getenv);
}

std::string formatHostList(const std::vector<contract::HostSlots>& hosts) {
  std::string out;
  for (const contract::HostSlots& h : hosts) {
    if (!out.empty()) out += ',';
    out += h.host.find(':') != std::string::npos ? "[" + h.host + "]" : h.host;
    if (h.slots) out += ":" + std::to_string(*h.slots);
  }
  return out;
}

namespace {

// The sum of the hosts' slots; nullopt with *unknown naming the first host without a count.
std::optional<long long> knownSlots(const std::vector<contract::HostSlots>& hosts,
                                    std::string* unknown) {
  long long total = 0;
  for (const contract::HostSlots& h : hosts) {
    if (!h.slots) {
      *unknown = h.host;
      return std::nullopt;
    }
    total += *h.slots;
  }
  return total;
}

}  // namespace

int slotsTotal(const std::vector<contract::HostSlots>& hosts) {
  std::string unknown;
  const std::optional<long long> known = knownSlots(hosts, &unknown);
  if (!known) {
    throw InvalidArgumentError("-np is needed: the slots of '" + unknown +
                               "' are not known from SLURM_TASKS_PER_NODE");
  }
  const long long total = *known;
  if (total < 1 || total > (1 << 20)) {
    throw InvalidArgumentError("-np is needed: the allocation's " + std::to_string(total) +
                               " slots are not a rank count");
  }
  return static_cast<int>(total);
}

void checkAllocationFits(const Options& options, const std::vector<contract::HostSlots>& hosts) {
  std::string unknown;
  const std::optional<long long> known = knownSlots(hosts, &unknown);
  // A node without a count gets its GPUs, which only its agent knows: the coordinator checks.
  if (options.oversubscribe || !known || options.np <= *known) return;
  const long long total = *known;
  throw InvalidArgumentError(
      "-np " + std::to_string(options.np) + " exceeds the " + std::to_string(total) +
      " tasks of this Slurm allocation (" + formatHostList(hosts) +
      ", from SLURM_TASKS_PER_NODE): ask salloc/sbatch for them (-n " + std::to_string(options.np) +
      ", --ntasks-per-node, or --exclusive nodes), or pass "
      "--oversubscribe");
}

std::vector<std::string> forwardedEnvironment(const std::vector<std::string>& callerEnv,
                                              const std::vector<std::string>& exports) {
  std::vector<std::string> env = callerEnv;
  auto nameOf = [](const std::string& entry) { return entry.substr(0, entry.find('=')); };
  auto set = [&](const std::string& entry) {
    const std::string name = nameOf(entry);
    for (std::string& e : env) {
      if (nameOf(e) == name) {
        e = entry;
        return;
      }
    }
    env.push_back(entry);
  };
  for (const std::string& x : exports) {
    const size_t eq = x.find('=');
    if (const std::string problem = exportProblem(x); !problem.empty()) {
      throw InvalidArgumentError("-x " + inQuotes(x) + ": " + problem);
    }
    if (eq != std::string::npos) {
      set(x);
      continue;
    }
    const char* value = std::getenv(x.c_str());
    if (value == nullptr) {
      throw InvalidArgumentError("-x " + x + ": " + x + " is not set in hvdrun's environment");
    }
    set(x + "=" + value);
  }
  return env;
}

std::vector<std::string> exportedEnvironment(const std::vector<std::string>& exports) {
  return forwardedEnvironment({}, exports);
}

namespace {

// Sets NAME=value in `env` unless a -x names NAME (an explicit -x wins).
void setUnlessExported(const Options& options, const std::string& name, const std::string& value,
                       std::vector<std::string>* env) {
  const std::string prefix = name + "=";
  for (const std::string& x : options.exports) {
    if (x == name || x.rfind(prefix, 0) == 0) return;
  }
  for (std::string& e : *env) {
    if (e.rfind(prefix, 0) == 0) {
      e = prefix + value;
      return;
    }
  }
  env->push_back(prefix + value);
}

}  // namespace

void addStartTimeout(const Options& options, std::vector<std::string>* env) {
  if (!options.startTimeoutGiven) return;
  char value[64];
  std::snprintf(value, sizeof(value), "%g", options.startTimeoutSeconds);
  setUnlessExported(options, "HVD_START_TIMEOUT", value, env);
}

void addEngineSettings(const Options& options, std::vector<std::string>* env) {
  for (const std::string& setting : options.engineSettings) {
    const size_t eq = setting.find('=');
    setUnlessExported(options, setting.substr(0, eq), setting.substr(eq + 1), env);
  }
}

bool usesAgents(const Options& options, const std::vector<contract::HostSlots>& hosts,
                const std::string& ownHostname) {
  if (options.agentPortGiven) return true;
  for (const contract::HostSlots& h : hosts) {
    if (!isLocalHost(h.host, ownHostname)) return true;
  }
  return false;
}

std::string agentAddress(const std::string& host, int port) {
  return agent::rpc::joinHostPort(host == "localhost" ? "127.0.0.1" : host, port);
}

}  // namespace hvd::launcher
