// The agent as an orchestrator, end to end with the real executables (docs/architecture.md
// "Resources, queue and restarts"): an hvdagent whose node has four (fake) GPUs, and jobs submitted
// with hvdrun that must never share a GPU, wait in submission order when the GPUs are taken, and
// restart as their policy says. Each rank is a /bin/sh one-liner that prints the GPUs it was
// given; a rank that waits for a file lets a test decide when a job ends.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "common/agent_jobs_fixture.h"
#include "common/agent_process.h"

namespace {

using namespace hvd::test::agent_process;
using hvd::test::Process;

class QueueTest : public AgentJobsTest {
 protected:
  std::vector<std::string> agentEnv() const override { return {"HVD_FAKE_GPUS=4"}; }

  // A job of `np` ranks that each print "gpu <rank> <CUDA_VISIBLE_DEVICES>" and wait for
  // $DIR/<gate> (no gate: exit at once).
  std::string submitGpuJob(int np, const std::string& gate, std::vector<std::string> extra = {}) {
    std::string script = "echo gpu $HVD_RANK $CUDA_VISIBLE_DEVICES";
    if (!gate.empty()) {
      script += "; while [ ! -e \"$DIR/" + gate + "\" ]; do sleep 0.05; done";
    }
    std::vector<std::string> args = {"--gpu-bind", "visible"};
    args.insert(args.end(), extra.begin(), extra.end());
    return submit(np, script, args);
  }

  // The GPUs the job's ranks printed, once all `np` lines are logged (within 20 s).
  std::vector<std::string> gpusOf(const std::string& id, size_t np) {
    return logCaptures(id, R"(gpu \d+ (\d+))", np);
  }

  // Polls status until `want` (a regex) matches it (a failure if it never does); the last text.
  std::string waitStatus(const std::string& id, const std::string& want,
                         std::chrono::milliseconds timeout = 20s) {
    std::string text;
    EXPECT_TRUE(waitUntil(
        [&] {
          text = status(id);
          return std::regex_search(text, std::regex(want));
        },
        timeout))
        << "status of " << id << " never matched '" << want << "':\n"
        << text;
    return text;
  }

  // The agent names its node by its hostname in what it says about the node's resources.
  static std::string node() {
    char name[256] = {};
    ::gethostname(name, sizeof(name) - 1);
    return name;
  }
};

TEST_F(QueueTest, ConcurrentJobsGetDisjointGpusAndAJobThatDoesNotFitWaitsForThem) {
  const std::string a = submitGpuJob(2, "go-a");
  const std::string b = submitGpuJob(2, "go-b");
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  std::vector<std::string> gpus = gpusOf(a, 2);
  const std::vector<std::string> gpusB = gpusOf(b, 2);
  ASSERT_EQ(gpus.size(), 2u);
  ASSERT_EQ(gpusB.size(), 2u);
  gpus.insert(gpus.end(), gpusB.begin(), gpusB.end());
  EXPECT_EQ(std::set<std::string>(gpus.begin(), gpus.end()).size(), 4u)
      << "two running jobs share a GPU";
  EXPECT_NE(status(a).find("holds"), std::string::npos);

  // A third job, attached: it says it is queued, and why, and waits.
  Process attached(
      argv("run", {"-np", "4", "-x", "DIR=" + dir_.path().string(), "--gpu-bind", "visible", "--",
                   "/bin/sh", "-c", "echo gpu $HVD_RANK $CUDA_VISIBLE_DEVICES"}),
      options());
  ProcessResult ps;
  ASSERT_TRUE(waitUntil(
      [&] {
        ps = hvdrun("ps", {});
        return ps.out.find("QUEUED") != std::string::npos;
      },
      20s))
      << ps.out;
  const std::regex queuedRow(R"((hvd-[0-9a-f]{6}) +QUEUED +4 )");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(ps.out, m, queuedRow)) << ps.out;
  const std::string c = m[1].str();
  const std::string waiting = waitStatus(c, "waiting +waiting for 4 GPUs on " + node());
  EXPECT_NE(waiting.find("(0 free); held by " + a + ", " + b), std::string::npos) << waiting;

