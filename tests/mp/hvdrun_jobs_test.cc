// Jobs that outlive the terminal, end to end with the real executables: an hvdagent on
// 127.0.0.1 with its own key and state directory, and hvdrun's submit, ps, status, logs, attach
// and cancel against it. The ranks are /bin/sh one-liners; a rank that waits for a file lets a
// test decide when the job ends.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/agent_jobs_fixture.h"
#include "common/agent_process.h"
#include "common/test_support.h"

namespace {

using namespace hvd::test::agent_process;
using hvd::test::Process;
using hvd::test::ProcessOptions;
using hvd::test::ProcessResult;
using hvd::test::TempDir;

class HvdrunJobsTest : public hvd::test::agent_process::AgentJobsTest {};

// Each rank starts a background child and prints its pid: the group must go, not only the ranks.
constexpr const char* kStartsAChild = "sleep 60 & echo child $!; wait";

// Waits for $DIR/go, so the test ends the job.
constexpr const char* kWaitForGo =
    "echo start $HVD_RANK; while [ ! -e \"$DIR/go\" ]; do sleep 0.05; done; echo done $HVD_RANK";

TEST_F(HvdrunJobsTest, SubmitThenPsStatusAndLogsFollowUntilCompleted) {
  const std::string id = submit(2, kWaitForGo);
  ASSERT_FALSE(id.empty());

  const ProcessResult ps = hvdrun("ps", {});
  EXPECT_EQ(ps.status, 0) << ps.err;
  EXPECT_TRUE(std::regex_search(ps.out, std::regex(id + R"( +RUNNING +2 +localhost)"))) << ps.out;

  const std::string running = status(id);
  EXPECT_NE(running.find("job " + id + ": RUNNING"), std::string::npos) << running;
  const std::vector<pid_t> pids = rankPids(running);
  ASSERT_EQ(pids.size(), 2u) << running;
  for (pid_t pid : pids) EXPECT_FALSE(deadOrZombie(pid)) << "rank pid " << pid << " runs";

  // logs -f follows: the start lines, then (after go) the rest, and it ends with the job.
  Process follow(argv("logs", {id, "-f"}), options());
  ASSERT_TRUE(follow.waitForOutput(
      [](const std::string& out) {
        return out.find("[0]<stdout>: start 0") != std::string::npos &&
               out.find("[1]<stdout>: start 1") != std::string::npos;
      },
      20s))
      << follow.out();
  touch("go");
  const ProcessResult followed = follow.finish(20s);
  EXPECT_EQ(followed.status, 0) << followed.err;
  EXPECT_NE(followed.out.find("[0]<stdout>: done 0"), std::string::npos) << followed.out;
  EXPECT_NE(followed.out.find("[1]<stdout>: done 1"), std::string::npos) << followed.out;

  const std::string done = waitEnded(id);
  EXPECT_NE(done.find("job " + id + ": COMPLETED"), std::string::npos) << done;
  EXPECT_NE(done.find("exit code   0"), std::string::npos) << done;
  EXPECT_TRUE(std::regex_search(done, std::regex(R"(\n  1 +localhost +\d+ +EXITED +0\n)"))) << done;
  for (pid_t pid : pids) EXPECT_TRUE(waitUntil([&] { return deadOrZombie(pid); }, 5s));

  // After the end: the whole log, in order per rank, and --rank / --tail.
  const ProcessResult all = hvdrun("logs", {id});
  EXPECT_EQ(all.status, 0);
  EXPECT_LT(all.out.find("[1]<stdout>: start 1"), all.out.find("[1]<stdout>: done 1")) << all.out;
  const ProcessResult one = hvdrun("logs", {id, "--rank", "1", "--tail", "1"});
  EXPECT_EQ(one.out, "[1]<stdout>: done 1\n");
}

TEST_F(HvdrunJobsTest, AFailingJobIsFailedWithItsRootCauseAndAttachExitsWithItsCode) {
  const std::string id =
      submit(2, "if [ $HVD_RANK = 1 ]; then echo boom on one >&2; exit 3; fi; exec sleep 30");
  const std::string text = waitEnded(id);
  EXPECT_NE(text.find("job " + id + ": FAILED"), std::string::npos) << text;
  EXPECT_NE(text.find("cause       rank 1 on localhost exited with code 3"), std::string::npos)
      << text;
  EXPECT_NE(text.find("    boom on one"), std::string::npos) << text;
  EXPECT_TRUE(std::regex_search(text, std::regex(R"(\n  1 +localhost +\d+ +EXITED +3\n)"))) << text;

  const ProcessResult attach = hvdrun("attach", {id});
  EXPECT_EQ(attach.status, 3) << attach.err;
  EXPECT_NE(attach.err.find("rank 1 on localhost exited with code 3"), std::string::npos)
      << attach.err;
  const ProcessResult errors = hvdrun("logs", {id, "--stderr"});
  EXPECT_EQ(errors.out, "") << "the ranks' stderr goes to hvdrun's stderr";
  EXPECT_EQ(errors.err, "[1]<stderr>: boom on one\n");
}

TEST_F(HvdrunJobsTest, CancelEndsCancelledWithNoProcessLeftAndSaysSoWhenItIsOver) {
  const std::string id = submit(2, kStartsAChild);
  const std::vector<pid_t> children = childPids(id, 2);
  ASSERT_EQ(children.size(), 2u);
  const std::vector<pid_t> ranks = rankPids(status(id));
  ASSERT_EQ(ranks.size(), 2u);

  const ProcessResult cancel = hvdrun("cancel", {id, "--grace", "1"});
  EXPECT_EQ(cancel.status, 0) << cancel.err;
  EXPECT_EQ(cancel.out, "job " + id + " CANCELLED\n");
  const std::string text = status(id);
  EXPECT_NE(text.find("job " + id + ": CANCELLED"), std::string::npos) << text;
  EXPECT_NE(text.find("exit code   130"), std::string::npos) << text;
  for (pid_t pid : ranks) EXPECT_TRUE(waitUntil([&] { return deadOrZombie(pid); }, 5s)) << pid;
  for (pid_t pid : children) EXPECT_TRUE(waitUntil([&] { return deadOrZombie(pid); }, 5s)) << pid;

  const ProcessResult again = hvdrun("cancel", {id});
  EXPECT_EQ(again.status, 0);
  EXPECT_EQ(again.out, "job " + id + " already ended (CANCELLED); nothing to cancel\n");
  EXPECT_NE(status(id).find(": CANCELLED"), std::string::npos) << "nothing changed";

  const ProcessResult unknown = hvdrun("cancel", {"hvd-000000"});
  EXPECT_EQ(unknown.status, 1);
  EXPECT_NE(unknown.err.find("no job 'hvd-000000'"), std::string::npos) << unknown.err;
}

TEST_F(HvdrunJobsTest, TimeLimitEndsInTimeout) {
  const auto start = Clock::now();
  const std::string id = submit(2, "exec sleep 30", {"--time-limit", "2", "--grace", "1"});
  const std::string text = waitEnded(id, 20s);
  const auto took = Clock::now() - start;
  EXPECT_NE(text.find("job " + id + ": TIMEOUT"), std::string::npos) << text;
  EXPECT_NE(text.find("exit code   124"), std::string::npos) << text;
  EXPECT_NE(text.find("time limit of 2 s"), std::string::npos) << text;
  EXPECT_GE(took, 2s);
  EXPECT_LT(took, 15s);
}

TEST_F(HvdrunJobsTest, AgentKilledDuringAJobLeavesItLostAndFinishedJobsKeptAfterRestart) {
  const std::string finished = submit(1, "echo hello from the first job");
  EXPECT_NE(waitEnded(finished).find(": COMPLETED"), std::string::npos);
  const std::string running = submit(2, kStartsAChild);
  const std::vector<pid_t> children = childPids(running, 2);
  ASSERT_EQ(children.size(), 2u);

  ::kill(agent_->agent->pid(), SIGKILL);
  EXPECT_EQ(agent_->agent->waitExit(10s), 128 + SIGKILL);
  startAgent();  // same key, same state directory

  const std::string lost = status(running);
  EXPECT_NE(lost.find("job " + running + ": LOST"), std::string::npos) << lost;
  EXPECT_NE(lost.find("exit code   75"), std::string::npos) << lost;
  EXPECT_NE(lost.find("leader agent (pid"), std::string::npos) << lost;
  for (pid_t pid : children) {
    EXPECT_TRUE(waitUntil([&] { return deadOrZombie(pid); }, 5s)) << "orphan " << pid;
  }
  EXPECT_NE(status(finished).find(": COMPLETED"), std::string::npos);
  const ProcessResult logs = hvdrun("logs", {finished});
  EXPECT_EQ(logs.out, "[0]<stdout>: hello from the first job\n");
  const ProcessResult ps = hvdrun("ps", {});
  EXPECT_NE(ps.out.find(finished), std::string::npos) << ps.out;
  EXPECT_NE(ps.out.find(running), std::string::npos) << ps.out;
}

TEST_F(HvdrunJobsTest, AHundredThousandLinesFromFourRanksAreEachLoggedExactlyOnce) {
  constexpr int kLines = 25000;
  const std::string id =
      submit(4, "seq 1 " + std::to_string(kLines) + " | sed \"s/^/rank $HVD_RANK line /\"");
  EXPECT_NE(waitEnded(id, 60s).find(": COMPLETED"), std::string::npos);
  const ProcessResult logs = hvdrun("logs", {id}, 60s);
  ASSERT_EQ(logs.status, 0) << logs.err;
  std::vector<std::vector<int>> seen(4, std::vector<int>(kLines + 1, 0));
  size_t lines = 0, bad = 0;
  const std::regex row(R"(\[(\d)\]<stdout>: rank (\d) line (\d+))");
  size_t pos = 0;
  while (pos < logs.out.size()) {
    const size_t nl = logs.out.find('\n', pos);
    ASSERT_NE(nl, std::string::npos) << "the last line has no newline";
    const std::string line = logs.out.substr(pos, nl - pos);
    pos = nl + 1;
    ++lines;
    std::smatch m;
    if (!std::regex_match(line, m, row) || m[1] != m[2]) {
      if (++bad < 5) ADD_FAILURE() << "cut or merged: '" << line << "'";
      continue;
    }
    const int n = std::stoi(m[3].str());
    if (n >= 1 && n <= kLines) ++seen[std::stoi(m[1].str())][n];
  }
  EXPECT_EQ(lines, 4u * kLines);
  EXPECT_EQ(bad, 0u);
  for (int r = 0; r < 4; ++r) {
    for (int n = 1; n <= kLines; ++n) {
      if (seen[r][n] != 1) {
        ADD_FAILURE() << "rank " << r << " line " << n << " seen " << seen[r][n] << " times";
        return;
      }
    }
  }
}

// A deadline bounds each wait for the agent's next message, not the stream: the logs of a
// 200 MB job read through a pipe whose reader pauses 15 s (fifteen times --start-timeout)
// complete, byte-exact.
TEST_F(HvdrunJobsTest, LogsOfTwoHundredMegabytesThroughAPausedPipeCompleteByteExact) {
  constexpr int kLines = 2000000;
  const std::string pad(84, 'p');  // 100-byte lines, with "payload line N "
  const std::string id = submit(
      1, "seq 1 " + std::to_string(kLines) + " | sed \"s/^/payload line /; s/$/ " + pad + "/\"");
  EXPECT_NE(waitEnded(id, 120s).find(": COMPLETED"), std::string::npos);
  const std::string out = (dir_.path() / "logs.out").string();
  // bash's pipefail: the pipe's status is hvdrun's; the reader reads nothing for 15 s.
  std::vector<std::string> shell = {
      "/bin/bash", "-c", "set -o pipefail; \"$@\" | (sleep 15; cat > '" + out + "')", "hvdrun"};
  for (std::string& a : argv("logs", {id, "--start-timeout", "1"})) shell.push_back(a);
  const ProcessResult r = hvd::test::runProcess(shell, 180s, options());
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  std::ifstream in(out, std::ios::binary);
  std::string line;
  int n = 0;
  size_t bytes = 0;
  while (std::getline(in, line)) {
    ++n;
    bytes += line.size() + 1;
    const std::string want = "[0]<stdout>: payload line " + std::to_string(n) + " " + pad;
    if (line != want) {
      ADD_FAILURE() << "line " << n << " is '" << line << "'";
      break;
    }
  }
  EXPECT_EQ(n, kLines);
  EXPECT_GT(bytes, size_t{200} << 20);
}

// ... and an agent that stops answering is still reported within that bound: a stopped agent
// (SIGSTOP) accepts the connection and sends nothing.
TEST_F(HvdrunJobsTest, LogsOfAStoppedAgentEndUnreachableWithinTheTimeout) {
  const std::string id = submit(1, "echo hello");
  EXPECT_NE(waitEnded(id, 30s).find(": COMPLETED"), std::string::npos);
  const pid_t agent = agent_->agent->pid();
  ASSERT_EQ(::kill(agent, SIGSTOP), 0);
  const auto started = std::chrono::steady_clock::now();
  const ProcessResult r = hvdrun("logs", {id, "--start-timeout", "1"}, 30s);
  const auto took = std::chrono::steady_clock::now() - started;
  ::kill(agent, SIGCONT);
  EXPECT_EQ(r.status, 69) << r.out << r.err;  // agent unreachable
  EXPECT_NE(r.err.find("is unreachable: no answer within 1 s"), std::string::npos) << r.err;
  EXPECT_LT(took, 10s);
  EXPECT_EQ(hvdrun("logs", {id}).out, "[0]<stdout>: hello\n");  // it answers again
}

// The queue holds only jobs that wait for resources: on an idle agent (no slot limit on a
// CPU-only node), submits at once with --no-queue all start, none refused for a job that was
// merely being started ahead of it.
TEST_F(HvdrunJobsTest, ConcurrentNoQueueSubmitsOnAnIdleAgentAllRun) {
  constexpr int kJobs = 20;
  std::vector<std::unique_ptr<Process>> submits;
  for (int i = 0; i < kJobs; ++i) {
    submits.push_back(std::make_unique<Process>(
        argv("submit", {"-np", "1", "--no-queue", "--", "/bin/true"}), options()));
  }
  std::vector<std::string> ids;
  for (auto& p : submits) {
    const ProcessResult r = p->finish(60s);
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    std::smatch m;
    const std::regex id("^(hvd-[0-9a-f]{6})\n$");
    if (std::regex_match(r.out, m, id)) ids.push_back(m[1].str());
  }
  ASSERT_EQ(ids.size(), static_cast<size_t>(kJobs));
  for (const std::string& id : ids) {
    EXPECT_NE(waitEnded(id, 60s).find(": COMPLETED"), std::string::npos) << id;
  }
}

// A stopped rank (SIGSTOP) is continued with the stop signal: a cancel ends the job well
// inside its grace instead of waiting the grace out for SIGKILL.
TEST_F(HvdrunJobsTest, CancelReachesAStoppedRankWithoutWaitingOutTheGrace) {
  const std::string id = submit(2,
                                "echo up $HVD_RANK; [ \"$HVD_RANK\" = 1 ] && kill -STOP $$; "
                                "exec sleep 60");
  ASSERT_EQ(logCaptures(id, R"(up (\d+))", 2).size(), 2u);
  ASSERT_TRUE(waitUntil([&] { return status(id).find("RUNNING") != std::string::npos; }, 10s));
  std::this_thread::sleep_for(300ms);  // rank 1 has stopped itself by now
  const auto started = std::chrono::steady_clock::now();
  const ProcessResult cancel = hvdrun("cancel", {id, "--grace", "30"}, 60s);
  EXPECT_EQ(cancel.status, 0) << cancel.out << cancel.err;
  EXPECT_LT(std::chrono::steady_clock::now() - started, 10s);
  EXPECT_NE(waitEnded(id).find(": CANCELLED"), std::string::npos);
}

// A rank that fails because another one is stopped (it waited for it and gave up) is the root
// cause by the clock; the summary names the stopped rank beside it.
TEST_F(HvdrunJobsTest, TheSummaryOfAFailureNamesTheRankThatStoodStopped) {
  const std::string id = submit(2,
                                "[ \"$HVD_RANK\" = 1 ] && kill -STOP $$; "
                                "[ \"$HVD_RANK\" = 0 ] && { sleep 2; exit 1; }; exec sleep 60");
  const std::string ended = waitEnded(id, 30s);
  EXPECT_NE(ended.find(": FAILED"), std::string::npos) << ended;
  EXPECT_NE(ended.find("cause       rank 0 on localhost exited with code 1; rank(s) 1 on localhost "
                       "stood stopped at the time (SIGSTOP or the like)"),
            std::string::npos)
      << ended;
  // And the log says which rank stood still, where it did.
  const ProcessResult logs = hvdrun("logs", {id});
  EXPECT_NE(logs.err.find("[1]<stderr>: [hvd] this rank (pid "), std::string::npos) << logs.err;
  EXPECT_NE(logs.err.find(") is stopped by SIGSTOP: the other ranks wait for it"),
            std::string::npos)
      << logs.err;
}

// Attached once it says so on stderr (output is separate: ProcessOptions::kSeparate); attach
// follows from that moment on.
bool waitUntilAttached(Process& attach) {
  return waitUntil(
      [&] {
        attach.waitForOutput([](const std::string&) { return false; }, 100ms);
        return attach.err().find("attached to job") != std::string::npos;
      },
      10s);
}

TEST_F(HvdrunJobsTest, AttachFollowsFromNowAndCtrlCDetachesWithoutStoppingTheJob) {
  const std::string id = submit(1, kWaitForGo);
  ASSERT_TRUE(waitUntil(
      [&] { return hvdrun("logs", {id}).out.find("start 0") != std::string::npos; }, 20s));
  Process attach(argv("attach", {id}), options());
  ASSERT_TRUE(waitUntilAttached(attach)) << attach.err();
  attach.kill(SIGINT);
  const ProcessResult detached = attach.finish(10s);
  EXPECT_EQ(detached.status, 0) << detached.err;
  EXPECT_NE(detached.err.find("detached from job " + id), std::string::npos) << detached.err;
  EXPECT_EQ(detached.out.find("start 0"), std::string::npos) << "attach starts from now";
  EXPECT_NE(status(id).find(": RUNNING"), std::string::npos) << "detaching stops nothing";

  Process again(argv("attach", {id}), options());
  // Released only once attached: a slow start (sanitizers) would otherwise miss "done 0".
  ASSERT_TRUE(waitUntilAttached(again)) << again.err();
  touch("go");
  const ProcessResult followed = again.finish(20s);
  EXPECT_EQ(followed.status, 0) << followed.err;
  EXPECT_EQ(followed.out, "[0]<stdout>: done 0\n");
}

// The agent's state directory on a 2 MiB tmpfs: what a full disk does to logs, records and
// submits. Mounting needs root (CI runs as root); elsewhere the cases are skipped.
class FullStateDiskTest : public AgentJobsTest {
 protected:
  void SetUp() override {
    if (!isRoot()) GTEST_SKIP() << "mounting a tmpfs needs root";
    state_ = dir_.path() / "state";
    fs::create_directory(state_);
    ASSERT_EQ(::mount("tmpfs", state_.c_str(), "tmpfs", 0, "size=2m,mode=0700"), 0)
        << std::strerror(errno);
    mounted_ = true;
    startAgent();
  }
  void TearDown() override {
    agent_.reset();
    if (mounted_) ::umount2(state_.c_str(), MNT_DETACH);
  }

