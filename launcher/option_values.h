// The values of hvdrun's options that are more than a number or a path: durations, exit code
// lists, rank ranges, signal names, --gpu-bind modes and log levels. Pure functions, each
// returning nullopt for text that cannot be meant, so the command line (cli.cc) refuses it as a
// usage error and the job builder (job_spec.cc) can rely on what was checked.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/node/worker_env.h"

namespace hvd::launcher {

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

// --log-level: Horovod's names (TRACE, DEBUG, INFO, WARNING, ERROR, FATAL) and the ranks' own
// (trace, debug, info, warn, error, off), in any case, as the name HVD_LOG_LEVEL takes:
// "WARNING" -> "warn", "FATAL" -> "critical". nullopt for anything else.
std::optional<std::string> parseLogLevel(const std::string& name);

}  // namespace hvd::launcher
