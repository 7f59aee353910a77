// Process supervision (agent/process): real children started through /bin/sh scripts, checked
// for exit reporting, exact environment, output capture, stop and no-orphan guarantees; and the
// fake spawner that the layers above test with.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "agent/process/fake_spawner.h"
#include "agent/process/posix_spawner.h"

namespace hvd::agent::process {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct Line {
  int rank;
  Stream which;
  std::string text;
};

class CollectingSink : public OutputSink {
 public:
  void line(int rank, Stream which, std::string_view text) override {
    std::lock_guard<std::mutex> lock(mu_);
    lines_.push_back({rank, which, std::string(text)});
  }
  std::vector<std::string> texts(int rank, Stream which) const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> out;
    for (const Line& l : lines_) {
      if (l.rank == rank && l.which == which) out.push_back(l.text);
    }
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::vector<Line> lines_;
};

SpawnSpec sh(const std::string& script, std::string cwd = "") {
  return SpawnSpec{{"/bin/sh", "-c", script}, {"PATH=/usr/bin:/bin"}, std::move(cwd)};
}

bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return pred();
}

// Dead: no such process, or a zombie (an orphan adopted by a PID 1 that does not reap).
bool processGone(pid_t pid) {
  if (kill(pid, 0) != 0) return errno == ESRCH;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string s;
  std::getline(stat, s);
  size_t paren = s.rfind(')');
  return paren != std::string::npos && paren + 2 < s.size() && s[paren + 2] == 'Z';
}

std::string makeTempDir() {
  std::string tmpl = ::testing::TempDir() + "hvd_process_XXXXXX";
  char* dir = mkdtemp(tmpl.data());
  EXPECT_NE(dir, nullptr);
  char resolved[PATH_MAX];
  EXPECT_NE(realpath(tmpl.c_str(), resolved), nullptr);
  return resolved;
}

// Runs one rank to completion and returns its exit status.
ExitStatus runToExit(const SpawnSpec& spec, CollectingSink* sink = nullptr) {
  PosixSpawner spawner;
  SpawnResult r = spawner.spawn({spec}, sink, nullptr);
  EXPECT_TRUE(r.ok()) << r.error;
  if (!r.ok()) return ExitStatus{-1, -1};
  EXPECT_TRUE(r.group->waitAll(10s));
  return r.group->exitStatus(0).value_or(ExitStatus{-1, -1});
}

TEST(ProcessTest, ExitCodeReported) {
  ExitStatus s = runToExit(sh("exit 3"));
  EXPECT_EQ(s.exitCode, 3);
  EXPECT_EQ(s.signal, 0);
  EXPECT_EQ(s.shellStatus(), 3);
  EXPECT_FALSE(s.success());
  EXPECT_EQ(s.describe(), "exit code 3");
}

TEST(ProcessTest, SignalReportedWithShellStatus) {
  ExitStatus s = runToExit(sh("kill -9 $$"));
  EXPECT_EQ(s.signal, 9);
  EXPECT_EQ(s.shellStatus(), 137);
  EXPECT_EQ(s.describe(), "signal 9 (Killed)");
}

TEST(ProcessTest, EnvironmentIsExactlyWhatWasGiven) {
  ASSERT_EQ(setenv("HVD_PROCESS_TEST_PARENT_ONLY", "leak", 1), 0);
  std::string dir = makeTempDir();
  SpawnSpec spec{{"/bin/sh", "-c", "/usr/bin/env"}, {"A=1", "B=two words", "HVD_RANK=5"}, dir};
  CollectingSink sink;
  ExitStatus s = runToExit(spec, &sink);
  EXPECT_TRUE(s.success()) << s.describe();
  std::vector<std::string> lines = sink.texts(0, Stream::kStdout);
  std::set<std::string> got(lines.begin(), lines.end());
  // dash exports PWD itself; everything else must come from the spec.
  std::set<std::string> want{"A=1", "B=two words", "HVD_RANK=5", "PWD=" + dir};
  EXPECT_EQ(got, want);
  EXPECT_EQ(lines.size(), want.size());
}

