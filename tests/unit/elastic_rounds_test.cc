// Rank assignment across the rounds of an elastic job (agent/elastic/rounds.h): survivors keep
// their hosts' order and their own, new hosts join at the end in discovery order, slots that
// grow or shrink add or remove workers at the end of their host, maxNp drops new slots only,
// and worker ids are never reused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agent/elastic/rounds.h"
#include "hvd/error.hpp"

namespace hvd::agent::elastic {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// "worker@host rank localRank/localSize crossRank/crossSize", with " new" for a spawned worker.
std::vector<std::string> describe(const Round& round) {
  std::vector<std::string> out;
  for (const WorkerPlace& w : round.workers) {
    out.push_back(std::to_string(w.worker) + "@" + w.host + " " + std::to_string(w.rank) + " " +
                  std::to_string(w.localRank) + "/" + std::to_string(w.localSize) + " " +
                  std::to_string(w.crossRank) + "/" + std::to_string(w.crossSize) +
                  (w.spawned ? " new" : ""));
  }
  return out;
}

std::set<int> everyone(const Round& round) {
  std::set<int> ids;
  for (const WorkerPlace& w : round.workers) ids.insert(w.worker);
  return ids;
}

struct RoundsTest : ::testing::Test {
  int nextWorker = 0;

  Round first(const std::vector<DiscoveredHost>& hosts, int maxNp = 0) {
    return planRound(nullptr, {}, hosts, maxNp, &nextWorker);
  }
  Round next(const Round& previous, const std::vector<DiscoveredHost>& hosts, int maxNp = 0) {
    return planRound(&previous, everyone(previous), hosts, maxNp, &nextWorker);
  }
};

TEST_F(RoundsTest, TheFirstRoundFillsHostsInOrder) {
  const Round round = first({{"a", 2}, {"b", 1}});
  EXPECT_EQ(round.number, 0);
  EXPECT_THAT(round.hosts, ElementsAre("a", "b"));
  EXPECT_THAT(describe(round),
              ElementsAre("0@a 0 0/2 0/2 new", "1@a 1 1/2 0/1 new", "2@b 2 0/1 1/2 new"));
  EXPECT_EQ(round.slots(), 3);
  EXPECT_EQ(round.survivors(), 0);
  EXPECT_THAT(round.removed, IsEmpty());
  EXPECT_EQ(nextWorker, 3);
}

TEST_F(RoundsTest, AHostThatIsGoneTakesItsWorkersAndTheRestMoveUp) {
  const Round r0 = first({{"a", 2}, {"b", 2}, {"c", 2}});
  const Round r1 = next(r0, {{"a", 2}, {"c", 2}});
  EXPECT_EQ(r1.number, 1);
  EXPECT_THAT(r1.hosts, ElementsAre("a", "c"));
  EXPECT_THAT(describe(r1),
              ElementsAre("0@a 0 0/2 0/2", "1@a 1 1/2 0/2", "4@c 2 0/2 1/2", "5@c 3 1/2 1/2"));
  EXPECT_THAT(r1.removed, ElementsAre(2, 3));
  EXPECT_EQ(r1.survivors(), 4);
  EXPECT_EQ(nextWorker, 6);
}

TEST_F(RoundsTest, ADeadWorkersSlotGetsANewWorkerAtTheEndOfItsHost) {
  const Round r0 = first({{"a", 2}, {"b", 2}});
  const Round r1 = planRound(&r0, {0, 2, 3}, {{"a", 2}, {"b", 2}}, 0, &nextWorker);
  EXPECT_THAT(describe(r1),
              ElementsAre("0@a 0 0/2 0/2", "4@a 1 1/2 0/2 new", "2@b 2 0/2 1/2", "3@b 3 1/2 1/2"));
  EXPECT_THAT(r1.removed, IsEmpty());  // worker 1 is dead: no one to tell
  EXPECT_EQ(r1.survivors(), 3);
}

TEST_F(RoundsTest, NewHostsJoinAfterTheSurvivorsInDiscoveryOrder) {
  const Round r0 = first({{"a", 2}});
  const Round r1 = next(r0, {{"c", 1}, {"a", 2}, {"b", 1}});
  EXPECT_THAT(r1.hosts, ElementsAre("a", "c", "b"));
  EXPECT_THAT(describe(r1), ElementsAre("0@a 0 0/2 0/3", "1@a 1 1/2 0/1", "2@c 2 0/1 1/3 new",
                                        "3@b 3 0/1 2/3 new"));
}

TEST_F(RoundsTest, GrownSlotsAddWorkersAfterTheHostsSurvivors) {
  const Round r0 = first({{"a", 1}, {"b", 1}});
  const Round r1 = next(r0, {{"a", 3}, {"b", 1}});
  EXPECT_THAT(describe(r1), ElementsAre("0@a 0 0/3 0/2", "2@a 1 1/3 0/1 new", "3@a 2 2/3 0/1 new",
                                        "1@b 3 0/1 1/2"));
}

TEST_F(RoundsTest, ShrunkSlotsRemoveTheHostsHighestRankedWorkers) {
  const Round r0 = first({{"a", 3}, {"b", 1}});
  const Round r1 = next(r0, {{"a", 1}, {"b", 1}});
  EXPECT_THAT(describe(r1), ElementsAre("0@a 0 0/1 0/2", "3@b 1 0/1 1/2"));
  EXPECT_THAT(r1.removed, ElementsAre(1, 2));

  // Only alive workers are kept or removed: with worker 0 dead, 1 stays and 2 goes.
  const Round r1b = planRound(&r0, {1, 2, 3}, {{"a", 1}, {"b", 1}}, 0, &nextWorker);
  EXPECT_THAT(describe(r1b), ElementsAre("1@a 0 0/1 0/2", "3@b 1 0/1 1/2"));
  EXPECT_THAT(r1b.removed, ElementsAre(2));
}

TEST_F(RoundsTest, MaxNpDropsNewSlotsFromTheEnd) {
  const Round r0 = first({{"a", 4}, {"b", 4}}, 6);
  EXPECT_THAT(r0.hosts, ElementsAre("a", "b"));
  EXPECT_EQ(r0.slots(), 6);
  EXPECT_EQ(r0.workers.back().localSize, 2);

  nextWorker = 0;
  const Round s0 = first({{"a", 2}});
  const Round s1 = next(s0, {{"a", 4}, {"b", 2}}, 5);
  EXPECT_THAT(describe(s1), ElementsAre("0@a 0 0/4 0/2", "1@a 1 1/4 0/1", "2@a 2 2/4 0/1 new",
                                        "3@a 3 3/4 0/1 new", "4@b 4 0/1 1/2 new"));
  // A new host that gets no slot is not part of the round.
  const Round s2 = next(s0, {{"a", 2}, {"b", 2}}, 2);
  EXPECT_THAT(s2.hosts, ElementsAre("a"));
  EXPECT_EQ(s2.slots(), 2);
}

TEST_F(RoundsTest, MaxNpNeverRemovesASurvivor) {
  const Round r0 = first({{"a", 2}, {"b", 2}});
  const Round r1 = next(r0, {{"a", 2}, {"b", 2}, {"c", 2}}, 2);
  EXPECT_THAT(describe(r1),
              ElementsAre("0@a 0 0/2 0/2", "1@a 1 1/2 0/2", "2@b 2 0/2 1/2", "3@b 3 1/2 1/2"));
  EXPECT_THAT(r1.removed, IsEmpty());
}

TEST_F(RoundsTest, OrderIsKeptAcrossThreeRoundsAndWorkerIdsAreNeverReused) {
  const Round r0 = first({{"a", 1}, {"b", 1}, {"c", 1}});
  // b's worker died; discovery now lists hosts in another order and adds d.
  const Round r1 = planRound(&r0, {0, 2}, {{"c", 1}, {"b", 1}, {"d", 1}, {"a", 1}}, 0, &nextWorker);
  EXPECT_THAT(r1.hosts, ElementsAre("a", "b", "c", "d"));
  EXPECT_THAT(describe(r1), ElementsAre("0@a 0 0/1 0/4", "3@b 1 0/1 1/4 new", "2@c 2 0/1 2/4",
                                        "4@d 3 0/1 3/4 new"));
  // a is gone (rank 0 moves to the oldest host left), e joins.
  const Round r2 = next(r1, {{"e", 1}, {"d", 1}, {"c", 1}, {"b", 1}});
  EXPECT_EQ(r2.number, 2);
  EXPECT_THAT(r2.hosts, ElementsAre("b", "c", "d", "e"));
  EXPECT_THAT(describe(r2),
              ElementsAre("3@b 0 0/1 0/4", "2@c 1 0/1 1/4", "4@d 2 0/1 2/4", "5@e 3 0/1 3/4 new"));
  EXPECT_THAT(r2.removed, ElementsAre(0));
  // Every worker ever created has its own id: 0..5, six workers.
  std::set<int> ids;
  for (const Round* r : {&r0, &r1, &r2}) {
    for (const WorkerPlace& w : r->workers) {
      if (w.spawned) {
        EXPECT_TRUE(ids.insert(w.worker).second) << "id " << w.worker << " reused";
      }
    }
  }
  EXPECT_THAT(ids, ElementsAre(0, 1, 2, 3, 4, 5));
  EXPECT_EQ(nextWorker, 6);
}

TEST_F(RoundsTest, HostsMatchCaseInsensitivelyAndKeepTheirFirstSpelling) {
  const Round r0 = first({{"Node1", 1}});
  const Round r1 = next(r0, {{"node1", 2}});
  EXPECT_THAT(describe(r1), ElementsAre("0@Node1 0 0/2 0/1", "1@Node1 1 1/2 0/1 new"));
}

TEST_F(RoundsTest, WithNoHostLeftTheRoundIsEmptyOrHasNoSurvivor) {
  const Round r0 = first({{"a", 1}});
  const Round empty = next(r0, {});
  EXPECT_EQ(empty.slots(), 0);
  EXPECT_THAT(empty.hosts, IsEmpty());
  EXPECT_THAT(empty.removed, ElementsAre(0));

  const Round elsewhere = next(r0, {{"b", 1}, {"c", 0}});
  EXPECT_THAT(describe(elsewhere), ElementsAre("1@b 0 0/1 0/1 new"));
  EXPECT_EQ(elsewhere.survivors(), 0);  // the caller fails the job: kNoSurvivorsMessage
  EXPECT_THAT(elsewhere.removed, ElementsAre(0));
}

TEST_F(RoundsTest, BadInputIsRefused) {
  EXPECT_THROW(first({{"a", 1}, {"A", 1}}), InvalidArgumentError);
  EXPECT_THROW(first({{"a", -1}}), InvalidArgumentError);
  EXPECT_THROW(first({{"a", 1}}, -1), InvalidArgumentError);
  EXPECT_THROW(planRound(nullptr, {}, {{"a", 1}}, 0, nullptr), InvalidArgumentError);
}

}  // namespace
}  // namespace hvd::agent::elastic
