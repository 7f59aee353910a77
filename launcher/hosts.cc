#include "launcher/hosts.h"

#include "agent/common/net.h"
#include "contract/slurm_hosts.h"
#include "hvd/error.hpp"

namespace hvd::launcher {

bool isLocalHost(const std::string& host, const std::string& ownHostname) {
  return agent::common::isLoopbackName(host) || (!ownHostname.empty() && host == ownHostname);
}

std::vector<contract::HostSlots> resolveHosts(const Options& options) {
  if (!options.hostList.empty() && !options.hostfile.empty()) {
    throw InvalidArgumentError("give either -H or --hostfile, not both");
  }
  if (!options.hostList.empty()) return contract::parseHostList(options.hostList);
  if (!options.hostfile.empty()) return contract::parseHostfile(options.hostfile);
  return {contract::HostSlots{"localhost", options.np}};
}

bool usesSlurmAllocation(const Options& options, contract::EnvReader getenv) {
  const char* job = getenv("SLURM_JOB_ID");
  return job != nullptr && *job != '\0' && options.hostList.empty() && options.hostfile.empty();
}

std::optional<std::vector<contract::HostSlots>> slurmHosts(const Options& options,
                                                           contract::EnvReader getenv) {
  if (!usesSlurmAllocation(options, getenv)) return std::nullopt;
  return contract::slurmAllocationHosts(getenv);
}

std::string formatHostList(const std::vector<contract::HostSlots>& hosts) {
  std::string out;
  for (const contract::HostSlots& h : hosts) {
    if (!out.empty()) out += ',';
    out += h.host.find(':') != std::string::npos ? "[" + h.host + "]" : h.host;
    if (h.slots) out += ":" + std::to_string(*h.slots);
  }
  return out;
}

namespace {

// The sum of the hosts' slots; nullopt with *unknown naming the first host without a count.
std::optional<long long> knownSlots(const std::vector<contract::HostSlots>& hosts,
                                    std::string* unknown) {
  long long total = 0;
  for (const contract::HostSlots& h : hosts) {
    if (!h.slots) {
      *unknown = h.host;
      return std::nullopt;
    }
    total += *h.slots;
  }
  return total;
}

}  // namespace

int slotsTotal(const std::vector<contract::HostSlots>& hosts) {
  std::string unknown;
  const std::optional<long long> known = knownSlots(hosts, &unknown);
  if (!known) {
    throw InvalidArgumentError("-np is needed: the slots of '" + unknown +
                               "' are not known from SLURM_TASKS_PER_NODE");
  }
  const long long total = *known;
  if (total < 1 || total > (1 << 20)) {
    throw InvalidArgumentError("-np is needed: the allocation's " + std::to_string(total) +
                               " slots are not a rank count");
  }
  return static_cast<int>(total);
}

void checkAllocationFits(const Options& options, const std::vector<contract::HostSlots>& hosts) {
  std::string unknown;
  const std::optional<long long> known = knownSlots(hosts, &unknown);
  // A node without a count gets its GPUs, which only its agent knows: the coordinator checks.
  if (options.oversubscribe || !known || options.np <= *known) return;
  const long long total = *known;
  throw InvalidArgumentError(
      "-np " + std::to_string(options.np) + " exceeds the " + std::to_string(total) +
      " tasks of this Slurm allocation (" + formatHostList(hosts) +
      ", from SLURM_TASKS_PER_NODE): ask salloc/sbatch for them (-n " + std::to_string(options.np) +
      ", --ntasks-per-node, or --exclusive nodes), or pass "
      "--oversubscribe");
}

bool usesAgents(const Options& options, const std::vector<contract::HostSlots>& hosts,
                const std::string& ownHostname) {
  if (options.agentPortGiven) return true;
  for (const contract::HostSlots& h : hosts) {
    if (!isLocalHost(h.host, ownHostname)) return true;
  }
  return false;
}

std::string agentAddress(const std::string& host, int port) {
  return agent::common::joinHostPort(host == "localhost" ? "127.0.0.1" : host, port);
}

}  // namespace hvd::launcher
