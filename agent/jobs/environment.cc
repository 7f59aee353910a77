#include "agent/jobs/environment.h"

#include <unordered_map>

#include "contract/names.h"
#include "hvd/error.hpp"

namespace hvd::agent::jobs {
namespace {

bool startsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

}  // namespace

bool isExcludedFromBase(std::string_view name) {
  // Other launchers' (and an outer hvd job's) rank variables.
  static constexpr std::string_view kPrefixes[] = {"HVD_", "HOROVOD_", "OMPI_",
                                                   "PMI_", "PMIX_",    "SLURM_"};
  for (std::string_view p : kPrefixes) {
    if (startsWith(name, p)) return true;
  }
  // Sockets that hand out the agent user's identity or talk to its service manager.
  static constexpr std::string_view kExact[] = {"SSH_AUTH_SOCK",  "NOTIFY_SOCKET",
                                                "LISTEN_FDS",     "LISTEN_PID",
                                                "LISTEN_FDNAMES", "CREDENTIALS_DIRECTORY"};
  for (std::string_view e : kExact) {
    if (name == e) return true;
  }
  return contract::isSecretEnvName(name);
}

std::vector<std::string> baseEnvironment(char** envp) {
  std::vector<std::string> result;
  if (envp == nullptr) return result;
  for (char** e = envp; *e != nullptr; ++e) {
    std::string_view entry(*e);
    const size_t eq = entry.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    if (isExcludedFromBase(entry.substr(0, eq))) continue;
    result.emplace_back(entry);
  }
  return result;
}

std::vector<std::string> mergeEnvironment(const std::vector<std::string>& base,
                                          const std::vector<std::string>& overlay) {
  std::vector<std::string> result;
  result.reserve(base.size() + overlay.size());
  std::unordered_map<std::string, size_t> position;  // name -> index in result
  for (const std::string& entry : base) {
    const size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    auto [it, inserted] = position.emplace(entry.substr(0, eq), result.size());
    if (inserted) {
      result.push_back(entry);
    } else {
      result[it->second] = entry;
    }
  }
  for (size_t i = 0; i < overlay.size(); ++i) {
    const std::string& entry = overlay[i];
    const size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw InvalidArgumentError("environment entry " + std::to_string(i) + " of the job is not " +
                                 "NAME=value" + (eq == 0 ? " (empty name)" : " (no '=' in it)"));
    }
    auto [it, inserted] = position.emplace(entry.substr(0, eq), result.size());
    if (inserted) {
      result.push_back(entry);
    } else {
      result[it->second] = entry;
    }
  }
  return result;
}

}  // namespace hvd::agent::jobs
