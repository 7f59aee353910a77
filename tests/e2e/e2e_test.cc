// Multi-host end-to-end tests (issue 3, "Multi-host e2e"): every "host" is a Linux network
// namespace joined to a bridge (scripts/netns-cluster.sh), with its own hvdagent listening on a
// private address that exists only there; hvdrun runs here, in the root namespace, as a user
// would type it. Needs root; skipped otherwise.
//
// The E2e suite shares one 2-host cluster: the one the ctest fixture e2e_cluster_up brought up
// ($HVD_E2E_CLUSTER_ENV names its env file), or, when run by hand, one this process brings up and
// tears down. The E2eAgentLoss tests kill agents, so each brings up and tears down its own.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/auth/cluster_key.h"
#include "agent/auth/fake_clock.h"
#include "agent/auth/request_signer.h"
#include "agent/rpc/call_auth.h"
#include "agent/rpc/credentials.h"
#include "agent/rpc/methods.h"
#include "e2e_cluster.h"
#include "e2e_process.h"
#include "gtest/gtest.h"
#include "hvd/v1/agent.grpc.pb.h"

namespace hvd::e2e {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

// hvdrun's exit codes for outcomes that are not a rank's own status (agent/coordinator/
// exit_codes.h; spelled out here as the user-visible contract).
constexpr int kExitAgentUnreachable = 69;
constexpr int kExitAgentLost = 75;

// --- helpers ----------------------------------------------------------------------------------

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "hvd-e2e-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data()) != nullptr ? pattern : std::string();
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// One rank's "e2e rank=..." identity line, as key -> value.
using Fields = std::map<std::string, std::string>;

// The identity lines of hvdrun's (tagged) output, by rank.
std::map<int, std::vector<Fields>> identities(const std::string& output) {
  std::map<int, std::vector<Fields>> byRank;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    const auto at = line.find("e2e rank=");
    if (at == std::string::npos || line.find(" size=", at) == std::string::npos) continue;
    Fields fields;
    std::istringstream words(line.substr(at + 4));
    std::string word;
    while (words >> word) {
      const auto eq = word.find('=');
      if (eq != std::string::npos) fields[word.substr(0, eq)] = word.substr(eq + 1);
    }
    byRank[std::atoi(fields["rank"].c_str())].push_back(fields);
  }
  return byRank;
}

