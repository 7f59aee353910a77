#include "launcher/job_spec.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <set>

#include "agent/auth/cluster_key.h"
#include "agent/common/net.h"
#include "agent/rpc/convert.h"
#include "hvd/error.hpp"
#include "launcher/hosts.h"
#include "launcher/job_environment.h"
#include "launcher/option_values.h"

namespace hvd::launcher {

std::string newJobId() {
  return "hvdrun-" + std::to_string(::getpid()) + "-" + agent::auth::randomHex(4);
}

agent::coordinator::ElasticSpec elasticSpec(const Options& options) {
  agent::coordinator::ElasticSpec elastic;
  if (!options.elastic) return elastic;
  const int np = options.np;
  const int minNp = options.minNp > 0 ? options.minNp : np;
  const std::string maxText = std::to_string(options.maxNp);
  if (options.maxNp > 0 && options.minNp > options.maxNp) {
    throw InvalidArgumentError("--min-np " + std::to_string(options.minNp) +
                               " is more than --max-np " + maxText +
                               " (an elastic job keeps between --min-np and --max-np ranks)");
  }
  if (minNp > np) {
    throw InvalidArgumentError("--min-np " + std::to_string(minNp) + " is more than -np " +
                               std::to_string(np) +
                               " (-np is the slots an elastic job starts with: at least --min-np)");
  }
  if (options.maxNp > 0 && np > options.maxNp) {
    throw InvalidArgumentError("-np " + std::to_string(np) + " is more than --max-np " + maxText +
                               " (-np is the slots an elastic job starts with: at most --max-np)");
  }
  const auto milliseconds = [](double seconds) {
    return std::chrono::milliseconds(std::llround(seconds * 1000));
  };
  elastic.enabled = true;
  elastic.minNp = minNp;
  elastic.maxNp = options.maxNp;
  elastic.discoveryScript = options.discoveryScript;
  elastic.slotsPerHost = options.slotsPerHost;
  elastic.discoveryInterval = milliseconds(options.discoveryIntervalSeconds);
  elastic.timeout = milliseconds(options.elasticTimeoutSeconds);
  elastic.resetLimit = options.resetLimit;
  elastic.cooldownSeconds = options.cooldownRange;
  elastic.agentPort = options.agentPort;
  return elastic;
}

agent::coordinator::JobSpec buildJobSpec(const Options& options,
                                         const std::vector<contract::HostSlots>& hosts,
                                         std::vector<std::string> env) {
  agent::coordinator::JobSpec spec;
  spec.jobId = newJobId();
  spec.argv = options.command;
  addStartTimeout(options, &env);
  addEngineSettings(options, &env);
  spec.env = std::move(env);
  spec.cwd = std::filesystem::current_path().string();
  spec.np = options.np;
  spec.hosts = hosts;
  spec.oversubscribe = options.oversubscribe;
  spec.gpusPerRank = options.gpusPerRank;
  spec.gpuBind = parseGpuBind(options.gpuBind).value_or(agent::node::GpuBind::kNone);
  spec.stopSignal = parseSignal(options.stopSignal).value_or(SIGTERM);
  spec.grace = std::chrono::milliseconds(static_cast<long long>(options.graceSeconds * 1000));
  spec.timeLimit =
      std::chrono::milliseconds(static_cast<long long>(options.timeLimitSeconds * 1000));
  spec.restart.maxRestarts = options.maxRestarts;
  spec.restart.minUptime =
      std::chrono::milliseconds(static_cast<long long>(options.restartMinUptimeSeconds * 1000));
  spec.restart.noRestartOnExit = options.noRestartOnExit;
  spec.queue = !options.noQueue;
  spec.elastic = elasticSpec(options);
  return spec;
}

void checkAgentHosts(const std::vector<contract::HostSlots>& hosts) {
  std::set<std::string> seen;
  for (const contract::HostSlots& h : hosts) {
    if (!seen.insert(h.host).second) {
      throw InvalidArgumentError("host '" + h.host +
                                 "' is listed twice; list it once with its "
                                 "slots");
    }
    if (agent::common::isLoopbackName(h.host) && hosts.size() > 1) {
      throw InvalidArgumentError("host '" + h.host +
                                 "' means a different machine to each agent; name this machine "
                                 "by its hostname or address in a multi-host job");
    }
  }
}

v1::SubmitJobRequest buildSubmitRequest(const Options& options,
                                        const std::vector<contract::HostSlots>& hosts,
                                        std::vector<std::string> addresses) {
  const agent::coordinator::JobSpec spec =
      buildJobSpec(options, hosts, exportedEnvironment(options.exports));
  if (addresses.empty()) {
    for (const contract::HostSlots& h : hosts)
      addresses.push_back(agentAddress(h.host, options.agentPort));
  }
  v1::SubmitJobRequest request = agent::rpc::toProto(spec, addresses);
  request.set_connect_timeout_ms(static_cast<long long>(options.startTimeoutSeconds * 1000));
  // The job's name in `hvdrun ps`: the program, as the user knows it.
  request.set_job_name(std::filesystem::path(options.command.front()).filename().string());
  request.set_detach(options.action == Action::kSubmit);
  request.set_tree_width(options.treeWidth);
  return request;
}

}  // namespace hvd::launcher
