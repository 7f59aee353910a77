// The blacklist of an elastic job (agent/elastic/blacklist.h): hosts that never return without a
// cooldown range, Horovod's exponential cooldown with jitter within [min, max], and the range's
// bounds. A manual clock and a fixed "random" number make every deadline exact.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agent/elastic/blacklist.h"
#include "hvd/error.hpp"

namespace hvd::agent::elastic {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;
using TimePoint = Blacklist::TimePoint;

struct BlacklistTest : ::testing::Test {
  TimePoint start = TimePoint{} + 1h;
  TimePoint now = start;
  double random = 0.5;

  Blacklist make(std::optional<std::pair<int, int>> range) {
    return Blacklist(
        range, [this] { return now; }, [this] { return random; });
  }
};

TEST_F(BlacklistTest, WithoutARangeAFailedHostNeverReturns) {
  Blacklist blacklist = make(std::nullopt);
  EXPECT_FALSE(blacklist.blocked("h1"));
  blacklist.failed("h1");
  now += 1000h;
  EXPECT_TRUE(blacklist.blocked("h1"));
  EXPECT_TRUE(blacklist.blocked("H1"));  // hosts compare as DNS does
  EXPECT_FALSE(blacklist.blocked("h2"));
  ASSERT_EQ(blacklist.blockedHosts().size(), 1u);
  EXPECT_EQ(blacklist.blockedHosts()[0].host, "h1");
  EXPECT_EQ(blacklist.blockedHosts()[0].failures, 1);
  EXPECT_EQ(blacklist.blockedHosts()[0].returnsAt, std::nullopt);
  EXPECT_EQ(blacklist.nextReturn(), std::nullopt);
}

TEST_F(BlacklistTest, CooldownDoublesWithEachFailureAsInHorovod) {
  // seconds = clamp(min * 2^n + uniform * min, min, max), n = 1, 2, 3 ...
  Blacklist blacklist = make(std::pair{10, 1000});
  blacklist.failed("h1");  // 10 * 2 + 0.5 * 10 = 25 s
  EXPECT_EQ(blacklist.nextReturn(), start + 25s);
  now = start + 24999ms;
  EXPECT_TRUE(blacklist.blocked("h1"));
  now = start + 25s;
  EXPECT_FALSE(blacklist.blocked("h1"));
  EXPECT_TRUE(blacklist.blockedHosts().empty());

  blacklist.failed("h1");  // 10 * 4 + 5 = 45 s
  EXPECT_EQ(blacklist.nextReturn(), start + 25s + 45s);
  now += 45s;
  EXPECT_FALSE(blacklist.blocked("h1"));
  random = 0.25;
  blacklist.failed("h1");  // 10 * 8 + 2.5 = 82.5 s
  EXPECT_EQ(blacklist.nextReturn(), now + 82500ms);
  EXPECT_EQ(blacklist.blockedHosts()[0].failures, 3);
}

TEST_F(BlacklistTest, CooldownIsClampedToTheRange) {
  Blacklist blacklist = make(std::pair{10, 30});
  blacklist.failed("h1");  // 25 s
  EXPECT_EQ(blacklist.nextReturn(), start + 25s);
  now += 25s;
  blacklist.failed("h1");  // 45 s, clamped to 30
  EXPECT_EQ(blacklist.nextReturn(), now + 30s);
  now += 30s;
  for (int i = 0; i < 100; ++i) {  // 2^n far past any double's range stays clamped
    blacklist.failed("h1");
    now += 30s;
  }
  blacklist.failed("h1");
  EXPECT_EQ(blacklist.nextReturn(), now + 30s);
}

TEST_F(BlacklistTest, JitterAddsUpToOneMinimum) {
  Blacklist low = make(std::pair{1, 3600});
  random = 0.0;
  low.failed("h1");
  EXPECT_EQ(low.nextReturn(), start + 2s);
  random = 0.75;
  low.failed("h2");
  EXPECT_EQ(low.blockedHosts()[1].returnsAt, start + 2750ms);
}

TEST_F(BlacklistTest, AFailureDuringTheCooldownChangesNothing) {
  Blacklist blacklist = make(std::pair{10, 1000});
  blacklist.failed("h1");
  now += 10s;
  blacklist.failed("h1");  // another worker of the same host, same event
  EXPECT_EQ(blacklist.nextReturn(), start + 25s);
  EXPECT_EQ(blacklist.blockedHosts()[0].failures, 1);
}

TEST_F(BlacklistTest, ListsBlockedHostsByNameWithWhenEachReturns) {
  Blacklist blacklist = make(std::pair{10, 1000});
  blacklist.failed("zeta");
  now += 5s;
  blacklist.failed("Alpha");
  const std::vector<Blacklist::Entry> entries = blacklist.blockedHosts();
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].host, "Alpha");
  EXPECT_EQ(entries[0].returnsAt, start + 30s);
  EXPECT_EQ(entries[1].host, "zeta");
  EXPECT_EQ(entries[1].returnsAt, start + 25s);
  EXPECT_EQ(blacklist.nextReturn(), start + 25s);
}

TEST(CooldownRange, BoundsAreHorovodsAndMinMayNotExceedMax) {
  EXPECT_NO_THROW(checkCooldownRange({1, 1}));
  EXPECT_NO_THROW(checkCooldownRange({3600, 3600}));
  const auto message = [](std::pair<int, int> range) {
    try {
      Blacklist blacklist(range);
    } catch (const InvalidArgumentError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(message({0, 10}),
            "--blacklist-cooldown-range 0 10: expected MIN and MAX seconds within 1..3600");
  EXPECT_EQ(message({1, 3601}),
            "--blacklist-cooldown-range 1 3601: expected MIN and MAX seconds within 1..3600");
  EXPECT_EQ(message({20, 10}), "--blacklist-cooldown-range 20 10: expected MIN <= MAX");
}

}  // namespace
}  // namespace hvd::agent::elastic
