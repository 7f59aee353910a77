// Host discovery by a user's script (hvdrun --host-discovery-script), as Horovod's
// HostDiscoveryScript: run it, read "host[:slots]" lines from its stdout (discovery.h).
//
// The value is run as `/bin/sh -c SCRIPT`, not as a program path: Horovod hands it to a shell
// (safe_shell_exec, subprocess with shell=True), so values that work there — a command with
// arguments ("python3 discover.py --zone a"), a path relative to the working directory — must
// work here. It is the job owner's own command, run with the job owner's rights, so a shell adds
// nothing they could not do anyway.
//
// Horovod waits for the script without a limit; a script that hangs would then stop the leader
// from noticing anything else, so here it is killed (with everything it started, its process
// group) once `timeout` has passed.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "agent/elastic/discovery.h"

namespace hvd::agent::elastic {

class ScriptDiscovery : public HostDiscovery {
 public:
  // `env`: the script's complete environment as "K=V" entries; nullopt: this process's own.
  // `cwd`: where it runs (the job's working directory, so relative paths mean what they meant
  // to the user); empty: this process's. Throws hvd::InvalidArgumentError for an empty script,
  // defaultSlots < 1 or a timeout <= 0.
  ScriptDiscovery(std::string script, int defaultSlots, std::chrono::milliseconds timeout,
                  std::optional<std::vector<std::string>> env = std::nullopt, std::string cwd = {});

  // Runs the script once. Every failure names the script and, where it wrote one, its last
  // non-blank stderr line:
  //  * hvd::BackendError: it could not be started, exited non-zero or died of a signal;
  //  * hvd::TimeoutError: it ran past the timeout (and was killed);
  //  * hvd::InvalidArgumentError: its stdout is not a host list (parseDiscoveryOutput's
  //    message, with the line) or is larger than kMaxOutputBytes.
  std::vector<DiscoveredHost> discover() override;

  // A host list is a line per node; more than this is a script gone wrong, and reading it all
  // would let it fill the leader's memory.
  static constexpr size_t kMaxOutputBytes = 1 << 20;

 private:
  std::string script_;
  int defaultSlots_;
  std::chrono::milliseconds timeout_;
  std::optional<std::vector<std::string>> env_;
  std::string cwd_;
};

}  // namespace hvd::agent::elastic
