// The open-file limit: raised from a low soft limit to the hard one, never lowered.
#include "hvd_support/fd_limit.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

namespace hvd {
namespace {

TEST(FileLimit, ALowSoftLimitIsRaisedToTheHardLimit) {
  rlimit limit{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &limit), 0);
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max <= 256) {
    GTEST_SKIP() << "the hard limit " << limit.rlim_max << " leaves nothing to raise";
  }
  rlimit low = limit;
  low.rlim_cur = 256;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);

  const FileLimit result = raiseOpenFileLimit();
  EXPECT_EQ(result.before, 256u);
  EXPECT_EQ(result.hard, static_cast<uint64_t>(limit.rlim_max));
  EXPECT_EQ(result.now, static_cast<uint64_t>(limit.rlim_max));
  rlimit after{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &after), 0);
  EXPECT_EQ(after.rlim_cur, limit.rlim_max);

  // At the hard limit already: nothing changes.
  const FileLimit again = raiseOpenFileLimit();
  EXPECT_EQ(again.before, again.now);
  EXPECT_EQ(again.now, static_cast<uint64_t>(limit.rlim_max));
}

}  // namespace
}  // namespace hvd
