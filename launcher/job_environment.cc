#include "launcher/job_environment.h"

#include <cstdio>
#include <cstdlib>

#include "agent/common/cli_checks.h"
#include "contract/names.h"
#include "hvd/error.hpp"

namespace hvd::launcher {

using agent::common::inQuotes;

std::string exportProblem(const std::string& entry) {
  const std::string name = entry.substr(0, entry.find('='));
  if (name.empty()) return "expected NAME[=VALUE]";
  if (!contract::isEnvName(name)) {
    return inQuotes(name) +
           " is not an environment variable name (expected NAME[=VALUE], NAME of letters, digits "
           "and '_', not starting with a digit)";
  }
  return {};
}

std::vector<std::string> forwardedEnvironment(const std::vector<std::string>& callerEnv,
                                              const std::vector<std::string>& exports) {
  std::vector<std::string> env = callerEnv;
  auto nameOf = [](const std::string& entry) { return entry.substr(0, entry.find('=')); };
  auto set = [&](const std::string& entry) {
    const std::string name = nameOf(entry);
    for (std::string& e : env) {
      if (nameOf(e) == name) {
        e = entry;
        return;
      }
    }
    env.push_back(entry);
  };
  for (const std::string& x : exports) {
    const size_t eq = x.find('=');
    if (const std::string problem = exportProblem(x); !problem.empty()) {
      throw InvalidArgumentError("-x " + inQuotes(x) + ": " + problem);
    }
    if (eq != std::string::npos) {
      set(x);
      continue;
    }
    const char* value = std::getenv(x.c_str());
    if (value == nullptr) {
      throw InvalidArgumentError("-x " + x + ": " + x + " is not set in hvdrun's environment");
    }
    set(x + "=" + value);
  }
  return env;
}

std::vector<std::string> exportedEnvironment(const std::vector<std::string>& exports) {
  return forwardedEnvironment({}, exports);
}

namespace {

// Sets NAME=value in `env` unless a -x names NAME (an explicit -x wins).
void setUnlessExported(const Options& options, const std::string& name, const std::string& value,
                       std::vector<std::string>* env) {
  const std::string prefix = name + "=";
  for (const std::string& x : options.exports) {
    if (x == name || x.rfind(prefix, 0) == 0) return;
  }
  for (std::string& e : *env) {
    if (e.rfind(prefix, 0) == 0) {
      e = prefix + value;
      return;
    }
  }
  env->push_back(prefix + value);
}

}  // namespace

void addStartTimeout(const Options& options, std::vector<std::string>* env) {
  if (!options.startTimeoutGiven) return;
  char value[64];
  std::snprintf(value, sizeof(value), "%g", options.startTimeoutSeconds);
  setUnlessExported(options, "HVD_START_TIMEOUT", value, env);
}

void addEngineSettings(const Options& options, std::vector<std::string>* env) {
  for (const std::string& setting : options.engineSettings) {
    const size_t eq = setting.find('=');
    setUnlessExported(options, setting.substr(0, eq), setting.substr(eq + 1), env);
  }
}

}  // namespace hvd::launcher
