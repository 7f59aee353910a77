// hvdrun's command line: parsing (CLI11) and the pure decisions made from it (which hosts are
// local, the environment to forward, the stop signal), kept apart from hvdrun_main.cc so they
// read as a specification and stay testable.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "launcher/host_spec.h"

namespace hvd::launcher {

struct Options {
  int np = 0;
  std::string hostList;  // -H
  std::string hostfile;  // --hostfile
  bool oversubscribe = false;
  std::vector<std::string> exports;  // -x NAME or -x NAME=VALUE, in order
  std::string stopSignal = "TERM";
  double graceSeconds = 10.0;
  std::string outputDir;  // --output-filename
  bool tagOutput = true;
  std::vector<std::string> command;  // PROGRAM ARGS...
};

// Parses argv. Returns nullopt when the job should run; otherwise the exit code hvdrun ends with
// after printing what CLI11 has to say: 0 for --help, 2 (usage error) for every parse error.
std::optional<int> parseCommandLine(int argc, char** argv, Options* options);

// "TERM", "SIGTERM", "sigterm" or "15" -> 15; nullopt for anything else.
std::optional<int> parseSignal(const std::string& name);

// True for the names that mean this machine: localhost, 127.0.0.1, ::1 and `ownHostname`.
bool isLocalHost(const std::string& host, const std::string& ownHostname);

// The hosts of the job: -H, else --hostfile, else "localhost:np" (Horovod's default). Throws
// hvd::InvalidArgumentError for a malformed list, both options given, or an unreadable file.
std::vector<HostSlots> resolveHosts(const Options& options);

// The environment forwarded to every rank as "NAME=VALUE" entries. Embedded jobs forward the
// caller's whole environment, as mpirun does for local ranks: a local job should behave like
// running the program in this shell (PATH, PYTHONPATH, virtualenvs, CUDA settings). Then each
// -x applies in order: NAME=VALUE sets a value; NAME re-forwards the caller's value (a no-op
// locally, accepted so command lines keep working when remote hosts arrive) and is an error when
// NAME is unset, because a silently missing variable is a hard-to-find bug. Throws
// hvd::InvalidArgumentError naming the offending -x.
std::vector<std::string> forwardedEnvironment(const std::vector<std::string>& callerEnv,
                                              const std::vector<std::string>& exports);

}  // namespace hvd::launcher