TEST(ProcessTest, WorkingDirectoryHonoured) {
  std::string dir = makeTempDir();
  CollectingSink sink;
  ExitStatus s = runToExit(sh("/bin/pwd -P", dir), &sink);
  EXPECT_TRUE(s.success()) << s.describe();
  EXPECT_EQ(sink.texts(0, Stream::kStdout), std::vector<std::string>{dir});
}

TEST(ProcessTest, ProgramFoundInPathOfGivenEnvironment) {
  SpawnSpec spec{{"sh", "-c", "exit 4"}, {"PATH=/nonexistent:/bin:/usr/bin"}, ""};
  EXPECT_EQ(runToExit(spec).exitCode, 4);
}

TEST(ProcessTest, StdoutAndStderrLinesSeparatedIncludingUnterminatedLast) {
  CollectingSink sink;
  ExitStatus s =
      runToExit(sh("printf 'o1\\no2\\n'; printf 'e1\\n\\ne3' >&2; printf 'tail'"), &sink);
  EXPECT_TRUE(s.success());
  EXPECT_EQ(sink.texts(0, Stream::kStdout), (std::vector<std::string>{"o1", "o2", "tail"}));
  EXPECT_EQ(sink.texts(0, Stream::kStderr), (std::vector<std::string>{"e1", "", "e3"}));
}

TEST(ProcessTest, LongLineSplitInto64KiBPieces) {
  CollectingSink sink;
  ExitStatus s = runToExit(sh("head -c 204800 /dev/zero | tr '\\000' x; echo; echo after"), &sink);
  EXPECT_TRUE(s.success());
  std::vector<std::string> lines = sink.texts(0, Stream::kStdout);
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0], std::string(65536, 'x'));
  EXPECT_EQ(lines[1], std::string(65536, 'x'));
  EXPECT_EQ(lines[2], std::string(65536, 'x'));
  EXPECT_EQ(lines[3], std::string(8192, 'x'));
  EXPECT_EQ(lines[4], "after");
}

TEST(ProcessTest, ConcurrentRanksLinesArriveIntact) {
  const std::string filler(100, 'y');
  std::vector<SpawnSpec> specs;
  for (int r = 0; r < 2; ++r) {
    specs.push_back(sh("i=0; while [ $i -lt 2000 ]; do echo \"rank " + std::to_string(r) +
                       " line $i " + filler + "\"; echo \"err $i\" >&2; i=$((i+1)); done"));
  }
  CollectingSink sink;
  PosixSpawner spawner;
  SpawnResult res = spawner.spawn(specs, &sink, nullptr);
  ASSERT_TRUE(res.ok()) << res.error;
  ASSERT_TRUE(res.group->waitAll(60s));
  for (int r = 0; r < 2; ++r) {
    std::vector<std::string> out = sink.texts(r, Stream::kStdout);
    std::vector<std::string> err = sink.texts(r, Stream::kStderr);
    ASSERT_EQ(out.size(), 2000u);
    ASSERT_EQ(err.size(), 2000u);
    for (int i = 0; i < 2000; ++i) {
      ASSERT_EQ(out[i], "rank " + std::to_string(r) + " line " + std::to_string(i) + " " + filler);
      ASSERT_EQ(err[i], "err " + std::to_string(i));
    }
    EXPECT_TRUE(res.group->exitStatus(r)->success());
  }
}

TEST(ProcessTest, StopWithSigtermEndsSleepingChildQuickly) {
  PosixSpawner spawner;
  SpawnResult r = spawner.spawn({sh("sleep 60")}, nullptr, nullptr);
  ASSERT_TRUE(r.ok()) << r.error;
  auto start = Clock::now();
  r.group->stop(SIGTERM, 10s);
  EXPECT_LT(Clock::now() - start, 2s);
  ASSERT_TRUE(r.group->exitStatus(0).has_value());
  EXPECT_EQ(r.group->exitStatus(0)->signal, SIGTERM);
  EXPECT_EQ(r.group->exitStatus(0)->shellStatus(), 143);
}

