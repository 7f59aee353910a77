// Rank placement: which host runs which rank, and the local/cross ranks every worker is told
// (docs/architecture.md "Terms"). The job coordinator calls this once hosts' slot counts are
// resolved; it is pure logic so that the numbers users' scripts depend on are pinned down by unit
// tests.
//
// Ranks fill hosts in the order given (host 0's slots, then host 1's, ...), as mpirun and Horovod
// do, so neighbouring ranks share a host and the ring crosses the network as few times as
// possible. With oversubscription, ranks beyond the total slots go round-robin, one per host in
// host order, so the extra load is spread evenly.
#pragma once

#include <string>
#include <vector>

namespace hvd::contract {

// A host with its slot count already resolved (from -H, the hostfile, or its GPU count).
struct HostCapacity {
  std::string host;
  int slots = 0;
};

// The identity of one worker. `hostIndex` indexes the hosts given to placeRanks.
struct RankPlacement {
  int rank = 0;
  int hostIndex = 0;
  int localRank = 0;  // index of this worker among its host's workers, in rank order
  int localSize = 0;  // workers on this host
  int crossRank = 0;  // index of this host among the hosts that have a worker with this localRank
  int crossSize = 0;  // number of hosts that have a worker with this localRank

  bool operator==(const RankPlacement& o) const {
    return rank == o.rank && hostIndex == o.hostIndex && localRank == o.localRank &&
           localSize == o.localSize && crossRank == o.crossRank && crossSize == o.crossSize;
  }
};

struct Placement {
  std::vector<RankPlacement> ranks;         // ranks[r].rank == r
  std::vector<std::vector<int>> hostRanks;  // per host (same order as the input), ascending
                                            // ranks; empty for a host that got none
};

// Places `np` ranks on `hosts`. Throws hvd::InvalidArgumentError when there are no hosts, a host
// has fewer than 1 slot or appears twice, np < 1, or np exceeds the total slots and
// `oversubscribe` is false (the message lists the slots per host).
Placement placeRanks(const std::vector<HostCapacity>& hosts, int np, bool oversubscribe);

}  // namespace hvd::contract
