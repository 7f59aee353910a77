// The records and logs an agent keeps of the jobs it leads (agent/records/job_history.h,
// job_log.h): what `hvdrun ps`, `status` and `logs` read, and what a restarted agent finds.
#include "agent/records/job_history.h"

#include <fcntl.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/records/atomic_file.h"
#include "agent/records/job_log.h"
#include "agent/records/job_records.h"
#include "common/test_support.h"

namespace hvd::agent::records {
namespace {

namespace fs = std::filesystem;
using process::Stream;
using test::TempDir;

std::string readAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A pid that was a process and is no more (a reaped child), with the start time it had.
std::pair<int, uint64_t> deadProcess() {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::pause();
    ::_exit(0);
  }
  const uint64_t start = processStartTime(pid).value_or(0);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return {pid, start};
}

v1::JobInfo job(const std::string& id, v1::JobState state, int64_t submitted) {
  v1::JobInfo info;
  info.set_job_id(id);
  info.set_state(state);
  info.set_np(2);
  info.add_hosts("node-a");
  info.add_argv("./train");
  info.set_submitted_unix_ms(submitted);
  v1::RankInfo* rank = info.add_ranks();
  rank->set_rank(0);
  rank->set_host("node-a");
  rank->set_pid(4242);
  rank->set_state(state == v1::JOB_RUNNING ? v1::RANK_RUNNING : v1::RANK_EXITED);
  return info;
}

// Rewrites a record on disk as if `leader` had written it.
void setLeader(const fs::path& stateDir, const std::string& id, int pid, uint64_t start) {
  const fs::path path = stateDir / "jobs" / id / "record.json";
  std::string text = readAll(path.string());
  v1::JobInfo info;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(text, &info).ok());
  info.set_leader_pid(pid);
  info.set_leader_start_ticks(start);
  std::string json;
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(info, &json).ok());
  std::ofstream(path, std::ios::trunc) << json;
}

TEST(JobLog, LinesRoundTripWithTheirRankStreamHostAndBytes) {
  const std::string text = std::string("spaces  and\ttabs \x01\xff", 20);
  const std::string formatted = formatLogLine(1796155586324, 12, Stream::kStderr, "node-b", text);
  EXPECT_EQ(formatted.rfind("1796155586324 12 E node-b ", 0), 0u) << formatted;
  const std::optional<LogLine> line = parseLogLine(formatted);
  ASSERT_TRUE(line.has_value());
  EXPECT_EQ(line->unixMs, 1796155586324);
  EXPECT_EQ(line->rank, 12);
  EXPECT_EQ(line->stream, Stream::kStderr);
  EXPECT_EQ(line->host, "node-b");
  EXPECT_EQ(line->text, text);
  EXPECT_EQ(parseLogLine("12 x O h text"), std::nullopt);
  EXPECT_EQ(parseLogLine("12 1 Q h text"), std::nullopt);
  EXPECT_EQ(parseLogLine("12 1 O"), std::nullopt);
  EXPECT_EQ(parseLogLine("12 1 O h ")->text, "");  // an empty line is a line
}

TEST(JobLog, ALineOfARestartCarriesItsAttemptAndTheFirstAttemptsLinesReadAsBefore) {
  EXPECT_EQ(formatLogLine(5, 3, Stream::kStdout, "h", "x"), "5 3 O h x");
  const std::string restarted = formatLogLine(5, 3, Stream::kStdout, "h", "x", 2);
  EXPECT_EQ(restarted, "5 3@2 O h x");
  const std::optional<LogLine> line = parseLogLine(restarted);
  ASSERT_TRUE(line.has_value());
  EXPECT_EQ(line->rank, 3);
  EXPECT_EQ(line->attempt, 2);
  EXPECT_EQ(line->text, "x");
  EXPECT_EQ(parseLogLine("5 3 O h x")->attempt, 0);
  EXPECT_EQ(parseLogLine("5 3@0 O h x"), std::nullopt);
  EXPECT_EQ(parseLogLine("5 3@ O h x"), std::nullopt);
  EXPECT_EQ(parseLogLine("5 3@a O h x"), std::nullopt);
  EXPECT_EQ(parseLogLine("5 @1 O h x"), std::nullopt);
}

