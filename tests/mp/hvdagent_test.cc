// hvdagent as an operator runs it: the real executable in a child process with an explicit
// environment, a temporary HOME, state directory and key per test, and ephemeral ports. Checks
// the start-up refusals (root without both confirmations, missing / empty / world-readable key),
// that it listens only where it was told (every listening socket of the process, from
// /proc/net/tcp{,6}), that SIGTERM stops it and its jobs promptly, and that a restarted agent
// kills what a SIGKILLed one left behind.
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/auth/cluster_key.h"
#include "agent/auth/request_signer.h"
#include "agent/rpc/call_auth.h"
#include "agent/rpc/credentials.h"
#include "agent/rpc/methods.h"
#include "common/agent_process.h"
#include "common/test_support.h"
#include "hvd/v1/agent.grpc.pb.h"

namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

using namespace hvd::test::agent_process;
using hvd::test::TempDir;

// Listening TCP sockets of `pid` as (local address hex, port) from /proc/net/tcp and tcp6.
std::vector<std::pair<std::string, int>> listeningSockets(pid_t pid) {
  std::set<std::string> inodes;
  std::error_code ec;
  for (const fs::directory_entry& e :
       fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    const std::string target = fs::read_symlink(e.path(), ec).string();
    if (target.rfind("socket:[", 0) == 0) inodes.insert(target.substr(8, target.size() - 9));
  }
  std::vector<std::pair<std::string, int>> result;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::istringstream lines(readFile(table));
    std::string line;
    std::getline(lines, line);  // header
    while (std::getline(lines, line)) {
      std::istringstream fields(line);
      std::string sl, local, remote, state, queues, timer, retr, uid, timeout, inode;
      fields >> sl >> local >> remote >> state >> queues >> timer >> retr >> uid >> timeout >>
          inode;
      if (state != "0A" || inodes.count(inode) == 0) continue;
      const size_t colon = local.find(':');
      result.emplace_back(local.substr(0, colon), std::stoi(local.substr(colon + 1), nullptr, 16));
    }
  }
  return result;
}

// 127.0.0.1 as /proc/net/tcp prints it (little-endian hex), or v4-mapped in tcp6.
bool isLoopbackHex(const std::string& address) {
  return address == "0100007F" || address == "0000000000000000FFFF00000100007F" ||
         address == "00000000000000000000000001000000";  // ::1
}

TEST(HvdagentTest, RefusesRootWithoutBothConfirmations) {
  if (!isRoot()) GTEST_SKIP() << "not running as root";
  TempDir dir;
  const fs::path key = writeKey(dir.path(), "key", 0600);
  const std::vector<std::string> base = {"--listen",    "127.0.0.1:0",
                                         "--key-file",  key.string(),
                                         "--state-dir", (dir.path() / "state").string()};
  struct Case {
    bool flag;
    const char* env;
  };
  for (Case c : {Case{false, nullptr}, Case{true, nullptr}, Case{false, "1"}, Case{true, "0"}}) {
    SCOPED_TRACE(std::string("flag ") + (c.flag ? "on" : "off") + ", env " +
                 (c.env ? c.env : "unset"));
    std::vector<std::string> args = base;
    if (c.flag) args.push_back("--allow-run-as-root");
    std::vector<std::string> env;
    if (c.env != nullptr) env.push_back(std::string("HVD_ALLOW_RUN_AS_ROOT_CONFIRM=") + c.env);
    Agent agent(dir.path(), args, env);
    EXPECT_EQ(agent.waitExit(20s), 2);
    const std::string out = agent.output();
    EXPECT_NE(out.find("refusing to run as root"), std::string::npos) << out;
    EXPECT_NE(out.find("--allow-run-as-root"), std::string::npos) << out;
    EXPECT_NE(out.find("HVD_ALLOW_RUN_AS_ROOT_CONFIRM=1"), std::string::npos) << out;
  }
  // Both: it starts.
  RunningAgent running(dir.path());
  EXPECT_GT(running.port, 0) << running.agent->output();
  ::kill(running.agent->pid(), SIGTERM);
  EXPECT_EQ(running.agent->waitExit(10s), 0);
}

