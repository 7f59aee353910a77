// The arithmetic of hierarchical allreduce (HVD_HIERARCHICAL_ALLREDUCE), kept apart from NCCL so
// that it is pinned down by exhaustive unit tests.
//
// Of `count` elements on `localSize` GPUs per node:
//   1. reduce-scatter inside the node (local communicator): local rank j receives the node's sum
//      of the `shard = count / localSize` elements at offset j * shard;
//   2. allreduce of that shard across nodes (cross communicator of local rank j, or the CPU ring);
//   3. allgather inside the node, which puts every shard back at its offset.
// NCCL's reduce-scatter and allgather need equal blocks, so only `even = shard * localSize`
// elements go this way; the `leftover = count - even` elements at the end (fewer than
// localSize) take one plain allreduce over the global communicator. When count < localSize
// everything is leftover. The offsets are the ones NCCL's in-place forms expect
// (recv == send + rank * recvCount for reduce-scatter, send == recv + rank * sendCount for
// allgather), so all three steps can run in the output buffer.
//
// Averages: ncclAvg in step 1 divides by localSize and in step 2 by the number of nodes, which
// makes sum / size only because every node has the same localSize; that is also why
// hierarchical allreduce needs equal local sizes at all (hierarchicalPossible).
//
// Communicator layout. The launcher places ranks host by host (contract/placement.h): a host's
// workers have local ranks 0..localSize-1 in rank order, and a worker's cross rank is the index
// of its host among the hosts that have a worker with the same local rank. Ranks are contiguous
// per host (rank = first rank of the host + local rank) only without oversubscription: ranks
// beyond the slots go round-robin, one per host (-H a:1,b:1 -np 4 puts 0,2 on a and 1,3 on b).
// So the layout is derived from every rank's (local rank, local size, cross rank), which each
// worker knows, never from the formula.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace hvd::gpu {

struct HierarchicalPlan {
  size_t count = 0;        // elements of the whole allreduce
  size_t shard = 0;        // count / localSize: elements each local rank owns
  size_t even = 0;         // shard * localSize: elements handled hierarchically, [0, even)
  size_t ownedOffset = 0;  // localRank * shard: where this local rank's shard starts
  size_t leftover = 0;     // count - even: elements allreduced globally, [even, count)
};

// Throws hvd::InvalidArgumentError unless localSize >= 1 and 0 <= localRank < localSize.
HierarchicalPlan hierarchicalPlan(size_t count, int localRank, int localSize);

// What one worker knows about its place (HVD_LOCAL_RANK, HVD_LOCAL_SIZE, HVD_CROSS_RANK).
struct RankPlace {
  int localRank = 0;
  int localSize = 1;
  int crossRank = 0;
};

// The global ranks on each host, in host order, each host's in local-rank order (so
// hosts[k][j] is the rank with local rank j on host k), from the places of ranks 0..n-1.
// Throws hvd::InvalidArgumentError when the places do not describe such a layout (a missing or
// duplicate local rank, local sizes that disagree on one host, cross ranks with gaps).
std::vector<std::vector<int>> ranksByHost(const std::vector<RankPlace>& places);

// The layout the launcher makes without oversubscription: host k holds localSizes[k]
// consecutive ranks, starting after those of hosts 0..k-1.
std::vector<std::vector<int>> contiguousHosts(const std::vector<int>& localSizes);

// Members of host `node`'s local communicator, in NCCL rank order (NCCL rank = local rank).
std::vector<int> localCommMembers(const std::vector<std::vector<int>>& hosts, int node);

// Members of the cross communicator of local rank `localRank`: that local rank's worker on
// every host that has one, in host order (NCCL rank = cross rank). Empty if no host has one.
std::vector<int> crossCommMembers(const std::vector<std::vector<int>>& hosts, int localRank);

// Number of ranks on each host, in host order.
std::vector<int> localSizes(const std::vector<std::vector<int>>& hosts);

// True when every host has the same number of ranks (and there is at least one). Otherwise
// sets *why (when not null), e.g. "hosts have different numbers of ranks (2, 3)".
bool hierarchicalPossible(const std::vector<int>& localSizes, std::string* why);

}  // namespace hvd::gpu
