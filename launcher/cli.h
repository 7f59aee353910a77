// hvdrun's command line: parsing (CLI11) and the checks of every option's value, kept apart from
// hvdrun_main.cc so they read as a specification and stay testable. What the parse yields is
// Options (options.h); the decisions made from it live beside: the hosts (hosts.h), the ranks'
// environment (job_environment.h), the engine knobs (engine_options.h) and the option values
// (option_values.h).
#pragma once

#include <optional>

#include "launcher/options.h"

namespace hvd::launcher {

// Parses argv (`hvdrun [options] PROGRAM ...` or `hvdrun keygen [--key-file F]`). Returns nullopt
// when options->action should be carried out; otherwise the exit code hvdrun ends with after
// printing what there is to say: 0 for --help, 2 (usage error) for every parse error. Every
// option's value is checked here, and a value that cannot be meant (an empty path or host list,
// NaN or an infinite number, a number out of range, -x with a name that is not an environment
// variable's) is a usage error whose message names the option and quotes the value.
std::optional<int> parseCommandLine(int argc, char** argv, Options* options);

}  // namespace hvd::launcher