TEST(HvdagentTest, RefusesMissingEmptyAndWorldReadableKeys) {
  TempDir dir;
  struct Case {
    fs::path key;
    const char* reason;
  };
  const std::vector<Case> cases = {
      {dir.path() / "missing.key", "does not exist"},
      {writeKey(dir.path(), "empty.key", 0600, 0), "is empty"},
      {writeKey(dir.path(), "open.key", 0644), "0644"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.key.string());
    std::vector<std::string> args = {"--listen",    "127.0.0.1:0",
                                     "--key-file",  c.key.string(),
                                     "--state-dir", (dir.path() / "state").string()};
    for (const std::string& a : rootArgs()) args.push_back(a);
    Agent agent(dir.path(), args, rootEnv());
    EXPECT_EQ(agent.waitExit(20s), 2);
    const std::string out = agent.output();
    EXPECT_NE(out.find(c.key.string()), std::string::npos) << out;
    EXPECT_NE(out.find(c.reason), std::string::npos) << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << "one line: " << out;
  }
}

// A state directory other users can write (or that belongs to another user) could hold jobs
// they planted: the agent refuses it at start, naming the path, the mode or owner and the fix.
TEST(HvdagentTest, RefusesAStateDirectoryOthersCouldWrite) {
  TempDir dir;
  const fs::path key = writeKey(dir.path(), "cluster.key", 0600);
  for (bool jobsDir : {false, true}) {
    const fs::path state = dir.path() / (jobsDir ? "state-b" : "state-a");
    fs::create_directories(state / "jobs");
    fs::permissions(state, fs::perms::owner_all);
    fs::permissions(state / "jobs", fs::perms::owner_all);
    const fs::path loose = jobsDir ? state / "jobs" : state;
    SCOPED_TRACE(loose.string());
    fs::permissions(loose, fs::perms::all);  // 0777
    std::vector<std::string> args = {"--listen",   "127.0.0.1:0", "--key-file",
                                     key.string(), "--state-dir", state.string()};
    for (const std::string& a : rootArgs()) args.push_back(a);
    Agent agent(dir.path(), args, rootEnv());
    EXPECT_EQ(agent.waitExit(20s), 2);
    const std::string out = agent.output();
    EXPECT_NE(out.find(loose.string() + " has mode 0777, writable by other users"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("chmod 0700"), std::string::npos) << out;
  }
}

TEST(HvdagentTest, ListensOnlyOnTheAddressGiven) {
  TempDir dir;
  RunningAgent running(dir.path());
  ASSERT_GT(running.port, 0) << running.agent->output();
  const auto sockets = listeningSockets(running.agent->pid());
  ASSERT_GE(sockets.size(), 2u) << "the agent's port and its job store";
  bool sawAgentPort = false;
  for (const auto& [address, port] : sockets) {
    EXPECT_TRUE(isLoopbackHex(address)) << address << ":" << port << " is not loopback";
    sawAgentPort |= port == running.port;
  }
  EXPECT_TRUE(sawAgentPort);
  const std::string out = running.agent->output();
  EXPECT_NE(out.find("listening on 127.0.0.1:" + std::to_string(running.port)), std::string::npos)
      << out;

  // The port is this agent's alone (no SO_REUSEPORT sharing): a second agent is refused.
  std::vector<std::string> args = {"--listen",    "127.0.0.1:" + std::to_string(running.port),
                                   "--key-file",  running.keyFile.string(),
                                   "--state-dir", (dir.path() / "state2").string()};
  for (const std::string& a : rootArgs()) args.push_back(a);
  Agent second(dir.path(), args, rootEnv());
  EXPECT_EQ(second.waitExit(20s), 1);
  EXPECT_NE(second.output().find("cannot listen on 127.0.0.1:" + std::to_string(running.port)),
            std::string::npos)
      << second.output();
  EXPECT_NE(out.find("key fingerprint"), std::string::npos) << out;
  EXPECT_NE(out.find("TLS off"), std::string::npos) << out;
}

TEST(HvdagentTest, DefaultListenAddressIsLoopback) {
  TempDir dir;
  const fs::path key = writeKey(dir.path(), "key", 0600);
  const fs::path portFile = dir.path() / "port";
  std::vector<std::string> args = {"--key-file",  key.string(),
                                   "--state-dir", (dir.path() / "state").string(),
                                   "--port-file", portFile.string()};
  for (const std::string& a : rootArgs()) args.push_back(a);
  Agent agent(dir.path(), args, rootEnv());
  const int port = agent.waitPort(portFile, 20s);
  if (port == 0) {
    // The default port is taken on this machine (another agent): the refusal names the default.
    EXPECT_EQ(agent.waitExit(10s), 1);
    EXPECT_NE(agent.output().find("127.0.0.1:7475"), std::string::npos) << agent.output();
    return;
  }
  EXPECT_EQ(port, 7475);
  for (const auto& [address, p] : listeningSockets(agent.pid())) {
    EXPECT_TRUE(isLoopbackHex(address)) << address << ":" << p << " is not loopback";
  }
  ::kill(agent.pid(), SIGTERM);
  EXPECT_EQ(agent.waitExit(10s), 0);
}

// A signed Launch of one rank running `script`; returns the stream's first output line.
struct LaunchCall {
  std::unique_ptr<hvd::v1::Agent::Stub> stub;
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<hvd::v1::RankEvent>> reader;
  std::string firstLine;
};

void launch(int port, const fs::path& keyFile, const std::string& jobId, const std::string& script,
            LaunchCall* call) {
  hvd::agent::auth::SystemClock clock;
  hvd::agent::rpc::CallSigner signer(hvd::agent::auth::ClusterKey::load(keyFile.string()), clock);
  auto channel =
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials());
  call->stub = hvd::v1::Agent::NewStub(channel);
  hvd::v1::LaunchRequest request;
  request.set_job_id(jobId);
  request.set_stop_signal(SIGTERM);
  request.set_grace_ms(10000);
  hvd::v1::RankSpec* rank = request.add_ranks();
  rank->add_argv("/bin/sh");
  rank->add_argv("-c");
  rank->add_argv(script);
  call->context.set_deadline(std::chrono::system_clock::now() + 60s);
  signer.sign(&call->context, hvd::agent::rpc::kLaunchMethod, request);
  call->reader = call->stub->Launch(&call->context, request);
  hvd::v1::RankEvent event;
  ASSERT_TRUE(call->reader->Read(&event));
  ASSERT_TRUE(event.has_launched());
  ASSERT_EQ(event.launched().error(), "");
  ASSERT_TRUE(call->reader->Read(&event));
  ASSERT_TRUE(event.has_output());
  call->firstLine = event.output().line();
}

