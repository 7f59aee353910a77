// Rank placement (see placement.h for the policy).
#include "contract/placement.h"

#include <cstdint>
#include <set>
#include <string>

#include "hvd/error.hpp"

namespace hvd::contract {
namespace {

// Long host lists are cut in error messages: the user needs the shape, not a thousand entries.
constexpr size_t kHostsListedInErrors = 16;

std::string plural(int64_t n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

std::string describeSlots(const std::vector<HostCapacity>& hosts) {
  std::string text;
  for (size_t i = 0; i < hosts.size() && i < kHostsListedInErrors; ++i) {
    if (i > 0) text += ", ";
    text += hosts[i].host + ":" + std::to_string(hosts[i].slots);
  }
  if (hosts.size() > kHostsListedInErrors) {
    text += ", ... and " + std::to_string(hosts.size() - kHostsListedInErrors) + " more";
  }
  return text;
}

void validate(const std::vector<HostCapacity>& hosts, int np, bool oversubscribe) {
  if (np < 1) throw InvalidArgumentError("-np must be at least 1, got " + std::to_string(np));
  if (hosts.empty()) throw InvalidArgumentError("no hosts to place " + plural(np, "rank") + " on");
  std::set<std::string> seen;
  // 64 bits: many hosts with large slot counts would overflow an int.
  int64_t totalSlots = 0;
  for (const HostCapacity& h : hosts) {
    if (h.slots < 1) {
      throw InvalidArgumentError("host '" + h.host + "' has " + std::to_string(h.slots) +
                                 " slots; every host needs at least 1");
    }
    // A host listed twice would get two sets of local ranks that both start at 0.
    if (!seen.insert(h.host).second) {
      throw InvalidArgumentError("host '" + h.host +
                                 "' appears twice; each host must be listed once");
    }
    totalSlots += h.slots;
  }
  if (np > totalSlots && !oversubscribe) {
    throw InvalidArgumentError("-np " + std::to_string(np) + " exceeds the " +
                               plural(totalSlots, "slot") + " of " +
                               plural(static_cast<int64_t>(hosts.size()), "host") + " (" +
                               describeSlots(hosts) + "); add hosts or pass --oversubscribe");
  }
}

}  // namespace

Placement placeRanks(const std::vector<HostCapacity>& hosts, int np, bool oversubscribe) {
  validate(hosts, np, oversubscribe);
  const int hostCount = static_cast<int>(hosts.size());

  // Host of every rank: fill slots in host order, then one extra rank per host, round-robin.
  std::vector<int> hostOf;
  hostOf.reserve(np);
  for (int h = 0; h < hostCount && static_cast<int>(hostOf.size()) < np; ++h) {
    for (int s = 0; s < hosts[h].slots && static_cast<int>(hostOf.size()) < np; ++s) {
      hostOf.push_back(h);
    }
  }
  for (int h = 0; static_cast<int>(hostOf.size()) < np; h = (h + 1) % hostCount) {
    hostOf.push_back(h);
  }

  Placement out;
  out.hostRanks.resize(hostCount);
  out.ranks.resize(np);
  for (int r = 0; r < np; ++r) {
    std::vector<int>& onHost = out.hostRanks[hostOf[r]];
    out.ranks[r].rank = r;
    out.ranks[r].hostIndex = hostOf[r];
    // Ranks are visited in ascending order, so local ranks follow rank order within a host.
    out.ranks[r].localRank = static_cast<int>(onHost.size());
    onHost.push_back(r);
  }

  // Cross ranks: the hosts holding a worker with local rank L are numbered in host order.
  // hostsWithLocalRank[L] counts them while hosts are visited in order, so this is linear in np.
  std::vector<int> hostsWithLocalRank;
  for (const std::vector<int>& onHost : out.hostRanks) {
    if (hostsWithLocalRank.size() < onHost.size()) hostsWithLocalRank.resize(onHost.size(), 0);
    for (int r : onHost) {
      RankPlacement& p = out.ranks[r];
      p.localSize = static_cast<int>(onHost.size());
      p.crossRank = hostsWithLocalRank[p.localRank]++;
    }
  }
  for (RankPlacement& p : out.ranks) p.crossSize = hostsWithLocalRank[p.localRank];
  return out;
}

}  // namespace hvd::contract
