// The environment of a job's ranks as hvdrun forwards it: the caller's (embedded jobs) or only
// what -x names (remote jobs), then --start-timeout and the engine knobs, where no -x sets the
// same variable. The agents add the hvd variables of each rank (agent/node/worker_env.h).
#pragma once

#include <string>
#include <vector>

#include "launcher/options.h"

namespace hvd::launcher {

// What is wrong with a -x entry (NAME or NAME=VALUE), or "": a NAME that is not an environment
// variable's name reaches the ranks as an entry that shells drop and programs cannot look up, a
// typo that would otherwise surface as a setting silently not taken.
std::string exportProblem(const std::string& entry);

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

}  // namespace hvd::launcher
