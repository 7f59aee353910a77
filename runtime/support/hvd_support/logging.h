// Logging for libhvd: one spdlog logger per subsystem ("init", "store", "transport", "coll",
// "engine", "gpu"), each line prefixed with time, host, pid, rank and subsystem, like NCCL's debug
// output. HVD_LOG_LEVEL (trace, debug, info, warn, error, off; default warn) sets the level and
// HVD_LOG_SUBSYS (comma-separated names, default all) restricts which subsystems print below
// warn. Logs go to stderr so they never mix with a program's stdout.
//
// The programs built on the runtime (hvdagent, hvdrun) log through the same loggers: once
// configureProgram() has run, every prefix names the program instead of a rank, and the program's
// own subsystems (program(): hvdagent's "daemon", "service", "jobs", "records", "auth", "client",
// "thread"; hvdrun's "launch", "client", "slurm") take the program's level (its
// --log-level, -v) while the runtime's subsystems inside it (the job store) keep HVD_LOG_LEVEL's,
// so a daemon at info does not turn the store's chatter on. HVD_LOG_SUBSYS filters both.
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <string>

namespace hvd::logging {

// Returns the logger of a subsystem, creating it on first use with the configured level.
std::shared_ptr<spdlog::logger> get(const std::string& subsystem);

// Updates the rank shown in every logger's prefix (-1 before init is known).
void setRank(int rank);

// Where a program's lines go.
enum class Sink { kStderr, kStdout };

// Names the program in every prefix ("hvdagent", "hvdrun"), sets the level of its own subsystems
// and sends every logger's lines to `sink`. Call once at start, before other threads log.
void configureProgram(const std::string& name, spdlog::level::level_enum level,
                      Sink sink = Sink::kStderr);

// The logger of one of the program's own subsystems, created on first use.
std::shared_ptr<spdlog::logger> program(const std::string& subsystem);

}  // namespace hvd::logging