size_t countOf(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

bool alive(pid_t pid) { return ::kill(pid, 0) == 0 || errno != ESRCH; }

std::vector<std::string> hvdrunArgs(const Cluster& cluster, int np, const std::string& hosts,
                                    std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {HVDRUN_PATH,
                                   "-np",
                                   std::to_string(np),
                                   "-H",
                                   hosts,
                                   "--key-file",
                                   cluster.keyFile(),
                                   "--agent-port",
                                   std::to_string(cluster.port())};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// Waits until namespace i holds no process but its agent (or none when the agent is gone), for
// up to `timeout`; returns what is left beyond that, with each process's command line.
std::string leftoversIn(const Cluster& cluster, int i, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    std::string left;
    for (pid_t pid : cluster.pidsIn(i)) {
      if (pid == cluster.agentPid(i)) continue;
      std::ifstream cmdline("/proc/" + std::to_string(pid) + "/cmdline");
      std::string cmd((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
      std::replace(cmd.begin(), cmd.end(), '\0', ' ');
      left += "  pid " + std::to_string(pid) + ": " + cmd + "\n";
    }
    if (left.empty() || Clock::now() >= deadline) return left;
    std::this_thread::sleep_for(100ms);
  }
}

// Starts `hvdrun ... hvd-e2e-worker sleep` and waits until every rank is ready; *workers gets
// the ranks' pids in rank order.
void startSleepingJob(const Cluster& cluster, int np, const std::string& hosts,
                      std::unique_ptr<Child>* hvdrun, std::vector<pid_t>* workers) {
  *hvdrun = std::make_unique<Child>(
      hvdrunArgs(cluster, np, hosts, {"--grace", "2", "--", HVD_E2E_WORKER_PATH, "sleep"}));
  ASSERT_TRUE((*hvdrun)->waitForOutput(
      [np](const std::string& out) { return countOf(out, " ready") >= static_cast<size_t>(np); },
      60s))
      << (*hvdrun)->output();
  workers->clear();
  for (const auto& [rank, lines] : identities((*hvdrun)->output())) {
    workers->push_back(std::atoi(lines[0].at("pid").c_str()));
  }
  ASSERT_EQ(workers->size(), static_cast<size_t>(np)) << (*hvdrun)->output();
}

// Waits up to `timeout` for every pid to be gone; returns the ones still alive.
std::vector<pid_t> survivors(const std::vector<pid_t>& pids, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::vector<pid_t> left;
  for (pid_t pid : pids) {
    while (alive(pid) && Clock::now() < deadline) std::this_thread::sleep_for(50ms);
    if (alive(pid)) left.push_back(pid);
  }
  return left;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// True once agent i's log contains every one of `needles` (within `timeout`).
bool agentLogHas(const Cluster& cluster, int i, const std::vector<std::string>& needles,
                 std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    const std::string log = cluster.agentLog(i);
    if (std::all_of(needles.begin(), needles.end(),
                    [&](const std::string& n) { return log.find(n) != std::string::npos; })) {
      return true;
    }
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(50ms);
  }
}

// Checks that an allreduce job on hosts with `slots` (in host order) ran each rank once, in its
// host's namespace, with the contract's local and cross ranks (cross rank: the host's index among
// the hosts that have a rank with this local rank), and that every rank got the right sums.
void expectPlacement(const Cluster& cluster, const RunResult& r, const std::vector<int>& slots) {
  const auto ranks = identities(r.output);
  int np = 0;
  for (int s : slots) np += s;
  ASSERT_EQ(static_cast<int>(ranks.size()), np) << describe(r);
  int rank = 0;
  for (size_t host = 0; host < slots.size(); ++host) {
    for (int local = 0; local < slots[host]; ++local, ++rank) {
      SCOPED_TRACE("rank " + std::to_string(rank));
      int crossRank = 0, crossSize = 0;
      for (size_t h = 0; h < slots.size(); ++h) {
        if (slots[h] <= local) continue;
        if (h < host) ++crossRank;
        ++crossSize;
      }
      ASSERT_EQ(ranks.count(rank), 1u) << describe(r);
      ASSERT_EQ(ranks.at(rank).size(), 1u) << "rank printed more than once\n" << describe(r);
      Fields f = ranks.at(rank)[0];
      EXPECT_EQ(f["size"], std::to_string(np));
      EXPECT_EQ(f["local_rank"], std::to_string(local));
      EXPECT_EQ(f["local_size"], std::to_string(slots[host]));
      EXPECT_EQ(f["cross_rank"], std::to_string(crossRank));
      EXPECT_EQ(f["cross_size"], std::to_string(crossSize));
      EXPECT_EQ(f["env_rank"], std::to_string(rank));
      EXPECT_EQ(f["env_local_rank"], std::to_string(local));
      EXPECT_EQ(f["env_cross_rank"], std::to_string(crossRank));
      // The rank ran inside its host's namespace, not here.
      EXPECT_EQ(f["netns"], std::to_string(cluster.netnsInode(static_cast<int>(host))));
      EXPECT_EQ(countOf(r.output, "e2e rank=" + std::to_string(rank) +
                                      " allreduce ok sum=" + std::to_string(np * (np + 1) / 2)),
                1u)
          << describe(r);
    }
  }
}

// --- the shared cluster -----------------------------------------------------------------------

class E2e : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    skipReason_ = new std::string(whyNoNetns());
    error_ = new std::string();
    if (!skipReason_->empty()) return;
    if (const char* env = std::getenv("HVD_E2E_CLUSTER_ENV"); env != nullptr && *env != '\0') {
      cluster_ = new std::optional<Cluster>(Cluster::fromEnvFile(env, error_));
    } else {
      cluster_ = new std::optional<Cluster>(
          Cluster::up(2, "e2e" + std::to_string(::getpid() % 1000000), error_));
    }
  }
  static void TearDownTestSuite() {
    if (cluster_ != nullptr) delete cluster_;  // runs `down` when this process brought it up
    cluster_ = nullptr;
    delete skipReason_;
    delete error_;
  }
  void SetUp() override {
    if (!skipReason_->empty()) GTEST_SKIP() << *skipReason_;
    ASSERT_TRUE(cluster_ != nullptr && cluster_->has_value()) << *error_;
  }
  // After every test on the shared cluster: its agents are alive and no worker is left.
  void TearDown() override {
    if (!skipReason_->empty() || cluster_ == nullptr || !cluster_->has_value()) return;
    for (int i = 0; i < cluster().size(); ++i) {
      EXPECT_TRUE(alive(cluster().agentPid(i))) << "agent " << i << " died; its log:\n"
                                                << cluster().agentLog(i);
      EXPECT_EQ(leftoversIn(cluster(), i, 5s), "") << "processes left in " << cluster().ns(i);
    }
  }

  static const Cluster& cluster() { return **cluster_; }

  static std::string* skipReason_;
  static std::string* error_;
  static std::optional<Cluster>* cluster_;
};

std::string* E2e::skipReason_ = nullptr;
std::string* E2e::error_ = nullptr;
std::optional<Cluster>* E2e::cluster_ = nullptr;

TEST_F(E2e, AllreduceAcrossTwoHosts) {
  const RunResult r =
      run(hvdrunArgs(cluster(), 4, cluster().hostList(2), {"--", HVD_E2E_WORKER_PATH, "allreduce"}),
          90s);
  ASSERT_EQ(r.status, 0) << describe(r);
  expectPlacement(cluster(), r, {2, 2});
  // Across namespaces the ranks talk TCP (shared memory only within a host).
  for (const auto& [rank, lines] : identities(r.output)) {
    EXPECT_NE(lines[0].at("transport").find("tcp"), std::string::npos) << "rank " << rank;
  }
}

TEST_F(E2e, UnevenSlotsAcrossTwoHosts) {
  const std::string hosts = cluster().address(0) + ":1," + cluster().address(1) + ":2";
  const RunResult r =
      run(hvdrunArgs(cluster(), 3, hosts, {"--", HVD_E2E_WORKER_PATH, "allreduce"}), 90s);
  ASSERT_EQ(r.status, 0) << describe(r);
  expectPlacement(cluster(), r, {1, 2});
}

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

TEST_F(E2e, UnreachableHostFailsFastAndNamesIt) {
  const std::string ghost = cluster().subnet() + ".250";  // in the subnet, no namespace has it
  const std::string hosts = cluster().address(0) + ":2," + ghost + ":2";
  const RunResult r =
      run(hvdrunArgs(cluster(), 4, hosts,
                     {"--start-timeout", "10", "--", HVD_E2E_WORKER_PATH, "allreduce"}),
          60s);
  EXPECT_EQ(r.status, kExitAgentUnreachable) << describe(r);
  EXPECT_LT(r.seconds, 15.0) << describe(r);
  EXPECT_NE(r.output.find(ghost), std::string::npos) << describe(r);
  EXPECT_EQ(countOf(r.output, "e2e rank="), 0u) << "ranks started anyway\n" << describe(r);
}

TEST_F(E2e, UnreachableLeaderFailsFastAndNamesIt) {
  const std::string ghost = cluster().subnet() + ".251";
  const std::string hosts = ghost + ":2," + cluster().address(0) + ":2";
  const RunResult r =
      run(hvdrunArgs(cluster(), 4, hosts,
                     {"--start-timeout", "10", "--", HVD_E2E_WORKER_PATH, "allreduce"}),
          60s);
  EXPECT_EQ(r.status, kExitAgentUnreachable) << describe(r);
  EXPECT_LT(r.seconds, 15.0) << describe(r);
  EXPECT_NE(r.output.find(ghost), std::string::npos) << describe(r);
}

TEST_F(E2e, WrongKeyIsRefused) {
  TempDir dir;
  const std::string wrongKey = dir.path() + "/wrong.key";
  agent::auth::ClusterKey::generate(wrongKey);
  std::vector<std::string> args =
      hvdrunArgs(cluster(), 4, cluster().hostList(2), {"--", HVD_E2E_WORKER_PATH, "allreduce"});
  *std::find(args.begin(), args.end(), cluster().keyFile()) = wrongKey;
  const RunResult r = run(args, 60s);
  EXPECT_NE(r.status, 0) << describe(r);
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

// If hvdrun itself is killed, the agents stop its job: nothing is left on any host.
TEST_F(E2e, KilledHvdrunLeavesNoWorkers) {
  std::unique_ptr<Child> hvdrun;
  std::vector<pid_t> workers;
  ASSERT_NO_FATAL_FAILURE(startSleepingJob(cluster(), 4, cluster().hostList(2), &hvdrun, &workers));
  ::kill(hvdrun->pid(), SIGKILL);
  hvdrun->finish(10s);
  EXPECT_EQ(survivors(workers, 15s), std::vector<pid_t>()) << "workers outlived hvdrun";
}

// Ctrl-C stops the job gracefully on every host and hvdrun reports 130 (128 + SIGINT).
TEST_F(E2e, CtrlCStopsTheJobEverywhere) {
  std::unique_ptr<Child> hvdrun;
  std::vector<pid_t> workers;
  ASSERT_NO_FATAL_FAILURE(startSleepingJob(cluster(), 4, cluster().hostList(2), &hvdrun, &workers));
  ::kill(hvdrun->pid(), SIGINT);
  const RunResult r = hvdrun->finish(30s);
  EXPECT_EQ(r.status, 130) << describe(r);
  EXPECT_EQ(survivors(workers, 5s), std::vector<pid_t>()) << describe(r);
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
  const auto otherKey = agent::auth::ClusterKey::generate(dir.path() + "/other.key");
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
                 "--key-file", keyFile, "--state-dir", dir_.path() + "/state"});
    if (allowRoot) args.push_back("--allow-run-as-root");
    return run(args, 10s);
  }

  // Writes a copy of the cluster key with `mode`.
  std::string keyWithMode(mode_t mode) {
    const std::string path = dir_.path() + "/key-" + std::to_string(mode);
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
  const std::string missing = dir_.path() + "/missing.key";
  expectRefusedAtStartup(startAgent(missing), missing);
  const std::string empty = dir_.path() + "/empty.key";
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

// --- losing an agent mid-job (each test on its own cluster) -----------------------------------

class E2eAgentLoss : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = whyNoNetns();
    if (!why.empty()) GTEST_SKIP() << why;
    std::string error;
    // A prefix of its own ("e2e" + pid + test letter), apart from the shared cluster's.
    std::optional<Cluster> cluster =
        Cluster::up(2, "e2e" + std::to_string(::getpid() % 100000) + "k", &error);
    ASSERT_TRUE(cluster.has_value()) << error;
    cluster_.emplace(std::move(*cluster));
  }
  void TearDown() override { cluster_.reset(); }

  // Starts a 2+2 sleeping job, loses host `victim` once every rank is ready (its agent is
  // SIGKILLed, or with `partition` its link to the bridge goes down: no FIN, no RST, only
  // keepalive can tell), and checks that hvdrun exits with "agent lost" within the bound, names
  // the host, and that no worker survives anywhere.
  void loseHostMidJob(int victim, bool partition = false) {
    const Cluster& c = *cluster_;
    std::unique_ptr<Child> hvdrun;
    std::vector<pid_t> workers;
    ASSERT_NO_FATAL_FAILURE(startSleepingJob(c, 4, c.hostList(2), &hvdrun, &workers));

    const pid_t agent = c.agentPid(victim);
    ASSERT_GT(agent, 0);
    const auto killed = Clock::now();
    if (partition) {
      const RunResult cut =
          run({"ip", "link", "set", c.prefix() + "-v" + std::to_string(victim), "down"}, 10s);
      ASSERT_EQ(cut.status, 0) << e2e::describe(cut);
    } else {
      ASSERT_EQ(::kill(agent, SIGKILL), 0);
    }
    const RunResult r = hvdrun->finish(30s);
    const double seconds = std::chrono::duration<double>(Clock::now() - killed).count();
    std::printf("host %d %s: hvdrun exited %d after %.2f s\n", victim,
                partition ? "cut off" : "agent killed", r.status, seconds);
    EXPECT_EQ(r.status, kExitAgentLost) << describe(r);
    EXPECT_LT(seconds, 15.0) << describe(r);
    EXPECT_NE(r.output.find(c.address(victim)), std::string::npos)
        << "the message should name the lost host\n"
        << describe(r);

    // No worker outlives the job, on either host. Slack: a cut-off host's agent notices by
    // keepalive (~5 s), then grants the ranks their grace.
    EXPECT_EQ(survivors(workers, 10s), std::vector<pid_t>()) << describe(r);
    for (int i = 0; i < c.size(); ++i) {
      EXPECT_EQ(leftoversIn(c, i, 1s), "") << "processes left in " << c.ns(i);
    }
    if (victim != 0 || partition) {
      EXPECT_TRUE(alive(c.agentPid(0))) << "the leader agent died too; its log:\n" << c.agentLog(0);
    }
  }

  std::optional<Cluster> cluster_;
};

TEST_F(E2eAgentLoss, KillingAWorkerHostsAgentFailsTheJobEverywhere) { loseHostMidJob(1); }

TEST_F(E2eAgentLoss, KillingTheLeaderAgentFailsTheJobEverywhere) { loseHostMidJob(0); }

TEST_F(E2eAgentLoss, PartitionedHostFailsTheJobEverywhere) {
  loseHostMidJob(1, /*partition=*/true);
}

}  // namespace
}  // namespace hvd::e2e
