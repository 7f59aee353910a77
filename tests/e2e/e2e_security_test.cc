// Security of the control plane across network-namespace hosts (docs/architecture.md
// "Security"): wrong and missing keys, raw signed / unsigned / replayed /
// stale calls from the root namespace to an agent's private address, key-file and root refusals at
// agent start-up, the agent's bound address, and secrets kept off command lines and out of logs.
// Needs root; skipped otherwise.
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "agent/auth/cluster_key.h"
#include "agent/auth/fake_clock.h"
#include "agent/auth/request_signer.h"
#include "agent/rpc/call_auth.h"
#include "agent/rpc/credentials.h"
#include "agent/rpc/methods.h"
#include "e2e_support.h"
#include "hvd/v1/agent.grpc.pb.h"

namespace hvd::e2e {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

// The agent binds exactly the address it was given: no wildcard socket, and nothing answers on
// the namespace's other addresses.
TEST_F(E2e, AgentListensOnlyOnItsAddress) {
  for (int i = 0; i < cluster().size(); ++i) {
    SCOPED_TRACE(cluster().ns(i));
    const RunResult ss = run({"ip", "netns", "exec", cluster().ns(i), "ss", "-Hltnp"}, 10s);
    ASSERT_EQ(ss.status, 0) << describe(ss);
    const std::string port = ":" + std::to_string(cluster().port());
    std::set<std::string> locals;
    std::istringstream in(ss.output);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string state, recvq, sendq, local;
      fields >> state >> recvq >> sendq >> local;
      if (local.size() > port.size() &&
          local.compare(local.size() - port.size(), port.size(), port) == 0) {
        // gRPC binds an IPv6 socket to the v4-mapped address: [::ffff:10.X.Y.Z]:PORT.
        if (local.rfind("[::ffff:", 0) == 0) {
          const auto close = local.find(']');
          local = local.substr(8, close - 8) + local.substr(close + 1);
        }
        locals.insert(local);
      }
    }
    EXPECT_EQ(locals, std::set<std::string>{cluster().agentAddress(i)}) << ss.output;
    // Loopback inside the namespace is refused.
    const RunResult probe = run({"ip", "netns", "exec", cluster().ns(i), "bash", "-c",
                                 "exec 3<>/dev/tcp/127.0.0.1/" + std::to_string(cluster().port())},
                                10s);
    EXPECT_NE(probe.status, 0) << "something listens on 127.0.0.1" << port << " in "
                               << cluster().ns(i);
  }
}

TEST_F(E2e, WrongKeyIsRefused) {
  TempDir dir;
  const std::string wrongKey = dir.file("wrong.key");
  agent::auth::ClusterKey::generate(wrongKey);
  std::vector<std::string> args =
      hvdrunArgs(cluster(), 4, cluster().hostList(2), {"--", HVD_E2E_WORKER_PATH, "allreduce"});
  *std::find(args.begin(), args.end(), cluster().keyFile()) = wrongKey;
  const RunResult r = run(args, 60s);
  EXPECT_EQ(r.status, 77) << describe(r);
  EXPECT_NE(r.output.find("authentication failed"), std::string::npos) << describe(r);
  EXPECT_EQ(countOf(r.output, "e2e rank="), 0u) << describe(r);
}

TEST_F(E2e, MissingKeyFileIsRefused) {
  const std::string missing = "/nonexistent/hvd-e2e/cluster.key";
  std::vector<std::string> args =
      hvdrunArgs(cluster(), 4, cluster().hostList(2), {"--", HVD_E2E_WORKER_PATH, "allreduce"});
  *std::find(args.begin(), args.end(), cluster().keyFile()) = missing;
  const RunResult r = run(args, 60s);
  EXPECT_NE(r.status, 0) << describe(r);
  EXPECT_NE(r.output.find(missing), std::string::npos) << "message should name the key file\n"
                                                       << describe(r);
  EXPECT_EQ(countOf(r.output, "e2e rank="), 0u) << describe(r);
}