  touch("go-a");
  EXPECT_NE(waitStatus(c, "\\(2 free\\); held by " + b).find("QUEUED"), std::string::npos);
  touch("go-b");
  const std::optional<int> exit = attached.waitExit(30s);
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(*exit, 0) << attached.err();
  EXPECT_NE(attached.err().find("hvdrun: job " + c + " is queued: waiting for 4 GPUs on " + node()),
            std::string::npos)
      << attached.err();
  const std::vector<std::string> gpusC = gpusOf(c, 4);
  EXPECT_EQ(std::set<std::string>(gpusC.begin(), gpusC.end()),
            (std::set<std::string>{"0", "1", "2", "3"}));
  EXPECT_NE(waitEnded(c).find(": COMPLETED\n"), std::string::npos);
}

TEST_F(QueueTest, QueuedJobsStartInSubmissionOrder) {
  const std::string a = submitGpuJob(3, "go-a");
  ASSERT_EQ(gpusOf(a, 3).size(), 3u);
  const std::string b = submitGpuJob(2, "go-b");  // 1 GPU free: waits
  const std::string c = submitGpuJob(1, "go-c");  // would fit now, but b came first
  EXPECT_NE(waitStatus(b, "waiting for 2 GPUs on " + node() + " \\(1 free\\)").find("QUEUED"),
            std::string::npos);
  EXPECT_NE(waitStatus(c, "waiting +queued behind job " + b).find("QUEUED"), std::string::npos);
  touch("go-a");
  // b's turn came first: it reserved first and so holds the lowest free GPUs (the ledger grants
  // the lowest first), and c, reserved after it, the next one; the other order would give c
  // GPU 0. (The times at which each job's whole launch had started cannot say this: b's two
  // ranks may finish starting after c's one, and a second boundary may fall between.)
  std::vector<std::string> gpusB = gpusOf(b, 2);
  std::sort(gpusB.begin(), gpusB.end());
  EXPECT_EQ(gpusB, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(gpusOf(c, 1), (std::vector<std::string>{"2"}));
  EXPECT_NE(waitStatus(b, "RUNNING").find("started"), std::string::npos);
  EXPECT_NE(waitStatus(c, "RUNNING").find("started"), std::string::npos);
  touch("go-b");
  touch("go-c");
  EXPECT_NE(waitEnded(b).find(": COMPLETED\n"), std::string::npos);
  EXPECT_NE(waitEnded(c).find(": COMPLETED\n"), std::string::npos);
}

TEST_F(QueueTest, NoQueueFailsAtOnceAndACancelledQueuedJobNeverStarts) {
  const std::string a = submitGpuJob(4, "go-a");
  ASSERT_EQ(gpusOf(a, 4).size(), 4u);
  const auto before = std::chrono::steady_clock::now();
  const ProcessResult refused =
      hvdrun("run", {"-np", "1", "--gpu-bind", "visible", "--no-queue", "--", "/bin/true"});
  EXPECT_LT(std::chrono::steady_clock::now() - before, 10s);
  EXPECT_EQ(refused.status, 75) << refused.err;
  EXPECT_NE(refused.err.find("was not queued (--no-queue): waiting for 1 GPU on " + node() +
                             " (0 free); held by " + a),
            std::string::npos)
      << refused.err;

  const std::string q = submitGpuJob(1, "");
  EXPECT_NE(waitStatus(q, "QUEUED").find("waiting for 1 GPU"), std::string::npos);
  const ProcessResult cancel = hvdrun("cancel", {q});
  EXPECT_EQ(cancel.status, 0) << cancel.err;
  const std::string ended = waitEnded(q);
  EXPECT_NE(ended.find(": CANCELLED\n"), std::string::npos) << ended;
  EXPECT_EQ(ended.find("started     2"), std::string::npos);
  EXPECT_TRUE(hvdrun("logs", {q}).out.empty()) << "a cancelled queued job ran";
  touch("go-a");
  EXPECT_NE(waitEnded(a).find(": COMPLETED\n"), std::string::npos);
}

TEST_F(QueueTest, ARestartedAgentKeepsItsQueueAndFreesTheGpusOfLostJobs) {
  const std::string a = submitGpuJob(4, "never");
  ASSERT_EQ(gpusOf(a, 4).size(), 4u);
  const std::string b = submitGpuJob(2, "");
  EXPECT_NE(waitStatus(b, "QUEUED").find("held by " + a), std::string::npos);

  ::kill(agent_->agent->pid(), SIGKILL);
  EXPECT_EQ(agent_->agent->waitExit(10s), 128 + SIGKILL);
  startAgent();  // same key, same state directory, the same four GPUs

  EXPECT_NE(waitEnded(a).find(": LOST\n"), std::string::npos);
  const std::string ended = waitEnded(b);
  EXPECT_NE(ended.find(": COMPLETED\n"), std::string::npos) << ended;
  EXPECT_EQ(gpusOf(b, 2).size(), 2u);
}

// A graceful stop (SIGTERM, as systemd stops it) ends what runs but keeps what has not started.
TEST_F(QueueTest, AGracefullyStoppedAgentCancelsWhatRunsAndKeepsItsQueue) {
  const std::string a = submitGpuJob(4, "never");
  ASSERT_EQ(gpusOf(a, 4).size(), 4u);
  const std::string b = submitGpuJob(2, "");
  EXPECT_NE(waitStatus(b, "QUEUED").find("held by " + a), std::string::npos);

  ::kill(agent_->agent->pid(), SIGTERM);
  EXPECT_EQ(agent_->agent->waitExit(30s), 0);
  startAgent();

  const std::string cancelled = waitEnded(a);
  EXPECT_NE(cancelled.find(": CANCELLED\n"), std::string::npos) << cancelled;
  EXPECT_NE(cancelled.find("the agent shut down"), std::string::npos) << cancelled;
  const std::string ended = waitEnded(b);
  EXPECT_NE(ended.find(": COMPLETED\n"), std::string::npos) << ended;
  EXPECT_EQ(gpusOf(b, 2).size(), 2u);
}

// A queued job whose files another user could have written (here: chowned to nobody while the
// agent was down, as a job planted by that user would be) is not run by the next agent.
TEST_F(QueueTest, AQueuedJobOfAnotherUsersFilesIsNotRunAfterARestart) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give files to another user";
  const std::string a = submitGpuJob(4, "never");
  ASSERT_EQ(gpusOf(a, 4).size(), 4u);
  const std::string planted =
      submit(4, "echo ran > \"$DIR/planted-ran\"", {"--gpu-bind", "visible"});
  waitStatus(planted, "QUEUED");
  const std::string kept = submitGpuJob(4, "");
  waitStatus(kept, "QUEUED");
  ::kill(agent_->agent->pid(), SIGKILL);
  ASSERT_TRUE(agent_->agent->waitExit(30s).has_value());
  const fs::path jobDir = dir_.path() / "state" / "jobs" / planted;
  for (const fs::path& f : {jobDir, jobDir / "record.json", jobDir / "request.pb"}) {
    ASSERT_EQ(::chown(f.c_str(), 65534, 65534), 0) << f;
  }
  startAgent();
  EXPECT_NE(waitEnded(kept).find(": COMPLETED\n"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir_.path() / "planted-ran")) << "the planted job ran";
  EXPECT_EQ(hvdrun("ps", {}).out.find(planted), std::string::npos) << "ps shows what will not run";
  EXPECT_NE(agent_->agent->output().find("job directory ignored: the state directory " +
                                         jobDir.string() + " belongs to uid 65534"),
            std::string::npos)
      << agent_->agent->output();
}

