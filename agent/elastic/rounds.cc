#include "agent/elastic/rounds.h"

#include <algorithm>
#include <map>

#include "contract/placement.h"
#include "hvd/error.hpp"

namespace hvd::agent::elastic {
namespace {

// One host of the round being planned: the workers it keeps, then the slots to start.
struct HostPlan {
  std::string host;
  std::vector<int> kept;  // ids, in old rank order
  int newSlots = 0;
  int size() const { return static_cast<int>(kept.size()) + newSlots; }
};

// The usable hosts by hostKey, with their slots; rejects what cannot be a discovery answer.
std::map<std::string, int> slotsByHost(const std::vector<DiscoveredHost>& available) {
  std::map<std::string, int> slots;
  for (const DiscoveredHost& h : available) {
    if (h.slots < 0) {
      throw InvalidArgumentError("available host '" + h.host + "' has " + std::to_string(h.slots) +
                                 " slots; expected 0 or more");
    }
    if (!slots.emplace(hostKey(h.host), h.slots).second) {
      throw InvalidArgumentError("available host '" + h.host +
                                 "' is listed twice; expected each host once");
    }
  }
  return slots;
}

}  // namespace

int Round::survivors() const {
  return static_cast<int>(std::count_if(workers.begin(), workers.end(),
                                        [](const WorkerPlace& w) { return !w.spawned; }));
}

Round planRound(const Round* previous, const std::set<int>& alive,
                const std::vector<DiscoveredHost>& available, int maxNp, int* nextWorker) {
  if (nextWorker == nullptr) throw InvalidArgumentError("planRound: nextWorker is null");
  if (maxNp < 0) {
    throw InvalidArgumentError("max np " + std::to_string(maxNp) +
                               "; expected 0 (no bound) or more");
  }
  const std::map<std::string, int> slots = slotsByHost(available);
  Round round;
  round.number = previous != nullptr ? previous->number + 1 : 0;

  std::vector<HostPlan> plan;
  std::set<std::string> known;  // hostKeys of the last round's hosts
  if (previous != nullptr) {
    for (const std::string& host : previous->hosts) {
      const std::string key = hostKey(host);
      known.insert(key);
      const auto it = slots.find(key);
      const size_t capacity = it == slots.end() ? 0 : static_cast<size_t>(it->second);
      HostPlan p{host, {}, 0};
      for (const WorkerPlace& w : previous->workers) {  // by rank, so in old rank order
        if (hostKey(w.host) != key || alive.count(w.worker) == 0) continue;
        (p.kept.size() < capacity ? p.kept : round.removed).push_back(w.worker);
      }
      p.newSlots = static_cast<int>(capacity - p.kept.size());
      plan.push_back(std::move(p));
    }
  }
  for (const DiscoveredHost& h : available) {
    if (h.slots > 0 && known.count(hostKey(h.host)) == 0) plan.push_back({h.host, {}, h.slots});
  }

  if (maxNp > 0) {
    int kept = 0;
    for (const HostPlan& p : plan) kept += static_cast<int>(p.kept.size());
    int budget = std::max(0, maxNp - kept);
    for (HostPlan& p : plan) {  // earlier hosts' new slots first: the end is dropped
      p.newSlots = std::min(p.newSlots, budget);
      budget -= p.newSlots;
    }
  }

  std::vector<contract::HostCapacity> capacities;
  std::vector<const HostPlan*> used;
  int total = 0;
  for (const HostPlan& p : plan) {
    if (p.size() == 0) continue;
    capacities.push_back({p.host, p.size()});
    used.push_back(&p);
    total += p.size();
  }
  if (total == 0) return round;

  const contract::Placement placement = contract::placeRanks(capacities, total, false);
  round.workers.resize(static_cast<size_t>(total));
  for (size_t h = 0; h < used.size(); ++h) {
    const HostPlan& p = *used[h];
    round.hosts.push_back(p.host);
    for (int i = 0; i < p.size(); ++i) {
      const bool spawned = i >= static_cast<int>(p.kept.size());
      const int rank = placement.hostRanks[h][static_cast<size_t>(i)];
      const contract::RankPlacement& r = placement.ranks[static_cast<size_t>(rank)];
      WorkerPlace& w = round.workers[static_cast<size_t>(rank)];
      w.worker = spawned ? (*nextWorker)++ : p.kept[static_cast<size_t>(i)];
      w.host = p.host;
      w.rank = rank;
      w.localRank = r.localRank;
      w.localSize = r.localSize;
      w.crossRank = r.crossRank;
      w.crossSize = r.crossSize;
      w.spawned = spawned;
    }
  }
  return round;
}

}  // namespace hvd::agent::elastic