// A stopped rank exits nothing and prints nothing: the supervisor says so on its stderr within
// about a second, once, and again when it is continued (while it lives: a rank that exits at
// once after SIGCONT has only its exit to report).
TEST(ProcessTest, AStoppedRankIsSaidOnItsStderrAndSoIsItsContinuation) {
  CollectingSink sink;
  PosixSpawner spawner;
  SpawnResult r = spawner.spawn(
      {sh("echo $$; kill -STOP $$; echo resumed; sleep 2"), sh("sleep 60")}, &sink, nullptr);
  ASSERT_TRUE(r.ok()) << r.error;
  const pid_t pid = r.group->pid(0);
  ASSERT_TRUE(eventually([&] { return !sink.texts(0, Stream::kStderr).empty(); }, 5s));
  std::this_thread::sleep_for(1500ms);  // a second look must not say it again
  std::vector<std::string> err = sink.texts(0, Stream::kStderr);
  ASSERT_EQ(err.size(), 1u);
  EXPECT_EQ(err[0], "[hvd] this rank (pid " + std::to_string(pid) +
                        ") is stopped by SIGSTOP: the other ranks wait for it (kill -CONT " +
                        std::to_string(pid) + " resumes it)");
  EXPECT_TRUE(isStoppedNotice(err[0]));
  EXPECT_FALSE(isContinuedNotice(err[0]));
  EXPECT_TRUE(sink.texts(1, Stream::kStderr).empty()) << "the running rank is not stopped";

  ASSERT_EQ(::kill(pid, SIGCONT), 0);
  ASSERT_TRUE(eventually([&] { return sink.texts(0, Stream::kStderr).size() == 2; }, 5s));
  err = sink.texts(0, Stream::kStderr);
  EXPECT_EQ(err[1], "[hvd] this rank (pid " + std::to_string(pid) + ") was continued");
  EXPECT_TRUE(isContinuedNotice(err[1]));
  EXPECT_FALSE(isStoppedNotice(err[1]));
  ASSERT_TRUE(eventually([&] { return r.group->exitStatus(0).has_value(); }, 5s));
  EXPECT_EQ(r.group->exitStatus(0)->exitCode, 0);
  EXPECT_EQ(sink.texts(0, Stream::kStdout),
            (std::vector<std::string>{std::to_string(pid), "resumed"}));
  r.group->stop(SIGTERM, 1s);
}

TEST(ProcessTest, ChildIgnoringSigtermIsKilledAfterGrace) {
  CollectingSink sink;
  PosixSpawner spawner;
  SpawnResult r = spawner.spawn({sh("trap '' TERM; echo ready; sleep 60")}, &sink, nullptr);
  ASSERT_TRUE(r.ok()) << r.error;
  ASSERT_TRUE(eventually([&] { return !sink.texts(0, Stream::kStdout).empty(); }, 5s));
  const auto grace = 1000ms;
  auto start = Clock::now();
  r.group->stop(SIGTERM, grace);
  auto elapsed = Clock::now() - start;
  EXPECT_GE(elapsed, grace);
  EXPECT_LT(elapsed, grace + 2s);
  ASSERT_TRUE(r.group->exitStatus(0).has_value());
  EXPECT_EQ(r.group->exitStatus(0)->signal, SIGKILL);
}

pid_t firstPid(const CollectingSink& sink, int rank) {
  std::vector<std::string> out = sink.texts(rank, Stream::kStdout);
  return out.empty() ? -1 : static_cast<pid_t>(std::stoi(out[0]));
}

TEST(ProcessTest, StopKillsGrandchildrenInTheGroup) {
  CollectingSink sink;
  PosixSpawner spawner;
  SpawnResult r = spawner.spawn({sh("sleep 60 & echo $!; wait")}, &sink, nullptr);
  ASSERT_TRUE(r.ok()) << r.error;
  ASSERT_TRUE(eventually([&] { return firstPid(sink, 0) > 0; }, 5s));
  pid_t grandchild = firstPid(sink, 0);
  ASSERT_FALSE(processGone(grandchild));
  r.group->stop(SIGTERM, 1s);
  EXPECT_TRUE(eventually([&] { return processGone(grandchild); }, 2s));
}