// The job's store token reaches workers through their environment only: it is on no command line
// on any host and in no log; neither is the cluster key.
TEST_F(E2e, SecretsStayOffCommandLinesAndLogs) {
  std::unique_ptr<Child> hvdrun;
  std::vector<pid_t> workers;
  ASSERT_NO_FATAL_FAILURE(startSleepingJob(cluster(), 4, cluster().hostList(2), &hvdrun, &workers));
  std::string token;
  {
    std::istringstream environ(readFile("/proc/" + std::to_string(workers[2]) + "/environ"));
    std::string entry;
    while (std::getline(environ, entry, '\0')) {
      if (entry.rfind("HVD_STORE_TOKEN=", 0) == 0) token = entry.substr(16);
    }
  }
  ASSERT_GE(token.size(), 16u) << "no HVD_STORE_TOKEN in rank 2's environment";
  std::vector<pid_t> everyone = {hvdrun->pid()};
  for (int i = 0; i < cluster().size(); ++i) {
    for (pid_t pid : cluster().pidsIn(i)) everyone.push_back(pid);
  }
  for (pid_t pid : everyone) {
    EXPECT_EQ(readFile("/proc/" + std::to_string(pid) + "/cmdline").find(token), std::string::npos)
        << "the store token is on the command line of pid " << pid;
  }
  ::kill(hvdrun->pid(), SIGINT);
  const RunResult r = hvdrun->finish(30s);
  EXPECT_EQ(r.output.find(token), std::string::npos) << "hvdrun printed the store token";

  const std::string key = readFile(cluster().keyFile());
  std::string keyHex = key;
  if (key.size() == 32) {
    static const char* digits = "0123456789abcdef";
    keyHex.clear();
    for (unsigned char c : key) keyHex += {digits[c >> 4], digits[c & 15]};
  }
  while (!keyHex.empty() && keyHex.back() == '\n') keyHex.pop_back();
  for (int i = 0; i < cluster().size(); ++i) {
    const std::string log = cluster().agentLog(i);
    EXPECT_EQ(log.find(token), std::string::npos) << "agent " << i << " logged the store token";
    EXPECT_EQ(log.find(keyHex), std::string::npos) << "agent " << i << " logged the key";
  }
  EXPECT_EQ(survivors(workers, 5s), std::vector<pid_t>()) << describe(r);
}

// --- raw control-plane calls from the root namespace ------------------------------------------

class E2eRpc : public E2e {
 protected:
  void SetUp() override {
    E2e::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    stub_ = v1::Agent::NewStub(agent::rpc::makeChannel(cluster().agentAddress(0), {}));
  }

  grpc::Status callDescribe(const agent::auth::SignedHeaders* headers,
                            v1::DescribeResponse* response = nullptr) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 10s);
    if (headers != nullptr) {
      context.AddMetadata(std::string(agent::auth::kTimestampMetadata), headers->timestamp);
      context.AddMetadata(std::string(agent::auth::kNonceMetadata), headers->nonce);
      context.AddMetadata(std::string(agent::auth::kSignatureMetadata), headers->signature);
    }
    v1::DescribeResponse ignored;
    return stub_->Describe(&context, v1::DescribeRequest(),
                           response != nullptr ? response : &ignored);
  }

  static agent::auth::SignedHeaders sign(const agent::auth::ClusterKey& key,
                                         agent::auth::Clock& clock) {
    agent::auth::RequestSigner signer(key, clock);
    return signer.sign(agent::rpc::kDescribeMethod,
                       agent::rpc::requestDigest(v1::DescribeRequest()));
  }

  std::unique_ptr<v1::Agent::Stub> stub_;
};

void expectRefused(const grpc::Status& status, const std::string& reason) {
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
  EXPECT_NE(status.error_message().find("authentication failed"), std::string::npos)
      << status.error_message();
  EXPECT_NE(status.error_message().find(reason), std::string::npos) << status.error_message();
}

TEST_F(E2eRpc, SignedDescribeWorksAndShowsOnlyTheNamespaceAddress) {
  const auto key = agent::auth::ClusterKey::load(cluster().keyFile());
  agent::auth::SystemClock clock;
  const auto headers = sign(key, clock);
  v1::DescribeResponse response;
  const grpc::Status status = callDescribe(&headers, &response);
  ASSERT_TRUE(status.ok()) << status.error_code() << ": " << status.error_message();
  EXPECT_FALSE(response.hostname().empty());
  EXPECT_GT(response.cpus(), 0);
  // The agent lives in h0: its only non-loopback address is h0's private one.
  std::vector<std::string> addresses(response.addresses().begin(), response.addresses().end());
  EXPECT_NE(std::find(addresses.begin(), addresses.end(), cluster().address(0)), addresses.end())
      << response.DebugString();
  EXPECT_EQ(std::find(addresses.begin(), addresses.end(), cluster().address(1)), addresses.end())
      << response.DebugString();
}

