// Who works where in each round of an elastic job (DESIGN.md "Elastic training"; Horovod's
// ElasticDriver._update_host_assignments and HostManager.order_available_hosts).
//
// The workers that survive a round change keep running (they hold the training state the new
// workers sync from), so a round is planned from the last one rather than from scratch:
//   * hosts of the last round that are still available come first, in their old order, so the
//     oldest workers keep the lowest ranks and rank 0 stays put while its host lives;
//   * on each, its alive workers keep their order (by old rank); if its slots shrank, its
//     highest-ranked workers are removed; if they grew, new workers are started after them;
//   * then the hosts not in the last round, in discovery order, each with new workers for its
//     slots (Horovod appends them in set order; discovery order makes the plan repeatable);
//   * with maxNp, new slots are dropped from the end until the total fits; survivors never are,
//     since removing a worker that holds state gains nothing over not starting one.
// Ranks, local and cross ranks then follow contract/placement.h from the hosts' worker counts:
// ranks contiguous per host, in host order.
//
// Workers are known by ids that are never reused, so a late message from a removed worker can
// never be mistaken for one of its successor.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "agent/elastic/discovery.h"

namespace hvd::agent::elastic {

struct WorkerPlace {
  int worker = 0;  // id, unique within the job
  std::string host;
  int rank = 0, localRank = 0, localSize = 0, crossRank = 0, crossSize = 0;
  bool spawned = false;  // new in this round (to be started) rather than kept from the last

  bool operator==(const WorkerPlace& o) const {
    return worker == o.worker && host == o.host && rank == o.rank && localRank == o.localRank &&
           localSize == o.localSize && crossRank == o.crossRank && crossSize == o.crossSize &&
           spawned == o.spawned;
  }
};

struct Round {
  int number = 0;
  std::vector<std::string> hosts;    // hosts with a worker, in rank order
  std::vector<WorkerPlace> workers;  // by rank: workers[r].rank == r
  // Workers of the last round that were alive and are left out of this one (their host went
  // away or shrank), in their old rank order: they are to be told they were removed. Workers
  // that died are not listed: there is no one to tell.
  std::vector<int> removed;

  int slots() const { return static_cast<int>(workers.size()); }
  // Workers kept from the last round. A round after the first with none cannot go on: no worker
  // holds the state to sync from (Horovod fails the job then, kNoSurvivorsMessage).
  int survivors() const;
};

// Horovod's words when no worker of the last round is left.
inline constexpr const char* kNoSurvivorsMessage =
    "No hosts from previous set remaining, unable to broadcast state.";

// Plans the round after `previous` (nullptr: round 0).
// `alive`: ids of previous's workers still running (others are ignored).
// `available`: the hosts usable now, blacklisted ones already left out, in discovery order; a
//   host with 0 slots counts as absent.
// `maxNp`: the most workers (0: no bound).
// `nextWorker`: the id for the next new worker, advanced for each one created.
// A round may come out with no workers (no host available): the caller waits for minNp slots
// before using one. Throws hvd::InvalidArgumentError for a host listed twice in `available`,
// negative slots or maxNp, or a null nextWorker.
Round planRound(const Round* previous, const std::set<int>& alive,
                const std::vector<DiscoveredHost>& available, int maxNp, int* nextWorker);

}  // namespace hvd::agent::elastic