TEST(ProcessTest, DestroyingTheGroupKillsEverything) {
  CollectingSink sink;
  PosixSpawner spawner;
  SpawnResult r = spawner.spawn({sh("trap '' TERM; sleep 60 & echo $!; sleep 60"), sh("sleep 60")},
                                &sink, nullptr);
  ASSERT_TRUE(r.ok()) << r.error;
  ASSERT_TRUE(eventually([&] { return firstPid(sink, 0) > 0; }, 5s));
  std::vector<pid_t> pids{firstPid(sink, 0), r.group->pid(0), r.group->pid(1)};
  auto start = Clock::now();
  r.group.reset();
  EXPECT_LT(Clock::now() - start, 2s);  // SIGKILL, no grace
  for (pid_t pid : pids) EXPECT_TRUE(eventually([&] { return processGone(pid); }, 2s)) << pid;
}

TEST(ProcessTest, ExecFailureOfMissingProgramIsAnErrorNamingIt) {
  PosixSpawner spawner;
  SpawnResult r = spawner.spawn({{{"/no/such/hvd-program"}, {}, ""}}, nullptr, nullptr);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.error.find("'/no/such/hvd-program'"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("No such file or directory"), std::string::npos) << r.error;

  r = spawner.spawn({sh("sleep 60"), {{"hvd-no-such-tool"}, {"PATH=/bin"}, ""}}, nullptr, nullptr);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.error.find("rank 1: cannot execute 'hvd-no-such-tool'"), std::string::npos)
      << r.error;
  EXPECT_NE(r.error.find("PATH=/bin"), std::string::npos) << r.error;
}

TEST(ProcessTest, ExecFailureOfNonExecutableFileAndBadCwd) {
  std::string dir = makeTempDir();
  std::string script = dir + "/not-executable";
  std::ofstream(script) << "#!/bin/sh\nexit 0\n";
  ASSERT_EQ(chmod(script.c_str(), 0644), 0);
  PosixSpawner spawner;
  SpawnResult r = spawner.spawn({{{script}, {}, ""}}, nullptr, nullptr);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.error.find(script), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("Permission denied"), std::string::npos) << r.error;

  r = spawner.spawn({sh("true", dir + "/missing")}, nullptr, nullptr);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.error.find("cannot change directory to '" + dir + "/missing'"), std::string::npos)
      << r.error;
  EXPECT_NE(r.error.find("/bin/sh"), std::string::npos) << r.error;
}

TEST(ProcessTest, GroupIsLedByFirstRankAndSharedByAll) {
  PosixSpawner spawner;
  SpawnResult r = spawner.spawn({sh("sleep 60"), sh("sleep 60"), sh("sleep 60")}, nullptr, nullptr);
  ASSERT_TRUE(r.ok()) << r.error;
  ASSERT_EQ(r.group->size(), 3);
  EXPECT_EQ(r.group->pgid(), r.group->pid(0));
  EXPECT_NE(r.group->pgid(), getpgrp());
  for (int rank = 0; rank < 3; ++rank) EXPECT_EQ(getpgid(r.group->pid(rank)), r.group->pgid());
  r.group->stop(SIGTERM, 5s);
  for (int rank = 0; rank < 3; ++rank) EXPECT_EQ(r.group->exitStatus(rank)->signal, SIGTERM);
}

TEST(ProcessTest, ExitCallbackStopsTheRestWhenOneRankFails) {
  std::atomic<ProcessGroup*> group{nullptr};
  std::mutex mu;
  std::vector<std::pair<int, ExitStatus>> exits;
  ExitCallback onExit = [&](int rank, const ExitStatus& s) {
    {
      std::lock_guard<std::mutex> lock(mu);
      exits.push_back({rank, s});
    }
    if (!s.success() && group.load() != nullptr) group.load()->requestStop(SIGTERM, 5s);
  };
  PosixSpawner spawner;
  SpawnResult r = spawner.spawn({sh("sleep 0.5; exit 3"), sh("sleep 60")}, nullptr, onExit);
  ASSERT_TRUE(r.ok()) << r.error;
  group = r.group.get();
  ASSERT_TRUE(r.group->waitAll(10s));
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(exits.size(), 2u);
  EXPECT_EQ(exits[0].first, 0);
  EXPECT_EQ(exits[0].second.exitCode, 3);
  EXPECT_EQ(exits[1].first, 1);
  EXPECT_EQ(exits[1].second.signal, SIGTERM);
}