TEST_F(E2eRpc, ReplayedRequestIsRefused) {
  const auto key = agent::auth::ClusterKey::load(cluster().keyFile());
  agent::auth::SystemClock clock;
  const auto headers = sign(key, clock);
  const grpc::Status first = callDescribe(&headers);
  ASSERT_TRUE(first.ok()) << first.error_code() << ": " << first.error_message();
  expectRefused(callDescribe(&headers), "replayed");
  // The agent logs the denial with the caller's address (the bridge's, here) and the reason.
  EXPECT_TRUE(
      agentLogHas(cluster(), 0, {"from ipv4:" + cluster().subnet() + ".1:", "replayed nonce"}, 3s))
      << cluster().agentLog(0);
}

TEST_F(E2eRpc, UnsignedRequestIsRefused) {
  expectRefused(callDescribe(nullptr), "missing signature");
}

TEST_F(E2eRpc, RequestSignedWithAnotherKeyIsRefused) {
  TempDir dir;
  const auto otherKey = agent::auth::ClusterKey::generate(dir.file("other.key"));
  agent::auth::SystemClock clock;
  const auto headers = sign(otherKey, clock);
  expectRefused(callDescribe(&headers), "bad signature");
}

TEST_F(E2eRpc, StaleRequestIsRefused) {
  const auto key = agent::auth::ClusterKey::load(cluster().keyFile());
  agent::auth::FakeClock past(std::chrono::system_clock::now() - 10min);
  const auto headers = sign(key, past);
  expectRefused(callDescribe(&headers), "timestamp outside");
}

// --- start-up refusals of the agent -----------------------------------------------------------

class E2eAgentStartup : public E2e {
 protected:
  // Runs hvdagent in h0's namespace on another port with `keyFile`; it must refuse to start.
  RunResult startAgent(const std::string& keyFile, bool confirmRoot = true, bool allowRoot = true) {
    std::vector<std::string> args = {
        "ip", "netns", "exec", cluster().ns(0), "env", "-u", "HVD_ALLOW_RUN_AS_ROOT_CONFIRM"};
    if (confirmRoot) args.push_back("HVD_ALLOW_RUN_AS_ROOT_CONFIRM=1");
    args.insert(args.end(),
                {HVDAGENT_PATH, "--listen", cluster().address(0) + ":" + std::to_string(kPort),
                 "--key-file", keyFile, "--state-dir", dir_.file("state")});
    if (allowRoot) args.push_back("--allow-run-as-root");
    return run(args, 10s);
  }

  // Writes a copy of the cluster key with `mode`.
  std::string keyWithMode(mode_t mode) {
    const std::string path = dir_.file("key-" + std::to_string(mode));
    fs::copy_file(cluster().keyFile(), path, fs::copy_options::overwrite_existing);
    ::chmod(path.c_str(), mode);
    return path;
  }

  void expectRefusedAtStartup(const RunResult& r, const std::string& what) {
    EXPECT_FALSE(r.timedOut) << "the agent started anyway\n" << e2e::describe(r);
    EXPECT_NE(r.status, 0) << e2e::describe(r);
    EXPECT_NE(r.output.find(what), std::string::npos) << e2e::describe(r);
  }

  static constexpr int kPort = 7476;
  TempDir dir_;
};

TEST_F(E2eAgentStartup, WorldReadableKeyIsRefused) {
  const std::string key = keyWithMode(0644);
  expectRefusedAtStartup(startAgent(key), key);
}

TEST_F(E2eAgentStartup, GroupReadableKeyIsRefused) {
  const std::string key = keyWithMode(0640);
  expectRefusedAtStartup(startAgent(key), key);
}

TEST_F(E2eAgentStartup, MissingAndEmptyKeysAreRefused) {
  const std::string missing = dir_.file("missing.key");
  expectRefusedAtStartup(startAgent(missing), missing);
  const std::string empty = dir_.file("empty.key");
  std::ofstream(empty).close();
  ::chmod(empty.c_str(), 0600);
  expectRefusedAtStartup(startAgent(empty), empty);
}

TEST_F(E2eAgentStartup, RootNeedsBothFlagAndConfirmation) {
  const std::string key = keyWithMode(0600);
  expectRefusedAtStartup(startAgent(key, /*confirmRoot=*/false, /*allowRoot=*/true),
                         "HVD_ALLOW_RUN_AS_ROOT_CONFIRM");
  expectRefusedAtStartup(startAgent(key, /*confirmRoot=*/true, /*allowRoot=*/false),
                         "--allow-run-as-root");
}

}  // namespace
}  // namespace hvd::e2e
