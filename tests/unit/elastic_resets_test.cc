// The reset limit of an elastic job (agent/elastic/resets.h): Horovod checks `resets >= limit`
// before each reset, so a limit of N allows exactly N.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agent/elastic/resets.h"
#include "hvd/error.hpp"

namespace hvd::agent::elastic {
namespace {

TEST(ResetCounter, ALimitOfNAllowsNResets) {
  ResetCounter counter(2);
  EXPECT_FALSE(counter.exceeded());
  counter.recordReset();
  EXPECT_FALSE(counter.exceeded());
  counter.recordReset();
  EXPECT_TRUE(counter.exceeded());  // the third reset would be one too many
  EXPECT_EQ(counter.resets(), 2);
  EXPECT_EQ(counter.message(),
            "Horovod was shutdown because number of resets during elastic job exceeded limit: 2");
}

TEST(ResetCounter, ALimitOfZeroAllowsNone) {
  ResetCounter counter(0);
  EXPECT_TRUE(counter.exceeded());
  EXPECT_EQ(counter.message(),
            "Horovod was shutdown because number of resets during elastic job exceeded limit: 0");
}

TEST(ResetCounter, WithoutALimitAnyNumberIsAllowed) {
  ResetCounter counter(std::nullopt);
  for (int i = 0; i < 1000; ++i) counter.recordReset();
  EXPECT_FALSE(counter.exceeded());
  EXPECT_EQ(counter.resets(), 1000);
  EXPECT_EQ(counter.message(), "");
}

TEST(ResetCounter, ANegativeLimitIsRefused) {
  try {
    ResetCounter counter(-1);
    FAIL() << "accepted -1";
  } catch (const InvalidArgumentError& e) {
    EXPECT_STREQ(e.what(), "--reset-limit -1: expected a count of 0 or more");
  }
}

}  // namespace
}  // namespace hvd::agent::elastic