// A sink that throws is a bug above the supervisor; it must still not take the process down
// (std::terminate) nor leave a rank running unseen or a waiter waiting forever.
TEST(ProcessTest, ASinkThatThrowsEndsTheGroupInsteadOfTheProcess) {
  class ThrowingSink : public OutputSink {
   public:
    void line(int, Stream, std::string_view) override { throw std::runtime_error("sink broke"); }
  };
  ThrowingSink sink;
  std::mutex mu;
  std::vector<std::pair<int, ExitStatus>> exits;
  ExitCallback onExit = [&](int rank, const ExitStatus& s) {
    std::lock_guard<std::mutex> lock(mu);
    exits.push_back({rank, s});
  };
  PosixSpawner spawner;
  SpawnResult r = spawner.spawn({sh("echo hello; sleep 60"), sh("sleep 60")}, &sink, onExit);
  ASSERT_TRUE(r.ok()) << r.error;
  const pid_t pids[] = {r.group->pid(0), r.group->pid(1)};
  ASSERT_TRUE(r.group->waitAll(10s)) << "the supervisor's failure must end the group";
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_TRUE(r.group->exitStatus(rank).has_value()) << rank;
    EXPECT_EQ(r.group->exitStatus(rank)->signal, SIGKILL) << rank;
    EXPECT_TRUE(eventually([&] { return processGone(pids[rank]); }, 5s)) << rank;
  }
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(exits.size(), 2u);
  EXPECT_EQ(exits[0].second.signal, SIGKILL);
  EXPECT_EQ(exits[1].second.signal, SIGKILL);
}

TEST(ProcessFakeTest, RecordsSpecsAndDeliversEmittedLinesAndExits) {
  FakeSpawner spawner;
  CollectingSink sink;
  std::vector<std::pair<int, ExitStatus>> exits;
  SpawnResult r = spawner.spawn({sh("a"), sh("b")}, &sink, [&](int rank, const ExitStatus& s) {
    exits.push_back({rank, s});
  });
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(spawner.groupCount(), 1u);
  auto control = spawner.group(0);
  ASSERT_EQ(control->specs().size(), 2u);
  EXPECT_EQ(control->specs()[1].argv[2], "b");
  control->emitLine(1, Stream::kStderr, "boom");
  control->emitExit(1, ExitStatus{3, 0});
  control->emitExit(1, ExitStatus{4, 0});  // a rank exits once
  EXPECT_EQ(sink.texts(1, Stream::kStderr), std::vector<std::string>{"boom"});
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].second.exitCode, 3);
  EXPECT_FALSE(r.group->waitAll(0ms));
  r.group->stop(SIGINT, 2s);
  ASSERT_EQ(control->stopRequests().size(), 1u);
  EXPECT_EQ(control->stopRequests()[0].signal, SIGINT);
  EXPECT_EQ(control->stopRequests()[0].grace, 2s);
  EXPECT_EQ(r.group->exitStatus(0)->signal, SIGINT);
  EXPECT_EQ(r.group->exitStatus(1)->exitCode, 3);
  EXPECT_TRUE(r.group->waitAll(0ms));
  r.group.reset();
  EXPECT_TRUE(control->destroyed());
}

TEST(ProcessFakeTest, FailNextSpawnReturnsTheErrorOnce) {
  FakeSpawner spawner;
  spawner.failNextSpawn("rank 0: cannot execute 'x': No such file or directory");
  SpawnResult r = spawner.spawn({sh("a")}, nullptr, nullptr);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.error, "rank 0: cannot execute 'x': No such file or directory");
  EXPECT_EQ(spawner.groupCount(), 0u);
  EXPECT_TRUE(spawner.spawn({sh("a")}, nullptr, nullptr).ok());
  EXPECT_EQ(spawner.groupCount(), 1u);
}

}  // namespace
}  // namespace hvd::agent::process