TEST(HvdagentTest, SigtermStopsJobsAndExitsPromptly) {
  TempDir dir;
  RunningAgent running(dir.path());
  ASSERT_GT(running.port, 0) << running.agent->output();
  LaunchCall call;
  launch(running.port, running.keyFile, "sigterm-job", "echo $$; exec sleep 60", &call);
  const pid_t rank = std::atoi(call.firstLine.c_str());
  ASSERT_GT(rank, 0);
  ASSERT_FALSE(deadOrZombie(rank));

  // hvdrun reads the stream to its end; a client that stops reading holds up the server's
  // shutdown until its deadline.
  std::thread drain([&] {
    hvd::v1::RankEvent e;
    while (call.reader->Read(&e)) {
    }
    call.reader->Finish();
  });
  const auto start = Clock::now();
  ::kill(running.agent->pid(), SIGTERM);
  EXPECT_EQ(running.agent->waitExit(15s), 0) << running.agent->output();
  EXPECT_LT(Clock::now() - start, 8s);
  EXPECT_TRUE(waitUntil([&] { return deadOrZombie(rank); }, 5s));
  call.context.TryCancel();
  drain.join();
}

TEST(HvdagentTest, RestartKillsWhatAKilledAgentLeftBehind) {
  TempDir dir;
  pid_t leftover = 0;
  {
    RunningAgent first(dir.path());
    ASSERT_GT(first.port, 0) << first.agent->output();
    LaunchCall call;
    // The shell is the rank (it dies with the agent); the sleep it started in the background is
    // what a crashed agent leaves behind.
    launch(first.port, first.keyFile, "crash-job", "sleep 60 & echo $!; wait", &call);
    leftover = std::atoi(call.firstLine.c_str());
    ASSERT_GT(leftover, 0);
    ::kill(first.agent->pid(), SIGKILL);
    EXPECT_EQ(first.agent->waitExit(10s), 128 + SIGKILL);
    call.context.TryCancel();
  }
  std::this_thread::sleep_for(200ms);
  ASSERT_FALSE(deadOrZombie(leftover)) << "the background process should outlive the agent";

  RunningAgent second(dir.path());
  ASSERT_GT(second.port, 0) << second.agent->output();
  EXPECT_TRUE(waitUntil([&] { return deadOrZombie(leftover); }, 5s));
  const std::string out = second.agent->output();
  EXPECT_NE(out.find("killed 1 leftover job group"), std::string::npos) << out;
  if (!deadOrZombie(leftover)) ::kill(leftover, SIGKILL);
  ::kill(second.agent->pid(), SIGTERM);
  EXPECT_EQ(second.agent->waitExit(10s), 0);
}

