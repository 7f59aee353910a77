// Logging for libhvd: one spdlog logger per subsystem ("init", "store", "transport", "coll",
// "bench"), each line prefixed with time, host, pid, rank and subsystem, like NCCL's debug
// output. HVD_LOG_LEVEL (trace, debug, info, warn, error, off; default warn) sets the level and
// HVD_LOG_SUBSYS (comma-separated names, default all) restricts which subsystems print below
// warn. Logs go to stderr so they never mix with a program's stdout.
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <string>

namespace hvd::logging {

// Returns the logger of a subsystem, creating it on first use with the configured level.
std::shared_ptr<spdlog::logger> get(const std::string& subsystem);

// Updates the rank shown in every logger's prefix (-1 before init is known).
void setRank(int rank);

}  // namespace hvd::logging