// What ps and status show is what runs: a queued job whose record no longer matches its saved
// request (the record edited while the agent was down) ends FAILED saying so, and does not run.
TEST_F(QueueTest, AQueuedJobWhoseRecordDisagreesWithItsRequestIsNotRunAfterARestart) {
  const std::string a = submitGpuJob(4, "never");
  ASSERT_EQ(gpusOf(a, 4).size(), 4u);
  const std::string edited = submit(4, "echo ran > \"$DIR/edited-ran\"", {"--gpu-bind", "visible"});
  waitStatus(edited, "QUEUED");
  ::kill(agent_->agent->pid(), SIGKILL);
  ASSERT_TRUE(agent_->agent->waitExit(30s).has_value());
  const fs::path record = dir_.path() / "state" / "jobs" / edited / "record.json";
  std::string text = readFile(record);
  const size_t at = text.find("edited-ran");
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, 10, "harmless!!");
  std::ofstream(record, std::ios::trunc) << text;
  startAgent();
  const std::string ended = waitEnded(edited);
  EXPECT_NE(ended.find(": FAILED\n"), std::string::npos) << ended;
  EXPECT_NE(ended.find("its record and its saved request disagree on the command"),
            std::string::npos)
      << ended;
  EXPECT_FALSE(fs::exists(dir_.path() / "edited-ran")) << "the job ran";
}

