// Hierarchical allreduce arithmetic and communicator layout (see hierarchical.h).
#include "gpu/hierarchical.h"

#include <algorithm>

#include "hvd/error.hpp"

namespace hvd::gpu {
namespace {

// Long lists are cut in messages: the user needs the shape, not a thousand entries.
constexpr size_t kListedInMessages = 16;

std::string rankText(size_t rank) { return "rank " + std::to_string(rank); }

}  // namespace

HierarchicalPlan hierarchicalPlan(size_t count, int localRank, int localSize) {
  if (localSize < 1 || localRank < 0 || localRank >= localSize) {
    throw InvalidArgumentError("hierarchical allreduce: local rank " + std::to_string(localRank) +
                               " of local size " + std::to_string(localSize) +
                               " is not a place on a host");
  }
  HierarchicalPlan p;
  p.count = count;
  p.shard = count / static_cast<size_t>(localSize);
  p.even = p.shard * static_cast<size_t>(localSize);
  p.ownedOffset = static_cast<size_t>(localRank) * p.shard;
  p.leftover = count - p.even;
  return p;
}

std::vector<std::vector<int>> ranksByHost(const std::vector<RankPlace>& places) {
  // Hosts are numbered by the cross ranks of their local rank 0 (every host has one); the hosts
  // with a local rank j are, in host order, those with more than j ranks, and a rank's cross
  // rank indexes that list.
  int maxLocalSize = 0;
  for (size_t r = 0; r < places.size(); ++r) {
    const RankPlace& p = places[r];
    if (p.localSize < 1 || p.localRank < 0 || p.localRank >= p.localSize || p.crossRank < 0) {
      throw InvalidArgumentError(rankText(r) + " has local rank " + std::to_string(p.localRank) +
                                 " of local size " + std::to_string(p.localSize) +
                                 " and cross rank " + std::to_string(p.crossRank) +
                                 ", which is not a place on a host");
    }
    maxLocalSize = std::max(maxLocalSize, p.localSize);
  }
  // byLocalRank[j][c] = the rank with local rank j and cross rank c (-1 while unseen).
  std::vector<std::vector<int>> byLocalRank(maxLocalSize);
  for (size_t r = 0; r < places.size(); ++r) {
    std::vector<int>& column = byLocalRank[places[r].localRank];
    const size_t c = static_cast<size_t>(places[r].crossRank);
    if (c >= places.size()) {
      throw InvalidArgumentError(rankText(r) + " has cross rank " + std::to_string(c) +
                                 " in a job of " + std::to_string(places.size()) + " ranks");
    }
    if (column.size() <= c) column.resize(c + 1, -1);
    if (column[c] >= 0) {
      throw InvalidArgumentError("ranks " + std::to_string(column[c]) + " and " +
                                 std::to_string(r) + " both have local rank " +
                                 std::to_string(places[r].localRank) + " and cross rank " +
                                 std::to_string(c));
    }
    column[c] = static_cast<int>(r);
  }

  std::vector<std::vector<int>> hosts;
  for (int j = 0; j < maxLocalSize; ++j) {
    // Hosts with more than j ranks, in host order (the first pass makes them all).
    std::vector<size_t> hostsWithJ;
    for (size_t k = 0; k < hosts.size(); ++k) {
      if (static_cast<int>(hosts[k].size()) == j && places[hosts[k][0]].localSize > j) {
        hostsWithJ.push_back(k);
      }
    }
    const std::vector<int>& column = byLocalRank[j];
    if (j > 0 && column.size() != hostsWithJ.size()) {
      throw InvalidArgumentError(std::to_string(hostsWithJ.size()) + " hosts have a local rank " +
                                 std::to_string(j) + " but " + std::to_string(column.size()) +
                                 " cross ranks are in use");
    }
    for (size_t c = 0; c < column.size(); ++c) {
      const int r = column[c];
      if (r < 0) {
        throw InvalidArgumentError("no rank has local rank " + std::to_string(j) +
                                   " and cross rank " + std::to_string(c));
      }
      if (j == 0) {
        hosts.push_back({r});
        continue;
      }
      std::vector<int>& host = hosts[hostsWithJ[c]];
      if (places[r].localSize != places[host[0]].localSize) {
        throw InvalidArgumentError(rankText(r) + " has local size " +
                                   std::to_string(places[r].localSize) + " but " +
                                   rankText(host[0]) + " on the same host has " +
                                   std::to_string(places[host[0]].localSize));
      }
      host.push_back(r);
    }
  }
  return hosts;
}

std::vector<std::vector<int>> contiguousHosts(const std::vector<int>& localSizes) {
  std::vector<std::vector<int>> hosts;
  int next = 0;
  for (int size : localSizes) {
    std::vector<int>& host = hosts.emplace_back();
    for (int j = 0; j < size; ++j) host.push_back(next++);
  }
  return hosts;
}

std::vector<int> localCommMembers(const std::vector<std::vector<int>>& hosts, int node) {
  if (node < 0 || static_cast<size_t>(node) >= hosts.size()) {
    throw InvalidArgumentError("host " + std::to_string(node) + " does not exist (the job has " +
                               std::to_string(hosts.size()) + " hosts)");
  }
  return hosts[node];
}

std::vector<int> crossCommMembers(const std::vector<std::vector<int>>& hosts, int localRank) {
  std::vector<int> members;
  if (localRank < 0) return members;
  for (const std::vector<int>& host : hosts) {
    if (static_cast<size_t>(localRank) < host.size()) members.push_back(host[localRank]);
  }
  return members;
}

std::vector<int> localSizes(const std::vector<std::vector<int>>& hosts) {
  std::vector<int> sizes;
  sizes.reserve(hosts.size());
  for (const std::vector<int>& host : hosts) sizes.push_back(static_cast<int>(host.size()));
  return sizes;
}

bool hierarchicalPossible(const std::vector<int>& localSizes, std::string* why) {
  std::string reason;
  if (localSizes.empty()) {
    reason = "there are no hosts";
  } else if (std::any_of(localSizes.begin(), localSizes.end(),
                         [&](int s) { return s != localSizes[0]; })) {
    reason = "hosts have different numbers of ranks (";
    for (size_t k = 0; k < localSizes.size() && k < kListedInMessages; ++k) {
      if (k > 0) reason += ", ";
      reason += std::to_string(localSizes[k]);
    }
    if (localSizes.size() > kListedInMessages) {
      reason += ", ... and " + std::to_string(localSizes.size() - kListedInMessages) + " more";
    }
    reason += ")";
  } else {
    return true;
  }
  if (why != nullptr) *why = reason;
  return false;
}

}  // namespace hvd::gpu
