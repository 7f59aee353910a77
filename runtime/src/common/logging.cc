#include "common/logging.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <vector>

#include "common/host.h"

namespace hvd::logging {
namespace {

spdlog::level::level_enum configuredLevel() {
  const char* env = std::getenv("HVD_LOG_LEVEL");
  if (env == nullptr || *env == '\0') return spdlog::level::warn;
  auto level = spdlog::level::from_str(env);
  // from_str maps unknown names to "off"; treat an unknown name as the default instead.
  if (level == spdlog::level::off && std::string(env) != "off") return spdlog::level::warn;
  return level;
}

bool subsystemEnabled(const std::string& subsystem) {
  const char* env = std::getenv("HVD_LOG_SUBSYS");
  if (env == nullptr || *env == '\0') return true;
  std::stringstream list(env);
  std::string item;
  while (std::getline(list, item, ',')) {
    if (item == subsystem || item == "all") return true;
  }
  return false;
}

std::string pattern(int rank, const std::string& subsystem) {
  std::ostringstream out;
  out << "[%Y-%m-%d %H:%M:%S.%e] [" << localHostName() << ":" << getpid() << "] [rank ";
  if (rank < 0) {
    out << "-";
  } else {
    out << rank;
  }
  out << "] [" << subsystem << "] [%l] %v";
  return out.str();
}

// The logger set of the process. spdlog keeps its own registry; this keeps the prefix state
// (rank) in one place so setRank can update every logger.
struct LoggerSet {
  std::mutex mutex;
  int rank = -1;
  std::vector<std::shared_ptr<spdlog::logger>> loggers;
};

LoggerSet& loggerSet() {
  static LoggerSet set;
  return set;
}

}  // namespace

std::shared_ptr<spdlog::logger> get(const std::string& subsystem) {
  auto& set = loggerSet();
  std::lock_guard<std::mutex> lock(set.mutex);
  const std::string name = "hvd." + subsystem;
  for (auto& logger : set.loggers) {
    if (logger->name() == name) return logger;
  }
  auto logger =
      std::make_shared<spdlog::logger>(name, std::make_shared<spdlog::sinks::stderr_sink_mt>());
  auto level = configuredLevel();
  if (!subsystemEnabled(subsystem)) level = std::max(level, spdlog::level::warn);
  logger->set_level(level);
  logger->set_pattern(pattern(set.rank, subsystem));
  set.loggers.push_back(logger);
  return logger;
}

void setRank(int rank) {
  auto& set = loggerSet();
  std::lock_guard<std::mutex> lock(set.mutex);
  set.rank = rank;
  for (auto& logger : set.loggers) {
    logger->set_pattern(pattern(rank, logger->name().substr(4)));
  }
}

}  // namespace hvd::logging