  // Takes the file system's every free byte (a file of another program's, as far as the agent
  // knows); unfill() gives them back.
  void fill() {
    const int fd = ::open((state_ / "filler").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    const std::string block(4096, 'f');
    for (size_t size : {size_t{4096}, size_t{1}}) {
      while (::write(fd, block.data(), size) == static_cast<ssize_t>(size)) {
      }
    }
    ::close(fd);
  }
  void unfill() { fs::remove(state_ / "filler"); }

  // The stdout lines of `hvdrun logs` must be "<prefix>1", "<prefix>2", ... whole and in order:
  // how many.
  static size_t consecutiveLines(const std::string& out, const std::string& prefix) {
    size_t n = 0, pos = 0;
    while (pos < out.size()) {
      const size_t nl = out.find('\n', pos);
      if (nl == std::string::npos) {
        ADD_FAILURE() << "the last line has no newline";
        break;
      }
      const std::string line = out.substr(pos, nl - pos);
      if (line != prefix + std::to_string(n + 1)) {
        ADD_FAILURE() << "line " << n + 1 << " is '" << line << "'";
        break;
      }
      ++n;
      pos = nl + 1;
    }
    return n;
  }

  fs::path state_;
  bool mounted_ = false;
};

// A job that prints more than the disk holds: its log stops short of the last MiB (kept for the
// agent's records), every logged line whole and in order, and both the log and the record say
// how many lines are missing and why, not the --max-log-mb.
TEST_F(FullStateDiskTest, ALogThatFillsTheDiskEndsOnWholeLinesAndSaysWhy) {
  constexpr int kLines = 60000;  // about 2.8 MB as logged
  const std::string id =
      submit(1, "seq 1 " + std::to_string(kLines) + " | sed \"s/^/payload line /\"");
  const std::string ended = waitEnded(id, 60s);
  EXPECT_NE(ended.find(": COMPLETED"), std::string::npos) << ended;
  const std::regex dropped(R"(log +(\d+) line\(s\) not logged \(the file system of the agent's )"
                           R"(state directory is nearly full)");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(ended, m, dropped)) << ended;
  const size_t missing = std::stoul(m[1].str());

