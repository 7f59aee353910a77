// The state directory's room shared by logs and records (state_space.h), and how a job's log
// behaves when the room runs out or a write fails: lines dropped and counted, never half written,
// and a notice where they are missing that says why. The file system's free space is a fake; a
// real partial write comes from RLIMIT_FSIZE (the full-disk case on a real tmpfs is in the mp
// tests: HvdrunJobsTest's FullStateDisk cases).
#include "agent/records/state_space.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "agent/records/job_log.h"
#include "common/test_support.h"

namespace hvd::agent::records {
namespace {

namespace fs = std::filesystem;
using process::Stream;
using test::TempDir;

// A file system whose free space the test sets.
struct FakeDisk {
  std::shared_ptr<std::atomic<uint64_t>> free = std::make_shared<std::atomic<uint64_t>>(0);
  std::shared_ptr<std::atomic<int>> asked = std::make_shared<std::atomic<int>>(0);

  StateSpaceOptions options(uint64_t headroom = 1000, uint64_t checkEvery = 300,
                            uint64_t reserve = 4096) const {
    StateSpaceOptions o;
    o.logHeadroom = headroom;
    o.checkEvery = checkEvery;
    o.reserveBytes = reserve;
    o.freeBytes = [free = free, asked = asked](const std::string&) {
      ++*asked;
      return free->load();
    };
    return o;
  }
};

TEST(StateSpace, LogsLeaveTheHeadroomAndAskTheFileSystemOncePerCheckEvery) {
  TempDir dir;
  FakeDisk disk;
  *disk.free = 1000 + 3000;
  StateSpace space(dir.path().string(), disk.options());
  // What a log writes takes room on the file system.
  const auto write = [&](uint64_t bytes) {
    if (!space.logMayWrite(bytes)) return false;
    *disk.free -= bytes;
    return true;
  };
  // One look at the file system per 300 bytes while there is plenty.
  for (int i = 0; i < 12; ++i) EXPECT_TRUE(write(100)) << i;
  EXPECT_EQ(*disk.asked, 4);
  // Then up to the headroom and not a byte into it.
  uint64_t written = 0;
  while (write(10)) written += 10;
  EXPECT_EQ(*disk.free, 1000u);
  EXPECT_EQ(written, 3000u - 1200u);
  EXPECT_FALSE(space.logMayWrite(1));
  // Room again (a file removed): logs go on.
  *disk.free = 1000 + 10000;
  EXPECT_TRUE(write(100));
  // A line longer than checkEvery still fits when the room is there, and not when it is not.
  EXPECT_TRUE(write(5000));
  EXPECT_FALSE(write(20000));
}

TEST(StateSpace, ARecordThatFindsNoRoomGetsTheReserveOnceAndTheReserveComesBack) {
  TempDir dir;
  FakeDisk disk;
  *disk.free = 1 << 20;
  StateSpace space(dir.path().string(), disk.options());
  const fs::path reserve = dir.path() / StateSpace::kReserveFile;
  ASSERT_TRUE(space.hasReserve());
  ASSERT_TRUE(fs::exists(reserve));
  EXPECT_EQ(fs::file_size(reserve), 4096u);

  // Another error than a full disk does not touch it.
  int calls = 0;
  EXPECT_FALSE(space.writeUsingReserve([&] {
    ++calls;
    errno = EIO;
    return false;
  }));
  EXPECT_EQ(errno, EIO);
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(fs::exists(reserve));

  // No room: the reserve is given up and the write tried again.
  calls = 0;
  EXPECT_TRUE(space.writeUsingReserve([&] {
    if (++calls == 1) {
      errno = ENOSPC;
      return false;
    }
    return !fs::exists(reserve);  // it must be gone by the second try
  }));
  EXPECT_EQ(calls, 2);
  EXPECT_FALSE(space.hasReserve());

  // Without a reserve, a full disk fails with its errno.
  calls = 0;
  EXPECT_FALSE(space.writeUsingReserve([&] {
    ++calls;
    errno = EDQUOT;
    return false;
  }));
  EXPECT_EQ(errno, EDQUOT);
  EXPECT_EQ(calls, 1);

  // It comes back only with room for it and the logs' headroom.
  *disk.free = 4096 + 500;
  space.restoreReserve();
  EXPECT_FALSE(space.hasReserve());
  *disk.free = 4096 + 1000;
  space.restoreReserve();
  EXPECT_TRUE(space.hasReserve());
  EXPECT_EQ(fs::file_size(reserve), 4096u);
}

std::vector<LogLine> readAll(const std::string& path) {
  uint64_t offset = 0;
  return readLogLines(path, &offset, {});
}

TEST(JobLogRoom, LinesThatFindNoRoomAreDroppedAndANoticeMarksTheGapWithItsReason) {
  TempDir dir;
  FakeDisk disk;
  *disk.free = 1 << 20;
  StateSpace space(dir.path().string(), disk.options(/*headroom=*/1000, /*checkEvery=*/1));
  const std::string path = dir.file("output.log");
  JobLogWriter log(path, uint64_t{1} << 30, &space);
  EXPECT_TRUE(log.append(1, 0, Stream::kStdout, "h", "before 1"));
  EXPECT_TRUE(log.append(2, 0, Stream::kStdout, "h", "before 2"));
  *disk.free = 1000;  // down to the headroom
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(log.append(3, 1, Stream::kStdout, "h", "lost"));
  EXPECT_EQ(log.dropped(), 5u);
  *disk.free = 1 << 20;
  EXPECT_TRUE(log.append(4, 0, Stream::kStdout, "h", "after"));
  log.close();

  const std::vector<LogLine> lines = readAll(path);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0].text, "before 1");
  EXPECT_EQ(lines[1].text, "before 2");
  EXPECT_EQ(lines[2].rank, -1);
  EXPECT_EQ(lines[2].stream, Stream::kStderr);
  EXPECT_NE(lines[2].text.find("[hvd] 5 line(s) were not logged here: the file system of the "
                               "agent's state directory is nearly full"),
            std::string::npos)
      << lines[2].text;
  EXPECT_EQ(lines[2].text.find("--max-log-mb"), std::string::npos) << lines[2].text;
  EXPECT_EQ(lines[3].text, "after");
  EXPECT_NE(log.dropReasons().find("nearly full"), std::string::npos) << log.dropReasons();
  EXPECT_EQ(log.dropReasons().find("--max-log-mb"), std::string::npos) << log.dropReasons();
}