TEST(JobLog, ReadersFilterByRankAndStreamAndTail) {
  TempDir dir;
  const std::string path = dir.file("output.log");
  {
    JobLogWriter log(path, 1 << 20);
    for (int i = 0; i < 40; ++i) {
      ASSERT_TRUE(log.append(i, i % 4, i % 5 == 0 ? Stream::kStderr : Stream::kStdout, "h",
                             "line " + std::to_string(i)));
    }
  }
  uint64_t offset = 0;
  EXPECT_EQ(readLogLines(path, &offset, {}).size(), 40u);
  EXPECT_EQ(offset, logSize(path));
  EXPECT_TRUE(readLogLines(path, &offset, {}).empty()) << "nothing new";

  LogFilter ranks;
  ranks.ranks = std::make_pair(1, 2);
  offset = 0;
  const std::vector<LogLine> two = readLogLines(path, &offset, ranks);
  ASSERT_EQ(two.size(), 20u);
  for (const LogLine& l : two) EXPECT_TRUE(l.rank == 1 || l.rank == 2) << l.rank;

  LogFilter errors;
  errors.stderrOnly = true;
  offset = 0;
  EXPECT_EQ(readLogLines(path, &offset, errors).size(), 8u);

  uint64_t end = 0;
  const std::vector<LogLine> tail = tailLogLines(path, 3, ranks, &end);
  ASSERT_EQ(tail.size(), 3u);
  EXPECT_EQ(tail[0].text, "line 34");
  EXPECT_EQ(tail[1].text, "line 37");
  EXPECT_EQ(tail[2].text, "line 38");
  EXPECT_EQ(end, logSize(path));
}

TEST(JobLog, AnIncompleteLastLineWaitsForItsNewline) {
  TempDir dir;
  const std::string path = dir.file("output.log");
  const std::string whole = formatLogLine(1, 0, Stream::kStdout, "h", "complete") + "\n";
  const std::string half = formatLogLine(2, 1, Stream::kStdout, "h", "half");
  {
    std::ofstream out(path, std::ios::binary);
    out << whole << half.substr(0, 7);
  }
  uint64_t offset = 0;
  std::vector<LogLine> lines = readLogLines(path, &offset, {});
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].text, "complete");
  EXPECT_EQ(offset, whole.size());
  {
    std::ofstream out(path, std::ios::binary | std::ios::app);
    out << half.substr(7) << "\n";
  }
  lines = readLogLines(path, &offset, {});
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].text, "half");
}

TEST(JobLog, LinesPastTheLimitAreCountedAndNoticed) {
  TempDir dir;
  const std::string path = dir.file("output.log");
  JobLogWriter log(path, 100);
  EXPECT_TRUE(log.append(1, 0, Stream::kStdout, "h", "first"));
  EXPECT_TRUE(log.append(1, 0, Stream::kStdout, "h", "second"));
  EXPECT_FALSE(log.append(1, 0, Stream::kStdout, "h", std::string(200, 'x')));
  EXPECT_FALSE(log.append(1, 1, Stream::kStdout, "h", std::string(80, 'y')));
  EXPECT_EQ(log.dropped(), 2u);
  log.close();
  EXPECT_FALSE(log.append(1, 0, Stream::kStdout, "h", "after close"));
  uint64_t offset = 0;
  const std::vector<LogLine> lines = readLogLines(path, &offset, {});
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1].text, "second");
  EXPECT_NE(lines[2].text.find("2 line(s) were not logged"), std::string::npos) << lines[2].text;
  EXPECT_EQ(lines[2].stream, Stream::kStderr);
}

