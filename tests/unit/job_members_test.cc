// A job formed by some of the launched ranks (core/job_members.h): renumbering in the list's
// order, the refusals that come before anything connects, the store namespace of a list, and
// the placement derived from the members' hosts.
#include "core/job_members.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hvd/error.hpp"

namespace hvd::core {
namespace {

// Launched rank `rank` of 4 (two per node), as parseConfig would give it.
Config launched(int rank) {
  Config c;
  c.rank = rank;
  c.size = 4;
  c.localRank = rank % 2;
  c.localSize = 2;
  c.crossRank = rank / 2;
  c.crossSize = 2;
  return c;
}

std::string refusal(Config c, const std::vector<int>& members) {
  try {
    restrictToMembers(c, members);
  } catch (const InvalidArgumentError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(JobMembers, RanksAreNumberedInTheListsOrder) {
  Config c = launched(3);
  restrictToMembers(c, {3, 0, 2});
  EXPECT_EQ(c.rank, 0);
  EXPECT_EQ(c.size, 3);
  EXPECT_EQ(c.members, (std::vector<int>{3, 0, 2}));
  c = launched(2);
  restrictToMembers(c, {3, 0, 2});
  EXPECT_EQ(c.rank, 2);
  // A job of one needs no rendezvous to know its placement.
  c = launched(1);
  restrictToMembers(c, {1});
  EXPECT_EQ(c.rank, 0);
  EXPECT_EQ(c.size, 1);
  EXPECT_EQ(c.localRank, 0);
  EXPECT_EQ(c.localSize, 1);
  EXPECT_EQ(c.crossRank, 0);
  EXPECT_EQ(c.crossSize, 1);
}

TEST(JobMembers, AnEmptyListOrEveryRankInLaunchOrderIsTheLaunchedJob) {
  for (const std::vector<int>& members : {std::vector<int>{}, std::vector<int>{0, 1, 2, 3}}) {
    Config c = launched(2);
    restrictToMembers(c, members);
    EXPECT_EQ(c.rank, 2);
    EXPECT_EQ(c.size, 4);
    EXPECT_EQ(c.localSize, 2);
    EXPECT_TRUE(c.members.empty());
    EXPECT_EQ(membersNamespace(c.members), "");
  }
  // Every rank in another order is a job of its own, renumbered.
  Config c = launched(2);
  restrictToMembers(c, {3, 2, 1, 0});
  EXPECT_EQ(c.rank, 1);
  EXPECT_EQ(c.size, 4);
}

TEST(JobMembers, BadListsAreRefusedNamingTheRank) {
  EXPECT_EQ(refusal(launched(0), {0, 4}),
            "hvd.init(comm=[0,4]): rank 4 is not in the launched job (ranks 0..3)");
  EXPECT_EQ(refusal(launched(0), {0, -1}),
            "hvd.init(comm=[0,-1]): rank -1 is not in the launched job (ranks 0..3)");
  EXPECT_EQ(refusal(launched(0), {0, 1, 0}), "hvd.init(comm=[0,1,0]): rank 0 is listed twice");
  EXPECT_NE(
      refusal(launched(2), {0, 1})
          .find("hvd.init(comm=[0,1]): this process is launched rank 2, which is not in the list"),
      std::string::npos);
}

TEST(JobMembers, ModesWhoseRendezvousTakesEveryRankRefuseASubset) {
  Config elastic = launched(0);
  elastic.elastic = true;
  EXPECT_NE(refusal(elastic, {0, 1}).find("elastic mode"), std::string::npos);
  Config mpi = launched(0);
  mpi.cpuBackend = CpuBackend::kMpi;
  EXPECT_NE(refusal(mpi, {0, 1}).find("HVD_CPU_BACKEND=mpi"), std::string::npos);
  Config overMpi = launched(0);
  overMpi.mpiRendezvous = true;
  EXPECT_NE(refusal(overMpi, {0, 1}).find("set HVD_STORE_FILE"), std::string::npos);
  // The whole job as launched stays possible in every mode.
  EXPECT_EQ(refusal(elastic, {0, 1, 2, 3}), "(accepted)");
}

TEST(JobMembers, EachListHasANamespaceOfItsOwn) {
  const std::string a = membersNamespace({0, 1});
  EXPECT_EQ(a.size(), 18u);  // "m" + 16 hex digits + "/"
  EXPECT_EQ(a.front(), 'm');
  EXPECT_EQ(a.back(), '/');
  EXPECT_EQ(a, membersNamespace({0, 1}));
  EXPECT_NE(a, membersNamespace({1, 0}));
  EXPECT_NE(a, membersNamespace({2, 3}));
  EXPECT_NE(a, membersNamespace({0, 1, 2}));
}

TEST(JobMembers, PlacementFromHostsCountsLocalRanksInRankOrder) {
  // Ranks 0, 2, 3 on host a, ranks 1, 4 on host b.
  const std::vector<std::string> keys = {"a", "b", "a", "a", "b"};
  auto placed = [&](int rank) {
    const HostPlacement p = placementFromHostKeys(keys, rank);
    return std::vector<int>{p.localRank, p.localSize, p.crossRank, p.crossSize};
  };
  EXPECT_EQ(placed(0), (std::vector<int>{0, 3, 0, 2}));
  EXPECT_EQ(placed(1), (std::vector<int>{0, 2, 1, 2}));
  EXPECT_EQ(placed(3), (std::vector<int>{2, 3, 0, 1}));  // only a has local rank 2
  EXPECT_EQ(placed(4), (std::vector<int>{1, 2, 1, 2}));
  EXPECT_THROW(placementFromHostKeys(keys, 5), InvalidArgumentError);
}

}  // namespace
}  // namespace hvd::core
