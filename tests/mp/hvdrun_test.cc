// hvdrun in its embedded mode, as a user runs it: the real executable, real ranks, real signals.
// Each test runs hvdrun as a child with its stdout and stderr captured and a deadline, and checks
// exit status, the rendered output and that no process of the job outlives hvdrun.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/test_support.h"
#include "gtest/gtest.h"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

using hvd::test::TempDir;
using RunResult = hvd::test::ProcessResult;

std::vector<std::string> hvdrunArgv(std::vector<std::string> args) {
  args.insert(args.begin(), HVDRUN_PATH);
  return args;
}

// hvdrun started as a child with pipes on stdout and stderr; finish(timeout) reads both to the
// end and reaps it, SIGKILLing it at the timeout.
class Hvdrun : public hvd::test::Process {
 public:
  explicit Hvdrun(std::vector<std::string> args) : Process(hvdrunArgv(std::move(args))) {}
};

RunResult runHvdrun(std::vector<std::string> args, std::chrono::seconds timeout = 60s) {
  return hvd::test::runProcess(hvdrunArgv(std::move(args)), timeout);
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The pids ranks wrote to DIR/pid.<rank> (see kWritePid).
std::vector<pid_t> rankPids(const std::string& dir) {
  std::vector<pid_t> pids;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind("pid.", 0) != 0) continue;
    const pid_t pid = std::atoi(readFile(entry.path().string()).c_str());
    if (pid > 0) pids.push_back(pid);
  }
  return pids;
}

size_t countPidFiles(const std::string& dir) { return rankPids(dir).size(); }

bool alive(pid_t pid) { return ::kill(pid, 0) == 0; }

// Shell prologue: the rank records its pid ($$ stays the pid through `exec`) in $D.
constexpr char kWritePid[] = "echo $$ > \"$D/pid.$HVD_RANK\"; ";

TEST(HvdrunTest, RunsAllreduceWorkerAtNp1And2And4) {
  for (int np : {1, 2, 4}) {
    RunResult r =
        runHvdrun({"-np", std::to_string(np), "--", HVD_WORKER_PATH, "loop", "20", "1000"});
    EXPECT_FALSE(r.timedOut) << "np " << np;
    EXPECT_EQ(r.status, 0) << "np " << np << "\nstderr:\n" << r.err;
    EXPECT_EQ(r.err.find("hvdrun:"), std::string::npos) << r.err;
  }
}