// The queue's order is the submission order across restarts of its agent, graceful (SIGTERM)
// or not (SIGKILL): five jobs queued behind a running one start in the order they came, not in
// the order their threads happen to run in the next agent.
TEST_F(QueueTest, TheQueueKeepsItsOrderAcrossAgentRestarts) {
  // Twenty restarts: ten of each kind.
  for (int signal : {SIGKILL, SIGTERM}) {
    for (int trial = 0; trial < 10; ++trial) {
      const std::string order = "order-" + std::to_string(signal) + "-" + std::to_string(trial);
      const std::string a = submitGpuJob(4, "never");
      ASSERT_EQ(gpusOf(a, 4).size(), 4u);
      std::vector<std::string> ids;
      for (const char* name : {"B", "C", "D", "E", "F"}) {
        // Each needs every GPU, so they run one at a time; rank 0 notes its turn.
        const std::string note = std::string("if [ \"$HVD_RANK\" = 0 ]; then echo ") + name +
                                 " >> \"$DIR/" + order + "\"; fi";
        ids.push_back(submit(4, note, {"--gpu-bind", "visible"}));
        waitStatus(ids.back(), "QUEUED");
      }
      ::kill(agent_->agent->pid(), signal);
      ASSERT_TRUE(agent_->agent->waitExit(30s).has_value());
      startAgent();
      for (const std::string& id : ids) {
        EXPECT_NE(waitEnded(id).find(": COMPLETED\n"), std::string::npos) << id;
      }
      EXPECT_EQ(readFile(dir_.path() / order), "B\nC\nD\nE\nF\n")
          << "signal " << signal << ", trial " << trial;
    }
  }
}

}  // namespace