TEST(JobLog, FourWritersOfManyLinesNeverCutOrMergeALine) {
  TempDir dir;
  const std::string path = dir.file("output.log");
  constexpr int kRanks = 4;
  constexpr int kLines = 25000;
  {
    JobLogWriter log(path, uint64_t{1} << 30);
    std::vector<std::thread> writers;
    for (int r = 0; r < kRanks; ++r) {
      writers.emplace_back([&log, r] {
        for (int i = 0; i < kLines; ++i) {
          log.append(i, r, Stream::kStdout, "h",
                     "rank " + std::to_string(r) + " line " + std::to_string(i) +
                         std::string(i % 97, '.'));
        }
      });
    }
    for (std::thread& t : writers) t.join();
  }
  // Read in small chunks, as a follower would.
  std::vector<std::set<int>> seen(kRanks);
  uint64_t offset = 0;
  size_t total = 0;
  for (;;) {
    const std::vector<LogLine> lines = readLogLines(path, &offset, {}, 4096);
    if (lines.empty()) break;
    for (const LogLine& l : lines) {
      ASSERT_GE(l.rank, 0);
      ASSERT_LT(l.rank, kRanks);
      const std::string expect = "rank " + std::to_string(l.rank) + " line " +
                                 std::to_string(l.unixMs) + std::string(l.unixMs % 97, '.');
      ASSERT_EQ(l.text, expect);
      EXPECT_TRUE(seen[l.rank].insert(static_cast<int>(l.unixMs)).second) << "a line twice";
      ++total;
    }
  }
  EXPECT_EQ(total, static_cast<size_t>(kRanks * kLines));
  for (const std::set<int>& s : seen) EXPECT_EQ(s.size(), static_cast<size_t>(kLines));
}

TEST(JobHistoryTest, RecordsSurviveARestartAndRunningOnesOfADeadLeaderAreLost) {
  TempDir dir;
  const fs::path state = dir.path() / "state";
  std::string runningId, doneId;
  {
    JobHistory history(state.string());
    runningId = history.newJobId();
    EXPECT_EQ(runningId.rfind("hvd-", 0), 0u);
    EXPECT_EQ(runningId.size(), 10u);
    history.create(job(runningId, v1::JOB_RUNNING, 1000));
    doneId = history.newJobId();
    EXPECT_NE(doneId, runningId);
    history.create(job(doneId, v1::JOB_PENDING, 2000));
    ASSERT_TRUE(history.update(doneId, [](v1::JobInfo* i) {
      i->set_state(v1::JOB_COMPLETED);
      i->mutable_end()->set_exit_code(0);
    }));
    EXPECT_FALSE(history.update("hvd-ffffff", [](v1::JobInfo*) {}));
    EXPECT_EQ(history.list().size(), 2u);
    EXPECT_EQ((fs::status(state / "jobs").permissions() & fs::perms::others_all), fs::perms::none);
  }
  // The agent that wrote them is gone (its pid no longer runs with that start time).
  const auto [deadPid, deadStart] = deadProcess();
  setLeader(state, runningId, deadPid, deadStart);
  setLeader(state, doneId, deadPid, deadStart);

  JobHistory restarted(state.string());
  EXPECT_EQ(restarted.loadReport().loaded, 2);
  EXPECT_EQ(restarted.loadReport().markedLost, 1);
  const std::vector<v1::JobInfo> jobs = restarted.list();
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].job_id(), runningId);  // oldest submission first
  EXPECT_EQ(jobs[0].state(), v1::JOB_LOST);
  EXPECT_EQ(jobs[0].end().outcome(), v1::AGENT_LOST);
  EXPECT_EQ(jobs[0].end().exit_code(), 75);
  EXPECT_NE(jobs[0].end().reason().find("pid " + std::to_string(deadPid)), std::string::npos)
      << jobs[0].end().reason();
  EXPECT_GT(jobs[0].ended_unix_ms(), 0);
  EXPECT_EQ(jobs[0].ranks(0).state(), v1::RANK_LOST);
  EXPECT_EQ(jobs[1].state(), v1::JOB_COMPLETED) << "a finished job stays as it ended";
  EXPECT_EQ(jobs[0].leader_pid(), ::getpid()) << "adopted by the restarted agent";

  // And once more: now they are this process's own, so nothing changes.
  JobHistory again(state.string());
  EXPECT_EQ(again.loadReport().markedLost, 0);
  EXPECT_EQ(again.get(runningId)->state(), v1::JOB_LOST);
}

