#include "launcher/cli.h"

#include <strings.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "hvd/error.hpp"

namespace hvd::launcher {

namespace {

constexpr char kDescription[] =
    "Usage: hvdrun -np N [options] [--] PROGRAM [ARGS...]\n"
    "\n"
    "Runs PROGRAM as N ranks of one hvd job and waits for it.\n"
    "\n"
    "Without -H (or when every host is this machine: localhost, 127.0.0.1, ::1 or its\n"
    "hostname) the job runs embedded: hvdrun starts the ranks itself, with a job store on\n"
    "127.0.0.1 and a fresh random token, and needs no daemon and no key file. Remote hosts\n"
    "need hvdagent, which this build does not have yet.\n"
    "\n"
    "Every rank gets the caller's whole environment plus the hvd variables (HVD_RANK,\n"
    "HVD_SIZE, ..., RANK/WORLD_SIZE/..., HOROVOD_*). Output lines are prefixed\n"
    "'[rank]<stdout>: ' / '[rank]<stderr>: ' and go to hvdrun's stdout / stderr.\n"
    "\n"
    "Exit status: 0 when every rank exited 0; else the first failing rank's exit code\n"
    "(128+signal when a signal killed it), with one line naming it and its last stderr\n"
    "lines; 2 for usage errors; 69 agent unreachable; 71 launch failed (e.g. PROGRAM not\n"
    "found); 75 agent lost; 130 cancelled. Ctrl-C (or SIGTERM) stops the job gracefully;\n"
    "a second one within 2 s kills it.";

struct SignalName {
  const char* name;
  int number;
};
constexpr SignalName kSignals[] = {
    {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"KILL", SIGKILL},
    {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"ALRM", SIGALRM},
};

// mpirun and horovodrun spell the rank count "-np"; CLI11 allows one character after a single
// dash. Options before PROGRAM are split from PROGRAM's own argv here (the first word that is
// neither an option nor an option's value, or everything after "--"), and "-np" becomes "--np".
void splitArguments(int argc, char** argv, std::vector<std::string>* ours,
                    std::vector<std::string>* command) {
  static const char* const kTakesValue[] = {
      "-n",         "--np", "--num-proc",    "-H",      "--hosts",
      "--hostfile", "-x",   "--stop-signal", "--grace", "--output-filename"};
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

}  // namespace

std::optional<int> parseCommandLine(int argc, char** argv, Options* options) {
  CLI::App app(kDescription, "hvdrun");
  app.add_option("-n,--np,--num-proc", options->np, "number of ranks to run (exact); also -np")
      ->required()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("-H,--hosts", options->hostList,
                 "hosts as host[:slots],... (only this machine in this build); default: "
                 "localhost:N");
  app.add_option("--hostfile", options->hostfile,
                 "file with one 'host slots=N' (or host:N) per line, # comments");
  app.add_flag("--oversubscribe", options->oversubscribe, "allow more ranks than a host's slots");
  app.add_option("-x", options->exports,
                 "NAME=VALUE sets NAME for every rank; NAME forwards the caller's value (the "
                 "whole environment is forwarded already); repeatable")
      ->allow_extra_args(false);
  app.add_option("--stop-signal", options->stopSignal, "signal of a graceful stop (name or number)")
      ->capture_default_str();
  app.add_option("--grace", options->graceSeconds, "seconds between the stop signal and SIGKILL")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  app.add_option("--output-filename", options->outputDir,
                 "also write each rank's output to DIR/rank.<r>/stdout and stderr");
  app.add_flag("--tag-output,!--no-tag-output", options->tagOutput,
               "prefix each line with [rank]<stdout>: or [rank]<stderr>: (default on)");

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
  if (options->command.empty()) {
    std::fprintf(stderr, "hvdrun: no PROGRAM to run (see hvdrun --help)\n");
    return 2;
  }
  if (!parseSignal(options->stopSignal)) {
    std::fprintf(stderr, "hvdrun: --stop-signal: unknown signal '%s'\n",
                 options->stopSignal.c_str());
    return 2;
  }
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
  return host == "localhost" || host == "127.0.0.1" || host == "::1" ||
         (!ownHostname.empty() && host == ownHostname);
}

std::vector<HostSlots> resolveHosts(const Options& options) {
  if (!options.hostList.empty() && !options.hostfile.empty()) {
    throw InvalidArgumentError("give either -H or --hostfile, not both");
  }
  if (!options.hostList.empty()) return parseHostList(options.hostList);
  if (!options.hostfile.empty()) return parseHostfile(options.hostfile);
  return {HostSlots{"localhost", options.np}};
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
    if (x.empty() || eq == 0) throw InvalidArgumentError("-x '" + x + "': expected NAME[=VALUE]");
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

}  // namespace hvd::launcher
