#include "agent/node/worker_env.h"

#include <algorithm>
#include <cctype>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "contract/env_names.h"
#include "contract/names.h"
#include "contract/worker_variables.h"
#include "hvd/error.hpp"

namespace hvd::agent::node {
namespace {

namespace names = contract::env;
namespace worker = contract::worker;

constexpr std::string_view kRedacted = "<redacted>";

// Ordered name -> value list in which a later set() replaces the value but keeps the position:
// the worker sees the forwarded variables in the user's order and hvd's in a fixed order.
class EnvList {
 public:
  void set(const std::string& name, std::string value) {
    auto [it, inserted] = positions_.emplace(name, entries_.size());
    if (inserted) {
      entries_.emplace_back(name, std::move(value));
    } else {
      entries_[it->second].second = std::move(value);
    }
  }
  bool has(const std::string& name) const { return positions_.count(name) != 0; }
  void erase(const std::string& name) {
    auto it = positions_.find(name);
    if (it == positions_.end()) return;
    entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(it->second));
    positions_.clear();
    for (size_t i = 0; i < entries_.size(); ++i) positions_[entries_[i].first] = i;
  }
  std::vector<std::string> render() const {
    std::vector<std::string> out;
    out.reserve(entries_.size());
    for (const auto& [name, value] : entries_) out.push_back(name + "=" + value);
    return out;
  }

 private:
  std::vector<std::pair<std::string, std::string>> entries_;
  std::unordered_map<std::string, size_t> positions_;
};

std::string joinInts(const std::vector<int>& values) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(values[i]);
  }
  return out;
}

bool isSecretName(std::string_view name) {
  const contract::WorkerVariable* variable = contract::findWorkerVariable(name);
  return (variable != nullptr && variable->secret) || contract::isSecretEnvName(name);
}

void validate(const WorkerEnvInput& in) {
  const contract::RankPlacement& p = in.placement;
  auto fail = [&](const std::string& what) {
    throw InvalidArgumentError("worker environment for rank " + std::to_string(p.rank) +
                               " on host '" + in.hostName + "': " + what);
  };
  if (in.size < 1) fail("world size " + std::to_string(in.size) + " < 1");
  if (p.rank < 0 || p.rank >= in.size) fail("rank outside 0.." + std::to_string(in.size - 1));
  if (p.localSize < 1 || p.localRank < 0 || p.localRank >= p.localSize) {
    fail("local rank " + std::to_string(p.localRank) + " of " + std::to_string(p.localSize));
  }
  if (p.crossSize < 1 || p.crossRank < 0 || p.crossRank >= p.crossSize) {
    fail("cross rank " + std::to_string(p.crossRank) + " of " + std::to_string(p.crossSize));
  }
  if (in.groupRank < 0) fail("groupRank not set (use groupRankOfHost)");
  if (in.jobId.empty()) fail("empty job id");
  if (in.storeAddr.empty()) fail("empty store address");
  if (in.masterAddr.empty()) fail("empty MASTER_ADDR");
  if (in.masterPort < 1 || in.masterPort > 65535) {
    fail("MASTER_PORT " + std::to_string(in.masterPort) + " outside 1..65535");
  }
}

}  // namespace

int groupRankOfHost(const contract::Placement& placement, int hostIndex) {
  const int hosts = static_cast<int>(placement.hostRanks.size());
  if (hostIndex < 0 || hostIndex >= hosts) {
    throw InvalidArgumentError("host index " + std::to_string(hostIndex) + " outside 0.." +
                               std::to_string(hosts - 1));
  }
  if (placement.hostRanks[hostIndex].empty()) {
    throw InvalidArgumentError("host index " + std::to_string(hostIndex) + " has no ranks");
  }
  int group = 0;
  for (int h = 0; h < hostIndex; ++h) {
    if (!placement.hostRanks[h].empty()) ++group;
  }
  return group;
}

std::vector<int> assignGpus(const std::string& hostName, const std::vector<int>& hostGpus,
                            int localRank, int localSize, int gpusPerRank, bool oversubscribe) {
  if (hostGpus.empty()) return {};
  const int available = static_cast<int>(hostGpus.size());
  if (gpusPerRank < 1 || gpusPerRank > available) {
    throw InvalidArgumentError("host '" + hostName + "' has " + std::to_string(available) +
                               " GPU(s); cannot give each rank " + std::to_string(gpusPerRank));
  }
  const long needed = static_cast<long>(localSize) * gpusPerRank;
  if (needed > available && !oversubscribe) {
    throw InvalidArgumentError(
        "host '" + hostName + "' has " + std::to_string(available) + " GPU(s) but " +
        std::to_string(localSize) + " rank(s) x " + std::to_string(gpusPerRank) +
        " GPU(s) per rank were requested; use fewer ranks or --oversubscribe to share GPUs");
  }
  // Consecutive blocks in local-rank order keep a rank's GPUs adjacent (same PCIe switch / NVLink
  // island on typical nodes). Oversubscribed ranks wrap around so sharing is spread evenly.
  std::vector<int> gpus;
  for (int i = 0; i < gpusPerRank; ++i) {
    gpus.push_back(hostGpus[(static_cast<long>(localRank) * gpusPerRank + i) % available]);
  }
  return gpus;
}

namespace {

// The position of '=' in a forwarded entry; throws for one without a name or '='.
size_t forwardedNameEnd(const std::string& entry) {
  const size_t eq = entry.find('=');
  if (eq == std::string::npos || eq == 0) {
    // Print only the name part: a malformed entry may still hold a secret after all.
    throw InvalidArgumentError("forwarded environment entry '" + entry.substr(0, eq) +
                               "' is not NAME=value");
  }
  return eq;
}

}  // namespace

