// The node's ledger: which job holds which slots and GPUs, all or nothing, leases that expire,
// sharing only when asked, and a restart's takeover of its earlier attempt's holding.
#include "agent/ledger/resource_ledger.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>

namespace hvd::agent::ledger {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

std::vector<node::GpuInfo> fourGpus() {
  std::vector<node::GpuInfo> gpus;
  for (int i = 0; i < 4; ++i) gpus.push_back({i, "GPU-" + std::to_string(i), "fake", "", 0});
  return gpus;
}

struct LedgerTest : ::testing::Test {
  TimePoint now = TimePoint{} + 1h;
  ResourceLedger ledger{"node1", fourGpus(), 0, [this] { return now; }};

  Request req(const std::string& job, int ranks, int gpusPerRank = 1) {
    Request r;
    r.key = job;
    r.job = job;
    r.ranks = ranks;
    r.gpusPerRank = gpusPerRank;
    return r;
  }
};

TEST_F(LedgerTest, DisjointJobsGetDisjointGpus) {
  const Grant a = ledger.reserve(req("hvd-a", 2));
  const Grant b = ledger.reserve(req("hvd-b", 2));
  ASSERT_EQ(a.verdict, Verdict::kGranted);
  ASSERT_EQ(b.verdict, Verdict::kGranted);
  EXPECT_THAT(a.gpus, ElementsAre(0, 1));
  EXPECT_THAT(b.gpus, ElementsAre(2, 3));
}

TEST_F(LedgerTest, AJobThatDoesNotFitNowIsBusyWithItsHolders) {
  ASSERT_EQ(ledger.reserve(req("hvd-a", 2)).verdict, Verdict::kGranted);
  const Grant c = ledger.reserve(req("hvd-c", 4));
  EXPECT_EQ(c.verdict, Verdict::kBusy);
  EXPECT_TRUE(c.gpus.empty());
  EXPECT_EQ(c.reason, "waiting for 4 GPUs on node1 (2 free); held by hvd-a");
  // All or nothing: the refused request took nothing, so a 2-GPU job still fits.
  EXPECT_EQ(ledger.reserve(req("hvd-d", 2)).verdict, Verdict::kGranted);
  EXPECT_EQ(ledger.reserve(req("hvd-c", 4)).reason,
            "waiting for 4 GPUs on node1 (0 free); held by hvd-a, hvd-d");
  ledger.release("hvd-a");
  ledger.release("hvd-d");
  const Grant again = ledger.reserve(req("hvd-c", 4));
  EXPECT_EQ(again.verdict, Verdict::kGranted);
  EXPECT_THAT(again.gpus, ElementsAre(0, 1, 2, 3));
}

TEST_F(LedgerTest, MoreThanTheNodeHasNeverFits) {
  const Grant g = ledger.reserve(req("hvd-a", 3, 2));
  EXPECT_EQ(g.verdict, Verdict::kNeverFits);
  EXPECT_EQ(g.reason, "node1 has 4 GPUs but the job asks for 6 GPUs there");
  EXPECT_TRUE(ledger.holdings().empty());
}

TEST_F(LedgerTest, GpusPerRankTakesBlocks) {
  const Grant g = ledger.reserve(req("hvd-a", 1, 2));
  ASSERT_EQ(g.verdict, Verdict::kGranted);
  EXPECT_THAT(g.gpus, ElementsAre(0, 1));
  EXPECT_THAT(ledger.reserve(req("hvd-b", 1, 2)).gpus, ElementsAre(2, 3));
}

TEST_F(LedgerTest, AnUnboundLeaseExpiresAndABoundOneDoesNot) {
  Request a = req("hvd-a", 2);
  a.lease = 10s;
  Request b = req("hvd-b", 2);
  b.lease = 10s;
  ASSERT_EQ(ledger.reserve(a).verdict, Verdict::kGranted);
  ASSERT_EQ(ledger.reserve(b).verdict, Verdict::kGranted);
  EXPECT_TRUE(ledger.bind("hvd-b"));
  int released = 0;
  ledger.setOnRelease([&] { ++released; });
  now += 11s;
  // hvd-a's leader vanished before launching: its GPUs return; hvd-b's launched ranks keep theirs.
  const Grant c = ledger.reserve(req("hvd-c", 2));
  ASSERT_EQ(c.verdict, Verdict::kGranted);
  EXPECT_THAT(c.gpus, ElementsAre(0, 1));
  EXPECT_EQ(released, 1);
  EXPECT_FALSE(ledger.bind("hvd-a"));  // too late to launch on an expired reservation
  ASSERT_EQ(ledger.holdings().size(), 2u);
  EXPECT_EQ(ledger.holdings()[0].key, "hvd-b");
  EXPECT_TRUE(ledger.holdings()[0].bound);
}

TEST_F(LedgerTest, ReservingAgainRenewsTheSameHolding) {
  Request a = req("hvd-a", 2);
  a.lease = 10s;
  const Grant first = ledger.reserve(a);
  now += 8s;
  const Grant second = ledger.reserve(a);
  EXPECT_EQ(second.gpus, first.gpus);
  now += 8s;  // 16 s after the first, 8 s after the renewal
  EXPECT_EQ(ledger.holdings().size(), 1u);
  EXPECT_TRUE(ledger.bind("hvd-a"));
}

TEST_F(LedgerTest, ARestartTakesOverItsEarlierAttemptAndPrefersItsGpus) {
  ASSERT_EQ(ledger.reserve(req("hvd-x", 1)).verdict, Verdict::kGranted);  // GPU 0
  Request first = req("hvd-a", 2);
  ASSERT_THAT(ledger.reserve(first).gpus, ElementsAre(1, 2));
  ledger.bind("hvd-a");
  Request next = first;
  next.key = "hvd-a.1";
  next.preferredGpus = {1, 2};
  const Grant g = ledger.reserve(next);
  ASSERT_EQ(g.verdict, Verdict::kGranted);
  EXPECT_THAT(g.gpus, ElementsAre(1, 2));
  // The earlier attempt's late release does not touch the new holding.
  ledger.release("hvd-a");
  ASSERT_EQ(ledger.holdings().size(), 2u);
  EXPECT_EQ(ledger.holdings()[1].key, "hvd-a.1");
}

TEST_F(LedgerTest, PreferredGpusThatAreTakenAreNotForced) {
  ASSERT_THAT(ledger.reserve(req("hvd-x", 1)).gpus, ElementsAre(0));
  Request r = req("hvd-a", 1);
  r.preferredGpus = {0};
  EXPECT_THAT(ledger.reserve(r).gpus, ElementsAre(1));
}

TEST_F(LedgerTest, SharingIsExplicitAndNeverTakesExclusiveGpus) {
  ASSERT_THAT(ledger.reserve(req("hvd-a", 2)).gpus, ElementsAre(0, 1));
  Request shared = req("hvd-s", 8);
  shared.share = true;
  const Grant s = ledger.reserve(shared);
  ASSERT_EQ(s.verdict, Verdict::kGranted);
  EXPECT_THAT(s.gpus, ElementsAre(2, 3));
  Request shared2 = req("hvd-t", 2);
  shared2.share = true;
  EXPECT_THAT(ledger.reserve(shared2).gpus, ElementsAre(2, 3));  // sharers share with sharers
  // An exclusive job does not land on GPUs that sharers use.
  const Grant e = ledger.reserve(req("hvd-e", 1));
  EXPECT_EQ(e.verdict, Verdict::kBusy);
  EXPECT_THAT(e.reason, HasSubstr("held by hvd-a, hvd-s, hvd-t"));
}

TEST(LedgerSlots, ASlotLimitQueuesAndRefuses) {
  TimePoint now{};
  ResourceLedger ledger("cpu1", {}, 4, [&] { return now; });
  Request a{"hvd-a", "hvd-a", 3, 1, false, {}, 30s};
  ASSERT_EQ(ledger.reserve(a).verdict, Verdict::kGranted);
  EXPECT_TRUE(ledger.reserve(a).gpus.empty());
  Request b{"hvd-b", "hvd-b", 2, 1, false, {}, 30s};
  const Grant busy = ledger.reserve(b);
  EXPECT_EQ(busy.verdict, Verdict::kBusy);
  EXPECT_EQ(busy.reason, "waiting for 2 slots on cpu1 (1 of 4 free); held by hvd-a");
  Request huge{"hvd-h", "hvd-h", 5, 1, false, {}, 30s};
  const Grant never = ledger.reserve(huge);
  EXPECT_EQ(never.verdict, Verdict::kNeverFits);
  EXPECT_EQ(never.reason,
            "cpu1 runs at most 4 ranks at once (hvdagent --slots) but the job asks for 5 there");
  huge.share = true;  // --oversubscribe runs past the slots, as mpirun's does
  EXPECT_EQ(ledger.reserve(huge).verdict, Verdict::kGranted);
}

TEST(LedgerSlots, WithoutALimitACpuNodeTakesAnyNumberOfJobs) {
  TimePoint now{};
  ResourceLedger ledger("cpu1", {}, 0, [&] { return now; });
  for (int i = 0; i < 10; ++i) {
    Request r{"hvd-" + std::to_string(i), "hvd-" + std::to_string(i), 64, 1, false, {}, 30s};
    EXPECT_EQ(ledger.reserve(r).verdict, Verdict::kGranted);
  }
  EXPECT_EQ(ledger.holdings().size(), 10u);
}

}  // namespace
}  // namespace hvd::agent::ledger
