#include "hvd_support/logging.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <vector>

#include "contract/worker_variables.h"
#include "hvd_support/host.h"

namespace hvd::logging {
namespace {

spdlog::level::level_enum configuredLevel() {
  const char* env = std::getenv(contract::worker::kLogLevel.name);
  if (env == nullptr || *env == '\0') return spdlog::level::warn;
  auto level = spdlog::level::from_str(env);
  // from_str maps unknown names to "off"; treat an unknown name as the default instead.
  if (level == spdlog::level::off && std::string(env) != "off") return spdlog::level::warn;
  return level;
}

bool subsystemEnabled(const std::string& subsystem) {
  const char* env = std::getenv(contract::worker::kLogSubsystems.name);
  if (env == nullptr || *env == '\0') return true;
  std::stringstream list(env);
  std::string item;
  while (std::getline(list, item, ',')) {
    if (item == subsystem || item == "all") return true;
  }
  return false;
}

// The logger set of the process. spdlog keeps its own registry; this keeps the prefix state
// (rank or program) and the sink in one place so setRank and configureProgram can update every
// logger.
struct LoggerSet {
  std::mutex mutex;
  int rank = -1;
  std::string program;  // set by configureProgram: shown instead of the rank
  spdlog::level::level_enum programLevel = spdlog::level::info;
  Sink sink = Sink::kStderr;
  std::vector<std::shared_ptr<spdlog::logger>> loggers;
};

// The runtime's loggers are named "hvd.<subsystem>", a program's "program.<subsystem>", so the
// two kinds never share a logger even where a subsystem name is the same.
constexpr char kRuntimePrefix[] = "hvd.";
constexpr char kProgramPrefix[] = "program.";

bool ofProgram(const spdlog::logger& logger) { return logger.name().rfind(kProgramPrefix, 0) == 0; }

std::string pattern(const LoggerSet& set, const std::string& subsystem) {
  std::ostringstream out;
  out << "[%Y-%m-%d %H:%M:%S.%e] [" << localHostName() << ":" << getpid() << "] [";
  if (!set.program.empty()) {
    out << set.program;
  } else if (set.rank < 0) {
    out << "rank -";
  } else {
    out << "rank " << set.rank;
  }
  out << "] [" << subsystem << "] [%l] %v";
  return out.str();
}

// A sink of its own for each logger: a sink holds the formatter, so a shared one would print
// every logger's lines with the subsystem of the last pattern set.
spdlog::sink_ptr makeSink(Sink sink) {
  if (sink == Sink::kStdout) return std::make_shared<spdlog::sinks::stdout_sink_mt>();
  return std::make_shared<spdlog::sinks::stderr_sink_mt>();
}

std::string subsystemOf(const spdlog::logger& logger) {
  const std::string& name = logger.name();
  return name.substr(name.find('.') + 1);
}

LoggerSet& loggerSet() {
  static LoggerSet set;
  return set;
}

// What `logger` logs at: the program's level for its subsystems, HVD_LOG_LEVEL's for the
// runtime's; below warn only where HVD_LOG_SUBSYS lets the subsystem through.
spdlog::level::level_enum levelOf(const LoggerSet& set, const spdlog::logger& logger) {
  auto level = ofProgram(logger) ? set.programLevel : configuredLevel();
  if (!subsystemEnabled(subsystemOf(logger))) level = std::max(level, spdlog::level::warn);
  return level;
}

// Under set.mutex: sink, level and prefix from the set's state now.
void configure(const LoggerSet& set, spdlog::logger* logger) {
  logger->sinks() = {makeSink(set.sink)};
  logger->set_level(levelOf(set, *logger));
  logger->set_pattern(pattern(set, subsystemOf(*logger)));
}

std::shared_ptr<spdlog::logger> find(const std::string& name) {
  auto& set = loggerSet();
  std::lock_guard<std::mutex> lock(set.mutex);
  for (auto& logger : set.loggers) {
    if (logger->name() == name) return logger;
  }
  auto logger = std::make_shared<spdlog::logger>(name);
  configure(set, logger.get());
  set.loggers.push_back(logger);
  return logger;
}

}  // namespace

std::shared_ptr<spdlog::logger> get(const std::string& subsystem) {
  return find(kRuntimePrefix + subsystem);
}

std::shared_ptr<spdlog::logger> program(const std::string& subsystem) {
  return find(kProgramPrefix + subsystem);
}

void setRank(int rank) {
  auto& set = loggerSet();
  std::lock_guard<std::mutex> lock(set.mutex);
  set.rank = rank;
  for (auto& logger : set.loggers) logger->set_pattern(pattern(set, subsystemOf(*logger)));
}

void configureProgram(const std::string& name, spdlog::level::level_enum level, Sink sink) {
  auto& set = loggerSet();
  std::lock_guard<std::mutex> lock(set.mutex);
  set.program = name;
  set.programLevel = level;
  set.sink = sink;
  for (auto& logger : set.loggers) configure(set, logger.get());
}

}  // namespace hvd::logging