TEST(HvdrunTest, TagsEachLineWithRankAndStream) {
  RunResult r = runHvdrun(
      {"-np", "2", "/bin/sh", "-c", "echo out-$HVD_RANK-of-$HVD_SIZE; echo err-$HVD_RANK >&2"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("[0]<stdout>: out-0-of-2\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[1]<stdout>: out-1-of-2\n"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("[0]<stderr>: err-0\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("[1]<stderr>: err-1\n"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("err-"), std::string::npos) << "stderr lines must not reach stdout";
}

TEST(HvdrunTest, NoTagOutputPrintsRawLinesAndXSetsVariables) {
  RunResult r = runHvdrun({"-np", "1", "--no-tag-output", "-x", "HVD_TEST_VALUE=a b", "/bin/sh",
                           "-c", "echo \"$HVD_TEST_VALUE\""});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "a b\n");
}

TEST(HvdrunTest, RankExitCodeFailsJobFastWithRootCauseAndNoLeftovers) {
  TempDir dir;
  ::setenv("D", dir.path().c_str(), 1);
  // Rank 1 fails once all four ranks have recorded their pids; the others would sleep 30 s.
  const std::string script =
      std::string(kWritePid) +
      "if [ \"$HVD_RANK\" = 1 ]; then while [ $(ls \"$D\" | wc -l) -lt 4 ]; do sleep 0.05; done; "
      "echo boom >&2; exit 3; fi; exec sleep 30";
  RunResult r = runHvdrun({"-np", "4", "--grace", "5", "/bin/sh", "-c", script});
  ::unsetenv("D");
  EXPECT_EQ(r.status, 3) << r.err;
  EXPECT_LT(r.seconds, 15.0) << "the sleeping ranks must be stopped, not waited for";
  EXPECT_NE(r.err.find("hvdrun: rank 1 on localhost exited with code 3\n"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("\n  boom\n"), std::string::npos) << "stderr tail missing:\n" << r.err;
  std::vector<pid_t> pids = rankPids(dir.path());
  EXPECT_EQ(pids.size(), 4u);
  for (pid_t pid : pids) EXPECT_FALSE(alive(pid)) << "rank process " << pid << " outlived hvdrun";
}

TEST(HvdrunTest, SigkilledRankExits137AndNamesTheSignal) {
  RunResult r =
      runHvdrun({"-np", "2", "--", HVD_WORKER_PATH, "loop", "20", "1000", "1", "5", "kill"});
  EXPECT_EQ(r.status, 137) << r.err;
  EXPECT_NE(r.err.find("hvdrun: rank 1 on localhost was killed by signal 9"), std::string::npos)
      << r.err;
}

TEST(HvdrunTest, SigintStopsRanksAndExits130WithinGrace) {
  TempDir dir;
  ::setenv("D", dir.path().c_str(), 1);
  Hvdrun h({"-np", "2", "--grace", "5", "/bin/sh", "-c", std::string(kWritePid) + "exec sleep 30"});
  ::unsetenv("D");
  const auto deadline = Clock::now() + 20s;
  while (countPidFiles(dir.path()) < 2 && Clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  ASSERT_EQ(countPidFiles(dir.path()), 2u) << "ranks did not start";
  const auto sent = Clock::now();
  ASSERT_EQ(::kill(h.pid(), SIGINT), 0);
  RunResult r = h.finish(40s);
  const double afterSignal = std::chrono::duration<double>(Clock::now() - sent).count();
  EXPECT_EQ(r.status, 130) << r.err;
  EXPECT_LT(afterSignal, 5.0) << "SIGTERM should end `sleep` well within the 5 s grace";
  EXPECT_NE(r.err.find("cancelled"), std::string::npos) << r.err;
  for (pid_t pid : rankPids(dir.path())) EXPECT_FALSE(alive(pid)) << "rank " << pid << " left";
}

TEST(HvdrunTest, OutputFilenameWritesEachRanksLines) {
  TempDir dir;
  const std::string out = dir.file("logs");
  RunResult r = runHvdrun({"-np", "2", "--output-filename", out, "/bin/sh", "-c",
                           "echo a-$HVD_RANK; echo b-$HVD_RANK; echo e-$HVD_RANK >&2"});
  ASSERT_EQ(r.status, 0) << r.err;
  for (int rank : {0, 1}) {
    const std::string dirOf = out + "/rank." + std::to_string(rank);
    const std::string n = std::to_string(rank);
    EXPECT_EQ(readFile(dirOf + "/stdout"), "a-" + n + "\nb-" + n + "\n");
    EXPECT_EQ(readFile(dirOf + "/stderr"), "e-" + n + "\n");
  }
  EXPECT_NE(r.out.find("[1]<stdout>: b-1\n"), std::string::npos) << "still printed: " << r.out;
}

// A launch command copied from horovodrun: its single-dash hostfile, a network interface, TCP
// only, no stall check, timestamped output, an SSH port. The job runs with its data plane on the
// interface named (the runtime's configuration says so), every rank sees the variables
// horovodrun would set, and the SSH port gets its one warning.
constexpr char kHorovodrunWorker[] =
    "echo \"env $HVD_DATA_IFACE $NCCL_SOCKET_IFNAME $NCCL_IB_DISABLE $HVD_STALL_CHECK_DISABLE\"; "
    "exec \"$0\" loop 20 1000";

std::vector<std::string> horovodrunFlags(const std::string& hostfile) {
  return {"-np",
          "2",
          "-hostfile",
          hostfile,
          "--network-interface",
          "lo",
          "--tcp",
          "--no-stall-check",
          "--prefix-output-with-timestamp",
          "-p",
          "2222"};
}

// "2024-05-01T12:34:56.789 [r]<stdout>: env lo lo 1 1" for each rank.
void expectHorovodrunEnvironment(const RunResult& r) {
  for (const char* rank : {"0", "1"}) {
    const std::regex line(
        std::string("(^|\n)\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3} \\[") + rank +
        "\\]<stdout>: env lo lo 1 1\n");
    EXPECT_TRUE(std::regex_search(r.out, line)) << "rank " << rank << ":\n" << r.out;
  }
  size_t warnings = 0;
  for (size_t at = r.err.find("hvdrun: warning: "); at != std::string::npos;
       at = r.err.find("hvdrun: warning: ", at + 1)) {
    ++warnings;
  }
  EXPECT_EQ(warnings, 1u) << r.err;
  EXPECT_NE(r.err.find("hvdrun: warning: --ssh-port ignored: hvdrun uses no SSH"),
            std::string::npos)
      << r.err;
}

TEST(HvdrunTest, RunsACopiedHorovodrunCommandLine) {
  TempDir dir;
  const std::string hostfile = dir.file("hosts");
  std::ofstream(hostfile) << "localhost slots=2\n";
  std::vector<std::string> args = horovodrunFlags(hostfile);
  for (const char* a :
       {"-x", "HVD_LOG_LEVEL=info", "/bin/sh", "-c", kHorovodrunWorker, HVD_WORKER_PATH}) {
    args.push_back(a);
  }
  const RunResult r = runHvdrun(args, 60s);
  EXPECT_FALSE(r.timedOut);
  ASSERT_EQ(r.status, 0) << r.err;
  expectHorovodrunEnvironment(r);
  // Both ranks bound the data plane to lo's address, found at init (their logged configuration).
  size_t configured = 0;
  for (size_t at = r.err.find("data-addr 127.0.0.1 data-iface lo "); at != std::string::npos;
       at = r.err.find("data-addr 127.0.0.1 data-iface lo ", at + 1)) {
    ++configured;
  }
  EXPECT_EQ(configured, 2u) << r.err;
}

TEST(HvdrunTest, MissingProgramIsAClearError) {
  RunResult r = runHvdrun({"-np", "2", "/nonexistent/hvd-no-such-program"});
  EXPECT_NE(r.status, 0);
  EXPECT_FALSE(r.timedOut);
  EXPECT_NE(r.err.find("cannot execute '/nonexistent/hvd-no-such-program'"), std::string::npos)
      << r.err;
}

TEST(HvdrunTest, RemoteHostWithoutKeyFileIsAUsageErrorNamingTheFix) {
  TempDir dir;
  const std::string key = dir.file("missing.key");
  RunResult r = runHvdrun({"-np", "2", "-H", "otherhost:2", "--key-file", key, "/bin/true"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("'" + key + "' does not exist"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("hvdrun keygen"), std::string::npos) << r.err;
}

TEST(HvdrunTest, UnreachableAgentExits69NamingHostAndAddress) {
  TempDir dir;
  const std::string key = dir.file("k");
  ASSERT_EQ(runHvdrun({"keygen", "--key-file", key}).status, 0);
  // Port 1 on loopback: nothing listens there, so the connection is refused at once.
  RunResult r = runHvdrun({"-np", "1", "--agent-port", "1", "--key-file", key, "/bin/true"}, 30s);
  EXPECT_EQ(r.status, 69) << r.err;
  EXPECT_LT(r.seconds, 10.0);
  EXPECT_NE(r.err.find("hvdrun: agent on localhost (127.0.0.1:1) is unreachable: connection "
                       "refused"),
            std::string::npos)
      << r.err;
}

TEST(HvdrunTest, VersionPrintsTheProjectVersion) {
  RunResult r = runHvdrun({"--version"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "hvdrun " HVD_PROJECT_VERSION "\n");
}

TEST(HvdrunTest, CheckBuildListsTransportsNcclMpiAndTls) {
  RunResult r = runHvdrun({"--check-build"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("transports: tcp shm\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("NCCL: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CUDA driver: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("MPI: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("TLS: yes\n"), std::string::npos) << r.out;
}

TEST(HvdrunTest, KeygenCreatesA0600KeyAndRefusesToOverwriteIt) {
  TempDir dir;
  const std::string key = dir.file("k");
  RunResult r = runHvdrun({"keygen", "--key-file", key});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find(key), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fingerprint "), std::string::npos) << r.out;
  EXPECT_EQ(std::filesystem::status(key).permissions(),
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  EXPECT_EQ(std::filesystem::file_size(key), 32u);
  const std::string before = readFile(key);
  RunResult again = runHvdrun({"keygen", "--key-file", key});
  EXPECT_EQ(again.status, 2);
  EXPECT_NE(again.err.find("already exists"), std::string::npos) << again.err;
  EXPECT_EQ(readFile(key), before);
}

TEST(HvdrunTest, UsageErrorsExit2) {
  EXPECT_EQ(runHvdrun({"/bin/true"}).status, 2);                                   // no -np
  EXPECT_EQ(runHvdrun({"-np", "0", "/bin/true"}).status, 2);                       // out of range
  EXPECT_EQ(runHvdrun({"-np", "2"}).status, 2);                                    // no program
  EXPECT_EQ(runHvdrun({"-np", "2", "-H", "h1:x", "/bin/true"}).status, 2);         // bad -H
  EXPECT_EQ(runHvdrun({"-np", "3", "-H", "localhost:2", "/bin/true"}).status, 2);  // > slots
}

// Values that cannot be meant: once an abort (an uncaught filesystem_error, exit 134) and a
// grace of 0 (NaN cast to milliseconds). Now the binary refuses them before any rank starts.
TEST(HvdrunTest, UnmeantValuesExit2NamingTheOptionBeforeAnythingRuns) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"-np", "1", "--timeline-filename", "", "true"}, "hvdrun: --timeline-filename: '' is empty"},
      {{"-np", "1", "--grace", "nan", "true"}, "hvdrun: --grace: 'nan' is not a number"},
      {{"-np", "1", "-H", "", "true"}, "hvdrun: --hosts: '' is empty"},
      {{"-np", "1", "-x", "NOT-A-NAME=1", "true"}, "hvdrun: -x: 'NOT-A-NAME=1'"},
  };
  for (const Case& c : cases) {
    const RunResult r = runHvdrun(c.args, 30s);
    EXPECT_FALSE(r.timedOut);
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "") << "nothing ran";
  }
}

#ifdef HVDAGENT_PATH
// --- remote mode through a real hvdagent on 127.0.0.1 ---------------------------------------

// hvdagent on 127.0.0.1:<ephemeral> with its own key and state directory; stopped (SIGTERM,
// then SIGKILL) when the test ends.
class Agent {
 public:
  explicit Agent(const std::string& dir) : keyFile_(dir + "/cluster.key") {
    if (runHvdrun({"keygen", "--key-file", keyFile_}).status != 0) return;
    const std::string portFile = dir + "/port";
    std::filesystem::create_directory(dir + "/state");
    std::vector<std::string> args = {HVDAGENT_PATH, "--listen",    "127.0.0.1:0",
                                     "--port-file", portFile,      "--key-file",
                                     keyFile_,      "--state-dir", dir + "/state"};
    if (::geteuid() == 0) args.push_back("--allow-run-as-root");
    hvd::test::ProcessOptions options;
    options.output = hvd::test::ProcessOptions::Output::kInherit;
    options.env = {"HVD_ALLOW_RUN_AS_ROOT_CONFIRM=1"};
    agent_.emplace(std::move(args), options);
    const auto deadline = Clock::now() + 20s;
    while (Clock::now() < deadline && !agent_->waitExit(0ms)) {
      port_ = std::atoi(readFile(portFile).c_str());
      if (port_ > 0) return;
      std::this_thread::sleep_for(20ms);
    }
  }
  ~Agent() {
    if (!agent_) return;
    agent_->kill(SIGTERM);
    agent_->waitExit(10s);  // SIGKILLed by the Process's destructor if it still runs
  }
  int port() const { return port_; }
  const std::string& keyFile() const { return keyFile_; }

 private:
  std::string keyFile_;
  std::optional<hvd::test::Process> agent_;
  int port_ = 0;
};

std::vector<std::string> viaAgent(const Agent& agent, std::vector<std::string> rest) {
  std::vector<std::string> args = {"--agent-port", std::to_string(agent.port()), "--key-file",
                                   agent.keyFile()};
  args.insert(args.end(), rest.begin(), rest.end());
  return args;
}

TEST(HvdrunAgentTest, RunsAllreduceWorkerAndRendersOutputThroughTheAgent) {
  TempDir dir;
  Agent agent(dir.path());
  ASSERT_GT(agent.port(), 0) << "hvdagent did not start";
  RunResult r =
      runHvdrun(viaAgent(agent, {"-np", "2", "-H", "127.0.0.1:2", "-x", "GREETING=hi", "/bin/sh",
                                 "-c", "echo $GREETING-$HVD_RANK-of-$HVD_SIZE; echo e >&2"}));
  EXPECT_FALSE(r.timedOut);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("[0]<stdout>: hi-0-of-2\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[1]<stdout>: hi-1-of-2\n"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("[1]<stderr>: e\n"), std::string::npos) << r.err;

  RunResult w = runHvdrun(viaAgent(
      agent, {"-np", "2", "-H", "127.0.0.1:2", "--", HVD_WORKER_PATH, "loop", "20", "1000"}));
  EXPECT_EQ(w.status, 0) << w.err;
}

// The same copied command through an agent: remote ranks get only what -x names, and the
// variables of horovodrun's flags with it.
TEST(HvdrunAgentTest, RunsACopiedHorovodrunCommandLineThroughTheAgent) {
  TempDir dir;
  Agent agent(dir.path());
  ASSERT_GT(agent.port(), 0) << "hvdagent did not start";
  const std::string hostfile = dir.file("hosts");
  std::ofstream(hostfile) << "127.0.0.1 slots=2\n";
  std::vector<std::string> args = horovodrunFlags(hostfile);
  for (const char* a : {"/bin/sh", "-c", kHorovodrunWorker, HVD_WORKER_PATH}) args.push_back(a);
  const RunResult r = runHvdrun(viaAgent(agent, args));
  EXPECT_FALSE(r.timedOut);
  ASSERT_EQ(r.status, 0) << r.err;
  expectHorovodrunEnvironment(r);
}

TEST(HvdrunAgentTest, RankExitCodeIsHvdrunsExitCode) {
  TempDir dir;
  Agent agent(dir.path());
  ASSERT_GT(agent.port(), 0) << "hvdagent did not start";
  RunResult r = runHvdrun(
      viaAgent(agent, {"-np", "2", "-H", "127.0.0.1:2", "--grace", "5", "/bin/sh", "-c",
                       "if [ $HVD_RANK = 1 ]; then echo boom >&2; exit 3; fi; exec sleep 30"}));
  EXPECT_EQ(r.status, 3) << r.err;
  EXPECT_LT(r.seconds, 20.0);
  EXPECT_NE(r.err.find("rank 1 on 127.0.0.1 exited with code 3"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("  boom\n"), std::string::npos) << r.err;
}

TEST(HvdrunAgentTest, WrongKeyIsRefusedWithAuthenticationFailed) {
  TempDir dir;
  Agent agent(dir.path());
  ASSERT_GT(agent.port(), 0) << "hvdagent did not start";
  const std::string otherKey = dir.file("other.key");
  ASSERT_EQ(runHvdrun({"keygen", "--key-file", otherKey}).status, 0);
  RunResult r = runHvdrun({"--agent-port", std::to_string(agent.port()), "--key-file", otherKey,
                           "-np", "1", "-H", "127.0.0.1:1", "/bin/true"});
  EXPECT_EQ(r.status, 77) << r.err;
  EXPECT_NE(r.err.find("refused the request: authentication failed"), std::string::npos) << r.err;
}

TEST(HvdrunAgentTest, SigintCancelsTheJobThroughTheAgent) {
  TempDir dir;
  Agent agent(dir.path());
  ASSERT_GT(agent.port(), 0) << "hvdagent did not start";
  ::setenv("D", dir.path().c_str(), 1);
  Hvdrun h(viaAgent(agent, {"-np", "2", "-H", "127.0.0.1:2", "--grace", "5", "-x", "D", "/bin/sh",
                            "-c", std::string(kWritePid) + "exec sleep 30"}));
  ::unsetenv("D");
  const auto deadline = Clock::now() + 20s;
  while (countPidFiles(dir.path()) < 2 && Clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_EQ(countPidFiles(dir.path()), 2u) << "ranks did not start";
  ASSERT_EQ(::kill(h.pid(), SIGINT), 0);
  RunResult r = h.finish(40s);
  EXPECT_EQ(r.status, 130) << r.err;
  for (pid_t pid : rankPids(dir.path())) EXPECT_FALSE(alive(pid)) << "rank " << pid << " left";
}
#endif  // HVDAGENT_PATH

}  // namespace
