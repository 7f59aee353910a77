#include "core/job_members.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <tuple>

#include "core/process_sets.h"
#include "core/scheduler_env.h"
#include "hvd/error.hpp"

namespace hvd::core {

void restrictToMembers(Config& config, const std::vector<int>& members) {
  if (members.empty()) return;
  const std::string what = "hvd.init(comm=[" + rankList(members) + "])";
  std::vector<bool> listed(config.size, false);
  for (int r : members) {
    if (r < 0 || r >= config.size) {
      throw InvalidArgumentError(what + ": rank " + std::to_string(r) +
                                 " is not in the launched job (ranks 0.." +
                                 std::to_string(config.size - 1) + ")");
    }
    if (listed[r]) {
      throw InvalidArgumentError(what + ": rank " + std::to_string(r) + " is listed twice");
    }
    listed[r] = true;
  }
  bool asLaunched = static_cast<int>(members.size()) == config.size;
  for (size_t i = 0; asLaunched && i < members.size(); ++i) {
    asLaunched = members[i] == static_cast<int>(i);
  }
  if (asLaunched) return;
  const auto at = std::find(members.begin(), members.end(), config.rank);
  if (at == members.end()) {
    throw InvalidArgumentError(
        what + ": this process is launched rank " + std::to_string(config.rank) +
        ", which is not in the list: only the listed ranks call init with it, each with the "
        "same list (a rank outside it may form a job of its own with a list of its own)");
  }
  if (config.elastic) {
    throw InvalidArgumentError(what +
                               ": not in elastic mode, where each round decides which "
                               "workers form the job");
  }
  if (config.cpuBackend == CpuBackend::kMpi) {
    throw InvalidArgumentError(what +
                               ": not with HVD_CPU_BACKEND=mpi, whose communicators "
                               "span every launched rank");
  }
  if (config.mpiRendezvous) {
    throw InvalidArgumentError(
        what +
        ": the rendezvous over MPI takes every launched rank; set HVD_STORE_FILE to a "
        "directory every rank shares, or HVD_STORE_ADDR to a running store");
  }
  config.members = members;
  config.rank = static_cast<int>(at - members.begin());
  config.size = static_cast<int>(members.size());
  if (config.size == 1) {
    config.localRank = config.crossRank = 0;
    config.localSize = config.crossSize = 1;
  }
  // Else the rendezvous gives the local and cross placement (Runtime).
}

std::string membersNamespace(const std::vector<int>& members) {
  if (members.empty()) return "";
  uint64_t digest = 1469598103934665603ull;  // FNV-1a over the ranks in order
  for (int r : members) {
    for (int byte = 0; byte < 4; ++byte) {
      digest ^= (static_cast<uint32_t>(r) >> (8 * byte)) & 0xff;
      digest *= 1099511628211ull;
    }
  }
  char text[24];
  std::snprintf(text, sizeof(text), "m%016llx/", static_cast<unsigned long long>(digest));
  return text;
}

HostPlacement placementFromHostKeys(const std::vector<std::string>& hostKeys, int rank) {
  if (rank < 0 || rank >= static_cast<int>(hostKeys.size())) {
    throw InvalidArgumentError("rank " + std::to_string(rank) + " is not in the job");
  }
  HostPlacement p;
  p.localRank =
      static_cast<int>(std::count(hostKeys.begin(), hostKeys.begin() + rank, hostKeys[rank]));
  p.localSize = static_cast<int>(std::count(hostKeys.begin(), hostKeys.end(), hostKeys[rank]));
  std::tie(p.crossRank, p.crossSize) = crossFromHostKeys(hostKeys, rank, p.localRank, p.localSize);
  return p;
}

}  // namespace hvd::core
