// Hierarchical allreduce arithmetic and communicator layout: exhaustive small cases, and a
// simulation of the three steps over the communicators the layout names.
#include "gpu/hierarchical.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "hvd/error.hpp"

namespace hvd::gpu {
namespace {

using Hosts = std::vector<std::vector<int>>;

// The places hvd's launcher gives the ranks of `hosts` (agent/placement.cc's definitions).
std::vector<RankPlace> placesOf(const Hosts& hosts) {
  size_t n = 0;
  for (const auto& host : hosts) n += host.size();
  std::vector<RankPlace> places(n);
  for (size_t k = 0; k < hosts.size(); ++k) {
    for (size_t j = 0; j < hosts[k].size(); ++j) {
      int crossRank = 0;
      for (size_t earlier = 0; earlier < k; ++earlier) {
        if (hosts[earlier].size() > j) ++crossRank;
      }
      places[hosts[k][j]] = {static_cast<int>(j), static_cast<int>(hosts[k].size()), crossRank};
    }
  }
  return places;
}

TEST(HierarchicalPlan, OwnedShardsPartitionTheEvenPartAndTheRestIsLeftover) {
  for (size_t count = 0; count <= 50; ++count) {
    for (int localSize = 1; localSize <= 5; ++localSize) {
      SCOPED_TRACE("count " + std::to_string(count) + " localSize " + std::to_string(localSize));
      std::vector<int> owners(count, 0);
      size_t even = 0;
      for (int localRank = 0; localRank < localSize; ++localRank) {
        const HierarchicalPlan p = hierarchicalPlan(count, localRank, localSize);
        EXPECT_EQ(p.count, count);
        EXPECT_EQ(p.shard, count / localSize);
        EXPECT_EQ(p.even, p.shard * localSize);
        EXPECT_EQ(p.even % localSize, 0u);
        EXPECT_EQ(p.even + p.leftover, count);
        EXPECT_LT(p.leftover, static_cast<size_t>(localSize));
        EXPECT_EQ(p.ownedOffset, localRank * p.shard);
        EXPECT_LE(p.ownedOffset + p.shard, p.even);
        for (size_t i = p.ownedOffset; i < p.ownedOffset + p.shard; ++i) ++owners[i];
        if (localRank == 0) even = p.even;
        EXPECT_EQ(p.even, even);  // every local rank agrees on the split
      }
      for (size_t i = 0; i < count; ++i) {
        EXPECT_EQ(owners[i], i < even ? 1 : 0) << "element " << i;
      }
    }
  }
}

TEST(HierarchicalPlan, FewerElementsThanLocalRanksAreAllLeftover) {
  const HierarchicalPlan p = hierarchicalPlan(3, 2, 4);
  EXPECT_EQ(p.shard, 0u);
  EXPECT_EQ(p.even, 0u);
  EXPECT_EQ(p.leftover, 3u);
}

TEST(HierarchicalPlan, RejectsAPlaceThatIsNotOnAHost) {
  EXPECT_THROW(hierarchicalPlan(10, 0, 0), InvalidArgumentError);
  EXPECT_THROW(hierarchicalPlan(10, -1, 2), InvalidArgumentError);
  EXPECT_THROW(hierarchicalPlan(10, 2, 2), InvalidArgumentError);
}

TEST(HierarchicalLayout, TwoHostsOfTwo) {
  const Hosts hosts = contiguousHosts({2, 2});
  EXPECT_EQ(hosts, (Hosts{{0, 1}, {2, 3}}));
  EXPECT_EQ(localCommMembers(hosts, 0), (std::vector<int>{0, 1}));
  EXPECT_EQ(localCommMembers(hosts, 1), (std::vector<int>{2, 3}));
  EXPECT_EQ(crossCommMembers(hosts, 0), (std::vector<int>{0, 2}));
  EXPECT_EQ(crossCommMembers(hosts, 1), (std::vector<int>{1, 3}));
  EXPECT_EQ(ranksByHost(placesOf(hosts)), hosts);
}

TEST(HierarchicalLayout, ThreeHostsOfFour) {
  const Hosts hosts = contiguousHosts({4, 4, 4});
  const std::vector<RankPlace> places = placesOf(hosts);
  EXPECT_EQ(ranksByHost(places), hosts);
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(localCommMembers(hosts, k),
              (std::vector<int>{4 * k, 4 * k + 1, 4 * k + 2, 4 * k + 3}));
  }
  for (int j = 0; j < 4; ++j) {
    const std::vector<int> cross = crossCommMembers(hosts, j);
    EXPECT_EQ(cross, (std::vector<int>{j, 4 + j, 8 + j}));
    // A member's NCCL rank in the cross communicator is its cross rank, in the local one its
    // local rank.
    for (size_t c = 0; c < cross.size(); ++c) {
      EXPECT_EQ(places[cross[c]].crossRank, static_cast<int>(c));
      EXPECT_EQ(places[cross[c]].localRank, j);
    }
  }
  EXPECT_TRUE(crossCommMembers(hosts, 4).empty());
  EXPECT_THROW(localCommMembers(hosts, 3), InvalidArgumentError);
  std::string why = "untouched";
  EXPECT_TRUE(hierarchicalPossible(localSizes(hosts), &why));
  EXPECT_EQ(why, "untouched");
}

TEST(HierarchicalLayout, OversubscribedRanksAreNotContiguousPerHost) {
  // hvdrun -H a:1,b:1 -np 4 --oversubscribe: ranks 0 and 2 on a, 1 and 3 on b.
  const std::vector<RankPlace> places = {{0, 2, 0}, {0, 2, 1}, {1, 2, 0}, {1, 2, 1}};
  const Hosts hosts = ranksByHost(places);
  EXPECT_EQ(hosts, (Hosts{{0, 2}, {1, 3}}));
  EXPECT_EQ(crossCommMembers(hosts, 0), (std::vector<int>{0, 1}));
  EXPECT_EQ(crossCommMembers(hosts, 1), (std::vector<int>{2, 3}));
  EXPECT_TRUE(hierarchicalPossible(localSizes(hosts), nullptr));
}

TEST(HierarchicalLayout, UnevenSlotsAreRefusedWithTheSizes) {
  // hvdrun -H a:2,b:3 -np 5.
  const Hosts hosts = ranksByHost({{0, 2, 0}, {1, 2, 0}, {0, 3, 1}, {1, 3, 1}, {2, 3, 0}});
  EXPECT_EQ(hosts, (Hosts{{0, 1}, {2, 3, 4}}));
  EXPECT_EQ(crossCommMembers(hosts, 1), (std::vector<int>{1, 3}));
  EXPECT_EQ(crossCommMembers(hosts, 2), (std::vector<int>{4}));
  std::string why;
  EXPECT_FALSE(hierarchicalPossible(localSizes(hosts), &why));
  EXPECT_EQ(why, "hosts have different numbers of ranks (2, 3)");
  EXPECT_FALSE(hierarchicalPossible({}, &why));
  EXPECT_EQ(why, "there are no hosts");
  std::vector<int> many(20, 2);
  many.back() = 3;
  EXPECT_FALSE(hierarchicalPossible(many, &why));
  EXPECT_EQ(why,
            "hosts have different numbers of ranks (2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, "
            "2, ... and 4 more)");
}

TEST(HierarchicalLayout, RanksByHostRoundTripsEveryLayoutOfUpToFourHosts) {
  // Every list of 1..4 hosts with 1..3 ranks each, ranks contiguous or in reverse order.
  for (int hostCount = 1; hostCount <= 4; ++hostCount) {
    std::vector<int> sizes(hostCount, 1);
    while (true) {
      for (bool reversed : {false, true}) {
        Hosts hosts = contiguousHosts(sizes);
        int n = 0;
        for (int s : sizes) n += s;
        if (reversed) {
          for (auto& host : hosts) {
            for (int& r : host) r = n - 1 - r;
          }
        }
        EXPECT_EQ(ranksByHost(placesOf(hosts)), hosts);
        EXPECT_EQ(localSizes(hosts), sizes);
      }
      int k = 0;
      while (k < hostCount && sizes[k] == 3) sizes[k++] = 1;
      if (k == hostCount) break;
      ++sizes[k];
    }
  }
}

TEST(HierarchicalLayout, InconsistentPlacesAreRejected) {
  // Two ranks claim local rank 0, cross rank 0.
  EXPECT_THROW(ranksByHost({{0, 1, 0}, {0, 1, 0}}), InvalidArgumentError);
  // Cross ranks with a gap (no host 0).
  EXPECT_THROW(ranksByHost({{0, 1, 1}}), InvalidArgumentError);
  // Local sizes that disagree on one host.
  EXPECT_THROW(ranksByHost({{0, 2, 0}, {1, 3, 0}}), InvalidArgumentError);
  // A host of two with only local rank 0.
  EXPECT_THROW(ranksByHost({{0, 2, 0}}), InvalidArgumentError);
  // A local rank outside its local size.
  EXPECT_THROW(ranksByHost({{2, 2, 0}}), InvalidArgumentError);
}

// The three steps of hierarchical allreduce (sum), plus the leftover's global allreduce, run on
// plain vectors over the communicators the layout names, give every rank the global sum.
void expectHierarchicalSumIsTheSum(const Hosts& hosts, size_t count) {
  SCOPED_TRACE(std::to_string(hosts.size()) + " hosts of " + std::to_string(hosts[0].size()) +
               ", count " + std::to_string(count));
  const int localSize = static_cast<int>(hosts[0].size());
  const size_t n = hosts.size() * hosts[0].size();
  std::vector<std::vector<int64_t>> data(n, std::vector<int64_t>(count));
  std::vector<int64_t> expected(count, 0);
  for (size_t r = 0; r < n; ++r) {
    for (size_t i = 0; i < count; ++i) {
      data[r][i] = static_cast<int64_t>(r * 1000 + i);
      expected[i] += data[r][i];
    }
  }
  const HierarchicalPlan p = hierarchicalPlan(count, 0, localSize);
  std::vector<std::vector<int64_t>> out = data;
  // 1. Reduce-scatter in each node: local rank j gets the node's sum of shard j.
  for (size_t k = 0; k < hosts.size(); ++k) {
    const std::vector<int> local = localCommMembers(hosts, static_cast<int>(k));
    for (int j = 0; j < localSize; ++j) {
      const HierarchicalPlan mine = hierarchicalPlan(count, j, localSize);
      for (size_t i = mine.ownedOffset; i < mine.ownedOffset + mine.shard; ++i) {
        int64_t sum = 0;
        for (int member : local) sum += data[member][i];
        out[local[j]][i] = sum;
      }
    }
  }
  // 2. Allreduce of each shard across nodes.
  for (int j = 0; j < localSize; ++j) {
    const HierarchicalPlan mine = hierarchicalPlan(count, j, localSize);
    const std::vector<int> cross = crossCommMembers(hosts, j);
    for (size_t i = mine.ownedOffset; i < mine.ownedOffset + mine.shard; ++i) {
      int64_t sum = 0;
      for (int member : cross) sum += out[member][i];
      for (int member : cross) out[member][i] = sum;
    }
  }
  // 3. Allgather in each node.
  for (size_t k = 0; k < hosts.size(); ++k) {
    const std::vector<int> local = localCommMembers(hosts, static_cast<int>(k));
    for (int j = 0; j < localSize; ++j) {
      const HierarchicalPlan owner = hierarchicalPlan(count, j, localSize);
      for (int member : local) {
        for (size_t i = owner.ownedOffset; i < owner.ownedOffset + owner.shard; ++i) {
          out[member][i] = out[local[j]][i];
        }
      }
    }
  }
  // The leftover: a plain allreduce over every rank.
  for (size_t i = p.even; i < count; ++i) {
    int64_t sum = 0;
    for (size_t r = 0; r < n; ++r) sum += data[r][i];
    for (size_t r = 0; r < n; ++r) out[r][i] = sum;
  }
  for (size_t r = 0; r < n; ++r) EXPECT_EQ(out[r], expected) << "rank " << r;
}

TEST(HierarchicalAllreduce, StepsOverTheLayoutGiveTheGlobalSum) {
  for (size_t count : {0, 1, 3, 4, 7, 12, 13, 50}) {
    expectHierarchicalSumIsTheSum(contiguousHosts({2, 2}), count);
    expectHierarchicalSumIsTheSum(contiguousHosts({4, 4, 4}), count);
    expectHierarchicalSumIsTheSum(contiguousHosts({5}), count);
    expectHierarchicalSumIsTheSum(contiguousHosts({1, 1, 1}), count);
    expectHierarchicalSumIsTheSum(ranksByHost({{0, 2, 0}, {0, 2, 1}, {1, 2, 0}, {1, 2, 1}}), count);
  }
}

}  // namespace
}  // namespace hvd::gpu