// With --tls-*, the agent serves mutual TLS only: a client with a certificate from the CA gets
// through (and Describe lists "tls"), a plaintext client and a client whose certificate the CA
// never signed do not.
TEST(HvdagentTest, MutualTlsRequiresAClientCertificateFromTheCa) {
  TempDir dir;
  const std::string certs = (dir.path() / "certs").string();
  fs::create_directory(certs);
  ASSERT_EQ(std::system(
                ("'" + std::string(HVD_MAKE_TEST_CERTS) + "' '" + certs + "' hvd-agent hvd-client")
                    .c_str()),
            0);
  RunningAgent running(dir.path(), {"--tls-cert", certs + "/hvd-agent.pem", "--tls-key",
                                    certs + "/hvd-agent.key", "--tls-ca", certs + "/ca.pem"});
  ASSERT_GT(running.port, 0) << running.agent->output();
  EXPECT_NE(running.agent->output().find("TLS on"), std::string::npos) << running.agent->output();
  const std::string address = "127.0.0.1:" + std::to_string(running.port);
  hvd::agent::auth::SystemClock clock;
  hvd::agent::rpc::CallSigner signer(hvd::agent::auth::ClusterKey::load(running.keyFile.string()),
                                     clock);
  const auto describe = [&](std::shared_ptr<grpc::Channel> channel,
                            hvd::v1::DescribeResponse* response) {
    auto stub = hvd::v1::Agent::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 5s);
    hvd::v1::DescribeRequest request;
    signer.sign(&context, hvd::agent::rpc::kDescribeMethod, request);
    return stub->Describe(&context, request, response);
  };
  hvd::v1::DescribeResponse response;
  const hvd::agent::rpc::TlsOptions client{certs + "/hvd-client.pem", certs + "/hvd-client.key",
                                           certs + "/ca.pem"};
  const grpc::Status ok =
      describe(hvd::agent::rpc::makeChannel(address, client, "hvd-agent"), &response);
  ASSERT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_NE(std::find(response.features().begin(), response.features().end(), "tls"),
            response.features().end());

  EXPECT_FALSE(
      describe(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()), &response).ok());
  const hvd::agent::rpc::TlsOptions rogue{certs + "/rogue.pem", certs + "/rogue.key",
                                          certs + "/ca.pem"};
  EXPECT_FALSE(describe(hvd::agent::rpc::makeChannel(address, rogue, "hvd-agent"), &response).ok());
  ::kill(running.agent->pid(), SIGTERM);
  EXPECT_EQ(running.agent->waitExit(10s), 0);
}

}  // namespace