TEST(JobLogRoom, AGapAtTheEndIsNoticedAtCloseBesideTheLimit) {
  TempDir dir;
  FakeDisk disk;
  *disk.free = 1 << 20;
  StateSpace space(dir.path().string(), disk.options(1000, 1));
  const std::string path = dir.file("output.log");
  JobLogWriter log(path, 80, &space);
  EXPECT_TRUE(log.append(1, 0, Stream::kStdout, "h", "first"));
  EXPECT_FALSE(log.append(1, 0, Stream::kStdout, "h", std::string(100, 'x')));  // the limit
  *disk.free = 0;
  EXPECT_FALSE(log.append(1, 0, Stream::kStdout, "h", "no room"));
  EXPECT_FALSE(log.append(1, 0, Stream::kStdout, "h", "no room"));
  log.close();
  const std::vector<LogLine> lines = readAll(path);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].text, "first");
  EXPECT_NE(lines[1].text.find("2 line(s) were not logged: the file system"), std::string::npos)
      << lines[1].text;
  EXPECT_NE(lines[2].text.find("1 line(s) were not logged: the job's log reached the agent's "
                               "--max-log-mb (80 bytes)"),
            std::string::npos)
      << lines[2].text;
  EXPECT_EQ(log.dropped(), 3u);
  EXPECT_NE(log.dropReasons().find("--max-log-mb; the file system"), std::string::npos)
      << log.dropReasons();
}

// RLIMIT_FSIZE makes write(2) stop part-way, as a disk that fills in the middle of a line does;
// the log is cut back to the last whole line, and the next line after room returns follows the
// notice, not the torn bytes.
TEST(JobLogRoom, AWriteThatStopsPartWayIsRolledBackToTheLastWholeLine) {
  TempDir dir;
  const std::string path = dir.file("output.log");
  JobLogWriter log(path, uint64_t{1} << 30);
  ASSERT_TRUE(log.append(1, 0, Stream::kStdout, "h", "whole line"));
  const uint64_t whole = fs::file_size(path);

  struct sigaction ignore {
  }, old{};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGXFSZ, &ignore, &old), 0);
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  rlimit small = saved;
  small.rlim_cur = whole + 10;  // room for 10 bytes of the next line
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const bool torn = log.append(2, 0, Stream::kStdout, "h", std::string(100, 'y'));
  const bool again = log.append(3, 0, Stream::kStdout, "h", "also lost");
  const uint64_t sizeWhileFull = fs::file_size(path);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &saved), 0);
  ::sigaction(SIGXFSZ, &old, nullptr);

  EXPECT_FALSE(torn);
  EXPECT_FALSE(again);
  EXPECT_EQ(sizeWhileFull, whole);  // not one byte of either line stayed
  EXPECT_TRUE(log.append(4, 0, Stream::kStdout, "h", "after"));
  log.close();
  const std::vector<LogLine> lines = readAll(path);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].text, "whole line");
  EXPECT_NE(lines[1].text.find("2 line(s) were not logged here: writing " + path +
                               " failed (File too large)"),
            std::string::npos)
      << lines[1].text;
  EXPECT_EQ(lines[2].text, "after");
  EXPECT_EQ(lines[2].unixMs, 4);
}

}  // namespace
}  // namespace hvd::agent::records