std::string readFile(const fs::path& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A record write that fails (here: a directory where its temporary file goes) changes what
// callers see at once, and is written by flush() once it can be: a finished job is never left
// RUNNING on disk for a restart to call LOST.
TEST(JobHistoryTest, AFailedRecordWriteIsRetriedByFlushAndCallersSeeTheChangeMeanwhile) {
  TempDir dir;
  const fs::path state = dir.path() / "state";
  const std::string id = "hvd-abcdef";
  const fs::path record = state / "jobs" / id / "record.json";
  {
    JobHistory history(state.string());
    history.create(job(id, v1::JOB_RUNNING, 1000));
    EXPECT_EQ(history.flush(), 0u);
    fs::create_directory(record.string() + ".tmp");  // blocks the next write
    ASSERT_TRUE(history.update(id, [](v1::JobInfo* i) { i->set_state(v1::JOB_COMPLETED); }));
    EXPECT_EQ(history.get(id)->state(), v1::JOB_COMPLETED);
    EXPECT_NE(readFile(record).find("JOB_RUNNING"), std::string::npos);
    EXPECT_EQ(history.flush(), 1u);
    EXPECT_EQ(history.flush(), 1u);
    fs::remove(record.string() + ".tmp");
    EXPECT_EQ(history.flush(), 0u);
    EXPECT_NE(readFile(record).find("JOB_COMPLETED"), std::string::npos) << readFile(record);
  }
  const auto [deadPid, deadStart] = deadProcess();
  setLeader(state, id, deadPid, deadStart);
  JobHistory restarted(state.string());
  EXPECT_EQ(restarted.loadReport().markedLost, 0);
  EXPECT_EQ(restarted.get(id)->state(), v1::JOB_COMPLETED);
}

// A job whose first record cannot be written is not accepted: the error names the file and the
// system's reason, and nothing of the job is left.
TEST(JobHistoryTest, AJobThatCannotBeRecordedIsRefusedWithTheReasonAndLeavesNothing) {
  TempDir dir;
  const fs::path state = dir.path() / "state";
  JobHistory history(state.string());
  const std::string id = "hvd-123456";
  fs::create_directories(state / "jobs" / id / "record.json.tmp");
  try {
    history.create(job(id, v1::JOB_PENDING, 1000));
    ADD_FAILURE() << "create() accepted a job it could not record";
  } catch (const StateWriteError& e) {
    EXPECT_EQ(e.error(), EISDIR);
    const std::string what = e.what();
    EXPECT_NE(what.find("cannot record the job: writing " + (state / "jobs" / id).string() +
                        "/record.json: Is a directory"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("KiB free in " + state.string()), std::string::npos) << what;
  }
  EXPECT_FALSE(history.get(id).has_value());
  EXPECT_FALSE(fs::exists(state / "jobs" / id));
  EXPECT_TRUE(history.list().empty());
}

// The default state directory of a non-root agent with neither XDG_STATE_HOME nor HOME comes
// from the password database, never from a shared place like /tmp that another user could have
// created first. (Root only: the child becomes uid 65534, whose home is /nonexistent on Debian.)
TEST(DefaultStateDir, WithoutHomeItIsThePasswordDatabasesHomeNeverTmp) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to become another user";
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(fds[0]);
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(3);
    std::string out;
    for (const char* home : {static_cast<const char*>(nullptr), "/home/someone"}) {
      ::unsetenv("XDG_STATE_HOME");
      home ? ::setenv("HOME", home, 1) : ::unsetenv("HOME");
      out += defaultStateDir() + "\n";
    }
    ::setenv("XDG_STATE_HOME", "/state/home", 1);
    out += defaultStateDir() + "\n";
    (void)!::write(fds[1], out.data(), out.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string got;
  char buffer[512];
  for (ssize_t n; (n = ::read(fds[0], buffer, sizeof(buffer))) > 0;) got.append(buffer, n);
  ::close(fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  // nobody's home is /nonexistent on Debian; where it is "/" or missing, there is no default.
  const std::string first = got.substr(0, got.find('\n'));
  EXPECT_TRUE(first == "/nonexistent/.local/state/hvdagent" || first.empty()) << got;
  EXPECT_EQ(first.find("/tmp"), std::string::npos) << got;
  EXPECT_EQ(got.substr(got.find('\n') + 1),
            "/home/someone/.local/state/hvdagent\n/state/home/hvdagent\n");
}

// Submission order is the records' sequence, not their millisecond (a burst shares one) nor
// their ids (random); it goes on counting after a restart.
TEST(JobHistoryTest, ListIsInSubmissionOrderWithinOneMillisecondAndAcrossRestarts) {
  TempDir dir;
  const fs::path state = dir.path() / "state";
  const std::vector<std::string> ids = {"hvd-ffffff", "hvd-000000", "hvd-888888"};
  {
    JobHistory history(state.string());
    for (const std::string& id : ids) history.create(job(id, v1::JOB_QUEUED, 5000));
  }
  JobHistory restarted(state.string());
  restarted.create(job("hvd-111111", v1::JOB_QUEUED, 5000));
  std::vector<std::string> listed;
  for (const v1::JobInfo& info : restarted.list()) listed.push_back(info.job_id());
  EXPECT_EQ(listed,
            (std::vector<std::string>{"hvd-ffffff", "hvd-000000", "hvd-888888", "hvd-111111"}));
  EXPECT_EQ(restarted.get("hvd-111111")->submit_sequence(), 4u);
}

// A failed write says why (errno of the failing step, for the warning that reports it) and
// leaves no temporary file; a good one replaces the file whole.
TEST(AtomicFile, AFailedWriteLeavesErrnoAndNoTemporaryFile) {
  TempDir dir;
  errno = 0;
  EXPECT_FALSE(writeFileAtomically((dir.path() / "missing" / "f").string(), "x"));
  EXPECT_EQ(errno, ENOENT);
  const fs::path file = dir.path() / "f";
  ASSERT_TRUE(writeFileAtomically(file.string(), "first"));
  ASSERT_TRUE(writeFileAtomically(file.string(), "second"));
  std::ifstream in(file);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "second");
  EXPECT_FALSE(fs::exists(file.string() + ".tmp"));
}

TEST(JobHistoryTest, RecordsOfAnotherRunningAgentAreLeftAlone) {
  TempDir dir;
  const fs::path state = dir.path() / "state";
  std::string id;
  {
    JobHistory history(state.string());
    id = history.newJobId();
    history.create(job(id, v1::JOB_RUNNING, 1));
  }
  // The parent of this test runs, with its own start time: "another agent".
  const pid_t other = ::getppid();
  setLeader(state, id, other, processStartTime(other).value());
  JobHistory mine(state.string());
  EXPECT_EQ(mine.loadReport().otherAgents, 1);
  EXPECT_FALSE(mine.get(id).has_value());
  const std::string text = readAll((state / "jobs" / id / "record.json").string());
  EXPECT_NE(text.find("JOB_RUNNING"), std::string::npos) << "left as it was";
}

TEST(JobHistoryTest, KeepJobsRemovesTheOldestFinishedJobsAndTheirLogs) {
  TempDir dir;
  const fs::path state = dir.path() / "state";
  JobHistory history(state.string(), 2);
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) {
    ids.push_back(history.newJobId());
    history.create(job(ids.back(), i == 0 ? v1::JOB_RUNNING : v1::JOB_FAILED, 100 + i));
    std::ofstream(*history.logPath(ids.back())) << "x\n";
  }
  EXPECT_EQ(history.prune(), 1);
  EXPECT_TRUE(history.get(ids[0]).has_value()) << "running jobs are never removed";
  EXPECT_FALSE(history.get(ids[1]).has_value());
  EXPECT_FALSE(fs::exists(state / "jobs" / ids[1]));
  EXPECT_TRUE(history.get(ids[2]).has_value());
  EXPECT_TRUE(history.get(ids[3]).has_value());
  EXPECT_EQ(history.prune(), 0);
  EXPECT_FALSE(history.logPath("../../etc").has_value()) << "paths only for known jobs";
}

TEST(JobHistoryTest, UnreadableRecordsAreCountedAndLeftInPlace) {
  TempDir dir;
  const fs::path jobs = dir.path() / "state" / "jobs";
  fs::create_directories(jobs / "hvd-123456");
  std::ofstream(jobs / "hvd-123456" / "record.json") << "{ not json";
  JobHistory history((dir.path() / "state").string());
  EXPECT_EQ(history.loadReport().unreadable, 1);
  EXPECT_TRUE(history.list().empty());
  EXPECT_TRUE(fs::exists(jobs / "hvd-123456" / "record.json"));
}

}  // namespace
}  // namespace hvd::agent::records