void checkWorkerEnvironment(const WorkerEnvInput& in) {
  validate(in);
  for (const std::string& entry : in.forwarded) forwardedNameEnd(entry);
  const contract::RankPlacement& p = in.placement;
  const auto [slot, slots] = in.gpuSlot.value_or(std::make_pair(p.localRank, p.localSize));
  assignGpus(in.hostName, in.hostGpus, slot, slots, in.gpusPerRank, in.oversubscribe);
}

std::vector<std::string> buildWorkerEnvironment(const WorkerEnvInput& in) {
  validate(in);
  EnvList env;
  for (const std::string& entry : in.forwarded) {
    const size_t eq = forwardedNameEnd(entry);
    env.set(entry.substr(0, eq), entry.substr(eq + 1));
  }

  const contract::RankPlacement& p = in.placement;
  const auto [slot, slots] = in.gpuSlot.value_or(std::make_pair(p.localRank, p.localSize));
  const std::vector<int> gpus =
      assignGpus(in.hostName, in.hostGpus, slot, slots, in.gpusPerRank, in.oversubscribe);
  const bool userOrder = env.has("CUDA_DEVICE_ORDER");

  // hvd's own variables go after the forwarded ones, in contract order; erase first so that an
  // overridden name moves to its contract position instead of staying among the user's.
  std::vector<std::pair<std::string, std::string>> own = {
      {worker::kRank.name, std::to_string(p.rank)},
      {worker::kSize.name, std::to_string(in.size)},
      {worker::kLocalRank.name, std::to_string(p.localRank)},
      {worker::kLocalSize.name, std::to_string(p.localSize)},
      {worker::kCrossRank.name, std::to_string(p.crossRank)},
      {worker::kCrossSize.name, std::to_string(p.crossSize)},
      {worker::kJobId.name, in.jobId},
      {worker::kStoreAddr.name, in.storeAddr},
      {worker::kStoreToken.name, in.storeToken},
      {names::torch::kRank, std::to_string(p.rank)},
      {names::torch::kWorldSize, std::to_string(in.size)},
      {names::torch::kLocalRank, std::to_string(p.localRank)},
      {names::torch::kLocalWorldSize, std::to_string(p.localSize)},
      {names::torch::kGroupRank, std::to_string(in.groupRank)},
      {names::torch::kMasterAddr, in.masterAddr},
      {names::torch::kMasterPort, std::to_string(in.masterPort)},
      {names::horovod::kRank, std::to_string(p.rank)},
      {names::horovod::kSize, std::to_string(in.size)},
      {names::horovod::kLocalRank, std::to_string(p.localRank)},
      {names::horovod::kLocalSize, std::to_string(p.localSize)},
      {names::horovod::kCrossRank, std::to_string(p.crossRank)},
      {names::horovod::kCrossSize, std::to_string(p.crossSize)},
  };
  // Only for a job that can restart: a job without --max-restarts keeps the contract it had,
  // and scripts read an absent count as 0 (torchrun's readers do).
  if (in.maxRestarts > 0 || in.restartCount > 0) {
    own.emplace_back(names::kRestartCount, std::to_string(in.restartCount));
    own.emplace_back(names::kMaxRestarts, std::to_string(in.maxRestarts));
    own.emplace_back(names::torch::kRestartCount, std::to_string(in.restartCount));
    own.emplace_back(names::torch::kMaxRestarts, std::to_string(in.maxRestarts));
  }
  own.emplace_back(names::horovod::kHostname, in.hostName);
  if (in.elastic) {
    own.emplace_back(worker::kElastic.name, "1");
    own.emplace_back(worker::kElastic.alias, "1");
    own.emplace_back(worker::kElasticRound.name, std::to_string(in.elastic->round));
    own.emplace_back(worker::kWorkerId.name, std::to_string(in.elastic->worker));
    // Whole milliseconds as seconds: what the runtime reads back is what the leader meant.
    std::string seconds = std::to_string(in.elastic->timeout.count() / 1000);
    if (const long long ms = in.elastic->timeout.count() % 1000; ms != 0) {
      std::string frac = std::to_string(1000 + ms).substr(1);
      while (frac.back() == '0') frac.pop_back();
      seconds += "." + frac;
    }
    own.emplace_back(worker::kElasticTimeout.name, seconds);
  }
  if (!gpus.empty()) {
    own.emplace_back(names::kGpu, joinInts(gpus));
    if (in.gpuBind == GpuBind::kVisible) own.emplace_back("CUDA_VISIBLE_DEVICES", joinInts(gpus));
  }
  // HVD_GPU belongs to hvd even on a CPU-only host: a stale one from the user's shell would send
  // the worker to a GPU it was not given.
  env.erase(names::kGpu);
  for (auto& [name, value] : own) {
    env.erase(name);
    env.set(name, std::move(value));
  }
  if (!gpus.empty() && !userOrder) env.set("CUDA_DEVICE_ORDER", "PCI_BUS_ID");
  return env.render();
}

std::string describeForLog(const std::vector<std::string>& env) {
  std::string out;
  for (const std::string& entry : env) {
    if (!out.empty()) out += ' ';
    const size_t eq = entry.find('=');
    const std::string_view name = std::string_view(entry).substr(0, eq);
    if (eq != std::string::npos && isSecretName(name)) {
      out.append(name).append("=").append(kRedacted);
    } else {
      out += entry;
    }
  }
  return out;
}

}  // namespace hvd::agent::node