  const ProcessResult logs = hvdrun("logs", {id}, 60s);
  ASSERT_EQ(logs.status, 0) << logs.err;
  const size_t logged = consecutiveLines(logs.out, "[0]<stdout>: payload line ");
  EXPECT_GT(logged, 1000u);
  EXPECT_EQ(logged + missing, static_cast<size_t>(kLines));
  EXPECT_NE(logs.err.find("[hvd] " + std::to_string(missing) +
                          " line(s) were not logged: the file system of the agent's state "
                          "directory is nearly full"),
            std::string::npos)
      << logs.err;
  EXPECT_EQ(logs.err.find("--max-log-mb"), std::string::npos) << logs.err;
}

// The disk full to the last byte while jobs run: a new submit is refused saying so (exit 74, not
// a usage error); jobs that end meanwhile end COMPLETED in their records, through the agent's
// reserve, or by the retry once room returns; and stay COMPLETED across a SIGKILL and a SIGTERM
// restart of the agent.
TEST_F(FullStateDiskTest, FinishedJobsStayFinishedAcrossRestartsAndASubmitSaysTheDiskIsFull) {
  const std::string counts =
      "i=0; while [ ! -e \"$DIR/$GO\" ]; do i=$((i+1)); echo \"line $i\"; sleep 0.001; done";
  const std::string first = submit(1, counts, {"-x", "GO=go1"});
  const std::string second = submit(1, counts, {"-x", "GO=go2"});
  ASSERT_EQ(logCaptures(first, R"(line (\d+))", 5).size() >= 5, true);
  ASSERT_EQ(logCaptures(second, R"(line (\d+))", 5).size() >= 5, true);

  fill();
  // Long enough for the jobs' lines to outgrow the last page of their logs (tmpfs pages).
  std::this_thread::sleep_for(1s);
  const ProcessResult refused = hvdrun("submit", {"-np", "1", "--", "/bin/true"});
  EXPECT_EQ(refused.status, 74) << refused.out << refused.err;
  EXPECT_EQ(refused.out, "");
  EXPECT_NE(refused.err.find("hvdrun: the agent on localhost (127.0.0.1:" +
                             std::to_string(agent_->port) + ") cannot record the job: writing "),
            std::string::npos)
      << refused.err;
  EXPECT_NE(refused.err.find("No space left on device"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find(state_.string()), std::string::npos) << refused.err;

  // The first ends on a full disk: its record takes the reserve.
  touch("go1");
  EXPECT_NE(waitEnded(first).find(": COMPLETED"), std::string::npos);
  // The second ends with no reserve left: the agent still says COMPLETED, and the record is on
  // disk once there is room. (Whether its last write failed depends on which page the job's own
  // teardown freed first; the retry itself is JobHistoryTest.AFailedRecordWriteIsRetried...)
  fill();
  touch("go2");
  EXPECT_NE(waitEnded(second).find(": COMPLETED"), std::string::npos);
  const fs::path record = state_ / "jobs" / second / "record.json";
  const auto recorded = [&] {
    std::ifstream in(record);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return text.find("\"JOB_COMPLETED\"") != std::string::npos;
  };
  unfill();
  EXPECT_TRUE(waitUntil(recorded, 10s));

  for (int signal : {SIGKILL, SIGTERM}) {
    ::kill(agent_->agent->pid(), signal);
    EXPECT_EQ(agent_->agent->waitExit(20s), signal == SIGKILL ? 128 + SIGKILL : 0);
    startAgent();
    for (const std::string& id : {first, second}) {
      const std::string text = status(id);
      EXPECT_NE(text.find("job " + id + ": COMPLETED"), std::string::npos) << text;
      EXPECT_NE(text.find("exit code   0"), std::string::npos) << text;
    }
  }
  // Every line each job logged is whole and in order; lines lost to the full disk are said.
  for (const std::string& id : {first, second}) {
    const ProcessResult logs = hvdrun("logs", {id});
    ASSERT_EQ(logs.status, 0) << logs.err;
    EXPECT_GE(consecutiveLines(logs.out, "[0]<stdout>: line "), 5u) << id;
    EXPECT_NE(logs.err.find("line(s) were not logged"), std::string::npos) << logs.err;
  }
}

}  // namespace

namespace {

// --time-limit needs no agent: an embedded run ends the same way.
TEST(HvdrunTimeLimit, AnEmbeddedRunPastItsLimitIsStoppedWithExit124) {
  const auto start = Clock::now();
  const ProcessResult r = hvd::test::runProcess(
      {HVDRUN_PATH, "-np", "2", "--time-limit", "1", "--grace", "1", "--", "/bin/sleep", "30"},
      20s);
  EXPECT_EQ(r.status, 124) << r.out << r.err;
  EXPECT_NE(r.err.find("reached its time limit of 1 s and was stopped"), std::string::npos)
      << r.err;
  EXPECT_GE(Clock::now() - start, 1s);
  EXPECT_LT(Clock::now() - start, 10s);
}

}  // namespace

namespace {

TEST(HvdrunSubmit, WithNoAgentOnThisMachineItSaysHowToStartOne) {
  TempDir dir;
  const fs::path key = writeKey(dir.path(), "key", 0600);
  const ProcessResult r = hvd::test::runProcess(
      {HVDRUN_PATH, "submit", "--agent-port", std::to_string(hvd::test::closedLoopbackPort()),
       "--key-file", key.string(), "-np", "1", "--", "/bin/true"},
      30s);
  EXPECT_EQ(r.status, 69) << r.err;
  EXPECT_EQ(r.out, "") << "no job id without a job";
  EXPECT_NE(r.err.find("is unreachable: connection refused"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("start one on this machine"), std::string::npos) << r.err;
}

}  // namespace