namespace {

class RestartTest : public AgentJobsTest {
 protected:
  // hvdrun's own output for the job (the ranks' lines with their tags) once it has ended.
  std::string logsOf(const std::string& id) { return hvdrun("logs", {id}).out; }
};

// The agents know a restart's ranks by the attempt's own launch id: a cancel must reach them
// with the job's stop signal (not leave them to the stop deadline's SIGKILL, reported LOST).
TEST_F(RestartTest, ACancelReachesTheRanksOfARestartWithTheStopSignal) {
  const std::string script =
      "if [ \"$HVD_RESTART_COUNT\" = 0 ]; then "
      "  if [ \"$HVD_RANK\" = 1 ]; then sleep 0.2; exit 3; fi; exec sleep 60; fi; "
      "trap 'echo term $HVD_RANK; exit 0' TERM; echo again $HVD_RANK; "
      "while :; do sleep 0.05; done";
  const std::string id = submit(2, script, {"--max-restarts", "1"});
  ASSERT_EQ(logCaptures(id, R"(again (\d+))", 2).size(), 2u);
  EXPECT_EQ(hvdrun("cancel", {id, "--grace", "5"}).status, 0);
  const std::string ended = waitEnded(id);
  EXPECT_NE(ended.find(": CANCELLED\n"), std::string::npos) << ended;
  EXPECT_EQ(ended.find("LOST"), std::string::npos) << ended;
  std::vector<std::string> stopped = logCaptures(id, R"(term (\d+))", 2);
  std::sort(stopped.begin(), stopped.end());
  EXPECT_EQ(stopped, (std::vector<std::string>{"0", "1"})) << "every rank of attempt 1 got SIGTERM";
}

// The job's log keeps each line's attempt: `hvdrun logs` says where the restart came, and why,
// between the lines of the two attempts.
TEST_F(RestartTest, LogsSayWhereTheRestartCameBetweenTheAttemptsLines) {
  const std::string script =
      "echo count=$HVD_RESTART_COUNT rank=$HVD_RANK; "
      "if [ \"$HVD_RESTART_COUNT\" = 0 ]; then "
      "  if [ \"$HVD_RANK\" = 1 ]; then sleep 0.3; exit 3; fi; exec sleep 60; fi";
  const std::string id = submit(2, script, {"--max-restarts", "2"});
  const std::string ended = waitEnded(id);
  ASSERT_NE(ended.find(": COMPLETED\n"), std::string::npos) << ended;
  // stdout (the ranks' lines) and stderr (the notice) on one pipe, in the order written.
  hvd::test::ProcessOptions merged = options();
  merged.output = hvd::test::ProcessOptions::Output::kMerged;
  const std::string logs = hvd::test::runProcess(argv("logs", {id}), 30s, merged).out;
  const size_t first = logs.find("count=0 rank=1");
  const size_t notice =
      logs.find("hvdrun: restarting job " + id +
                " (restart 1 of 2) after: rank 1 on localhost exited with code 3");
  const size_t second = logs.find("count=1 rank=1");
  ASSERT_NE(first, std::string::npos) << logs;
  ASSERT_NE(notice, std::string::npos) << logs;
  ASSERT_NE(second, std::string::npos) << logs;
  EXPECT_LT(first, notice) << logs;
  EXPECT_LT(notice, second) << logs;
  EXPECT_EQ(logs.find("hvdrun: restarting"), notice) << "said once:\n" << logs;
  EXPECT_EQ(logs.find("restarting job", second), std::string::npos) << "said once:\n" << logs;
}

// Rank 1 fails in attempt 0 only; rank 0 leaves a background child behind in that attempt.
TEST_F(RestartTest, AFailureOnTheFirstAttemptOnlyCompletesOnTheSecond) {
  const std::string script =
      "echo count=$HVD_RESTART_COUNT of=$TORCHELASTIC_MAX_RESTARTS rank=$HVD_RANK; "
      "if [ \"$HVD_RESTART_COUNT\" = 0 ]; then "
      "  if [ \"$HVD_RANK\" = 1 ]; then sleep 0.3; exit 3; fi; "
      "  sleep 60 & echo child $!; wait; fi";
  const std::string id = submit(2, script, {"--max-restarts", "2"});
  const std::string ended = waitEnded(id);
  EXPECT_NE(ended.find(": COMPLETED\n"), std::string::npos) << ended;
  EXPECT_NE(ended.find("restarts    1 of at most 2"), std::string::npos) << ended;
  EXPECT_TRUE(std::regex_search(ended, std::regex("attempt 0 +.*rank 1 on localhost exited with "
                                                  "code 3")))
      << ended;
  EXPECT_TRUE(std::regex_search(ended, std::regex("attempt 1 +.*all 2 ranks exited"))) << ended;
  const std::string logs = logsOf(id);
  EXPECT_NE(logs.find("count=1 of=2 rank=0"), std::string::npos) << logs;
  EXPECT_NE(logs.find("count=1 of=2 rank=1"), std::string::npos) << logs;
  std::smatch child;
  ASSERT_TRUE(std::regex_search(logs, child, std::regex(R"(child (\d+))"))) << logs;
  EXPECT_TRUE(waitUntil([&] { return deadOrZombie(std::stoi(child[1].str())); }, 5s))
      << "attempt 0 left a process behind";
}

TEST_F(RestartTest, AnAlwaysFailingJobFailsAfterItsRestartsAreSpent) {
  const std::string id = submit(2, "echo try $HVD_RESTART_COUNT; exit 1", {"--max-restarts", "2"});
  const std::string ended = waitEnded(id);
  EXPECT_NE(ended.find(": FAILED\n"), std::string::npos) << ended;
  EXPECT_NE(ended.find("no restarts left (--max-restarts 2)"), std::string::npos) << ended;
  for (const char* attempt : {"attempt 0 ", "attempt 1 ", "attempt 2 "}) {
    EXPECT_NE(ended.find(attempt), std::string::npos) << ended;
  }
  EXPECT_EQ(ended.find("attempt 3 "), std::string::npos) << ended;
  const std::string logs = logsOf(id);
  for (const char* line : {"try 0", "try 1", "try 2"}) {
    EXPECT_NE(logs.find(line), std::string::npos) << logs;
  }
}

TEST_F(RestartTest, AStartUpFailureAndAListedExitCodeEndTheJobAtOnce) {
  const std::string early =
      submit(1, "exit 1", {"--max-restarts", "5", "--restart-min-uptime", "30"});
  const std::string e = waitEnded(early);
  EXPECT_NE(e.find(": FAILED\n"), std::string::npos) << e;
  EXPECT_NE(e.find("sooner than --restart-min-uptime 30 s: a start-up failure"), std::string::npos)
      << e;
  EXPECT_EQ(e.find("attempt 1 "), std::string::npos) << e;

  const std::string listed =
      submit(1, "exit 3", {"--max-restarts", "5", "--no-restart-on-exit", "2,3"});
  const std::string l = waitEnded(listed);
  EXPECT_NE(l.find(": FAILED\n"), std::string::npos) << l;
  EXPECT_NE(l.find("exit code 3 is listed in --no-restart-on-exit"), std::string::npos) << l;
  EXPECT_EQ(l.find("attempt 1 "), std::string::npos) << l;
}

// Each attempt has its own store token: attempt 0's token is refused in attempt 1.
TEST_F(RestartTest, AnEarlierAttemptsTokenIsRefusedByTheStore) {
  const std::string worker = HVD_WORKER_PATH;
  const std::string script =
      "if [ \"$HVD_RESTART_COUNT\" = 0 ]; then echo \"$HVD_STORE_TOKEN\" > \"$DIR/token0\"; "
      "exit 1; fi; " +
      worker + " store-probe \"$(cat \"$DIR/token0\")\"; " + worker +
      " store-probe \"$HVD_STORE_TOKEN\"";
  const std::string id = submit(1, script, {"--max-restarts", "1"});
  const std::string ended = waitEnded(id);
  EXPECT_NE(ended.find(": COMPLETED\n"), std::string::npos) << ended;
  const std::string logs = logsOf(id);
  EXPECT_NE(logs.find("store: refused"), std::string::npos) << logs;
  EXPECT_NE(logs.find("store: accepted"), std::string::npos) << logs;
}

// The attached client is told of the restart, and hvdrun's embedded mode restarts the same way.
TEST_F(RestartTest, AttachedAndEmbeddedRunsSayTheyRestart) {
  const std::vector<std::string> job = {
      "-np",
      "1",
      "--max-restarts",
      "1",
      "--",
      "/bin/sh",
      "-c",
      "if [ \"$HVD_RESTART_COUNT\" = 0 ]; then exit 4; fi; echo restarted"};
  const ProcessResult attached = hvdrun("run", job);
  EXPECT_EQ(attached.status, 0) << attached.err;
  EXPECT_NE(attached.err.find("(restart 1 of 1) after: rank 0 on localhost exited with code 4"),
            std::string::npos)
      << attached.err;
  EXPECT_NE(attached.out.find("restarted"), std::string::npos) << attached.out;

  std::vector<std::string> embedded = {HVDRUN_PATH};
  embedded.insert(embedded.end(), job.begin(), job.end());
  const ProcessResult local = hvd::test::runProcess(embedded, 30s, options());
  EXPECT_EQ(local.status, 0) << local.err;
  EXPECT_NE(local.err.find("(restart 1 of 1) after: rank 0 on localhost exited with code 4"),
            std::string::npos)
      << local.err;
  EXPECT_NE(local.out.find("restarted"), std::string::npos) << local.out;
}

}  // namespace
