// Rank placement: rank, host, local rank/size and cross rank/size per docs/architecture.md "Terms".
// Every expected table below was worked out by hand from the definitions, not printed from the
// code.
#include "contract/placement.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <utility>

#include "hvd/error.hpp"

namespace hvd::contract {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Columns: rank, hostIndex, localRank, localSize, crossRank, crossSize.
RankPlacement row(int rank, int host, int localRank, int localSize, int crossRank, int crossSize) {
  return RankPlacement{rank, host, localRank, localSize, crossRank, crossSize};
}

std::string errorOf(const std::vector<HostCapacity>& hosts, int np, bool oversubscribe) {
  try {
    placeRanks(hosts, np, oversubscribe);
  } catch (const InvalidArgumentError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Placement, OneTwoThreeSlotsWithNp6GivesTheDesignTable) {
  // a holds rank 0; b ranks 1-2; c ranks 3-5. Local rank 0 exists on a, b, c (cross size 3);
  // local rank 1 on b and c (2); local rank 2 only on c (1).
  const Placement p = placeRanks({{"a", 1}, {"b", 2}, {"c", 3}}, 6, false);
  EXPECT_THAT(p.ranks,
              ElementsAre(row(0, 0, 0, 1, 0, 3), row(1, 1, 0, 2, 1, 3), row(2, 1, 1, 2, 0, 2),
                          row(3, 2, 0, 3, 2, 3), row(4, 2, 1, 3, 1, 2), row(5, 2, 2, 3, 0, 1)));
  EXPECT_THAT(p.hostRanks, ElementsAre(ElementsAre(0), ElementsAre(1, 2), ElementsAre(3, 4, 5)));
}

TEST(Placement, HeterogeneousSlotsWithFewerRanksFillTheFirstHostFirst) {
  // a:4,b:4 np 5: a is full (ranks 0-3), b gets rank 4 only. Local rank 0 is on both hosts.
  const Placement p = placeRanks({{"a", 4}, {"b", 4}}, 5, false);
  EXPECT_THAT(p.ranks,
              ElementsAre(row(0, 0, 0, 4, 0, 2), row(1, 0, 1, 4, 0, 1), row(2, 0, 2, 4, 0, 1),
                          row(3, 0, 3, 4, 0, 1), row(4, 1, 0, 1, 1, 2)));
  EXPECT_THAT(p.hostRanks, ElementsAre(ElementsAre(0, 1, 2, 3), ElementsAre(4)));
}

TEST(Placement, HostsLeftWithoutRanksAreNotCountedInCrossSize) {
  // c gets no rank, so it must not count as a node holding local rank 0.
  const Placement p = placeRanks({{"a", 2}, {"b", 2}, {"c", 2}}, 3, false);
  EXPECT_THAT(p.ranks,
              ElementsAre(row(0, 0, 0, 2, 0, 2), row(1, 0, 1, 2, 0, 1), row(2, 1, 0, 1, 1, 2)));
  ASSERT_EQ(p.hostRanks.size(), 3u);
  EXPECT_TRUE(p.hostRanks[2].empty());
}

TEST(Placement, ExactFitUsesEverySlot) {
  const Placement p = placeRanks({{"a", 2}, {"b", 2}}, 4, false);
  EXPECT_THAT(p.ranks, ElementsAre(row(0, 0, 0, 2, 0, 2), row(1, 0, 1, 2, 0, 2),
                                   row(2, 1, 0, 2, 1, 2), row(3, 1, 1, 2, 1, 2)));
}

TEST(Placement, OversubscribeContinuesRoundRobinAfterAllSlotsAreFull) {
  // Slots: r0 -> a, r1 r2 -> b. Then one per host in order: r3 -> a, r4 -> b, r5 -> a.
  // a holds 0,3,5 and b holds 1,2,4 (local ranks follow rank order on each host).
  const Placement p = placeRanks({{"a", 1}, {"b", 2}}, 6, true);
  EXPECT_THAT(p.ranks,
              ElementsAre(row(0, 0, 0, 3, 0, 2), row(1, 1, 0, 3, 1, 2), row(2, 1, 1, 3, 1, 2),
                          row(3, 0, 1, 3, 0, 2), row(4, 1, 2, 3, 1, 2), row(5, 0, 2, 3, 0, 2)));
  EXPECT_THAT(p.hostRanks, ElementsAre(ElementsAre(0, 3, 5), ElementsAre(1, 2, 4)));
}

TEST(Placement, OversubscribeOnOneHostPutsEveryRankThere) {
  const Placement p = placeRanks({{"localhost", 2}}, 5, true);
  EXPECT_THAT(p.ranks,
              ElementsAre(row(0, 0, 0, 5, 0, 1), row(1, 0, 1, 5, 0, 1), row(2, 0, 2, 5, 0, 1),
                          row(3, 0, 3, 5, 0, 1), row(4, 0, 4, 5, 0, 1)));
}

TEST(Placement, OversubscribeFlagChangesNothingWhenRanksFitTheSlots) {
  const std::vector<HostCapacity> hosts = {{"a", 4}, {"b", 4}};
  EXPECT_EQ(placeRanks(hosts, 5, true).ranks, placeRanks(hosts, 5, false).ranks);
}

TEST(Placement, LocalAndCrossRanksAreConsistentForManyShapes) {
  // For every shape: (localRank, crossRank) pairs are unique, cross ranks of one local rank are
  // exactly 0..crossSize-1, and localSize matches the host's rank list.
  for (int np = 1; np <= 12; ++np) {
    for (bool over : {false, true}) {
      const std::vector<HostCapacity> hosts = {{"a", 3}, {"b", 1}, {"c", 2}, {"d", 4}};
      if (!over && np > 10) continue;
      const Placement p = placeRanks(hosts, np, over);
      ASSERT_EQ(static_cast<int>(p.ranks.size()), np);
      std::set<std::pair<int, int>> pairs;
      for (const RankPlacement& r : p.ranks) {
        EXPECT_EQ(r.localSize, static_cast<int>(p.hostRanks[r.hostIndex].size()));
        EXPECT_EQ(p.hostRanks[r.hostIndex][r.localRank], r.rank);
        EXPECT_LT(r.crossRank, r.crossSize);
        EXPECT_TRUE(pairs.insert({r.localRank, r.crossRank}).second) << "np " << np;
      }
      for (const RankPlacement& r : p.ranks) {
        for (int c = 0; c < r.crossSize; ++c) EXPECT_TRUE(pairs.count({r.localRank, c}));
      }
    }
  }
}

TEST(Placement, TooManyRanksListsTheSlotsPerHost) {
  EXPECT_EQ(errorOf({{"a", 1}, {"b", 2}, {"c", 3}}, 7, false),
            "-np 7 exceeds the 6 slots of 3 hosts (a:1, b:2, c:3); add hosts or pass "
            "--oversubscribe");
  EXPECT_EQ(errorOf({{"a", 1}}, 2, false),
            "-np 2 exceeds the 1 slot of 1 host (a:1); add hosts or pass --oversubscribe");
}

TEST(Placement, TooManyRanksOnManyHostsShortensTheList) {
  std::vector<HostCapacity> hosts;
  for (int i = 0; i < 20; ++i) hosts.push_back({"n" + std::to_string(i), 1});
  const std::string message = errorOf(hosts, 21, false);
  EXPECT_THAT(message, HasSubstr("the 20 slots of 20 hosts (n0:1, n1:1,"));
  EXPECT_THAT(message, HasSubstr("n15:1, ... and 4 more)"));
  EXPECT_THAT(message, ::testing::Not(HasSubstr("n16")));
}

TEST(Placement, NpBelowOneIsRefused) {
  EXPECT_EQ(errorOf({{"a", 1}}, 0, false), "-np must be at least 1, got 0");
  EXPECT_EQ(errorOf({{"a", 1}}, -3, true), "-np must be at least 1, got -3");
}

TEST(Placement, NoHostsIsRefused) {
  EXPECT_EQ(errorOf({}, 2, true), "no hosts to place 2 ranks on");
}

TEST(Placement, HostWithoutSlotsIsRefused) {
  EXPECT_EQ(errorOf({{"a", 2}, {"b", 0}}, 1, false),
            "host 'b' has 0 slots; every host needs at least 1");
  EXPECT_THAT(errorOf({{"a", -1}}, 1, true), HasSubstr("host 'a' has -1 slots"));
}

TEST(Placement, DuplicateHostIsRefused) {
  EXPECT_EQ(errorOf({{"a", 2}, {"b", 1}, {"a", 2}}, 1, false),
            "host 'a' appears twice; each host must be listed once");
}

}  // namespace
}  // namespace hvd::contract
