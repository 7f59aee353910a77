// agent/rpc (conversions, signed calls checked by CallGuard) and agent/client's RemoteNodeAgent,
// driven against a scripted hvd.v1.Agent server running in-process on 127.0.0.1:0.
#include <google/protobuf/descriptor.h>
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "agent/auth/cluster_key.h"
#include "agent/auth/fake_clock.h"
#include "agent/client/remote_node_agent.h"
#include "agent/coordinator/rank_environments.h"
#include "agent/rpc/call_auth.h"
#include "agent/rpc/convert.h"
#include "agent/rpc/methods.h"
#include "common/captured_log.h"
#include "common/grpc_test_server.h"
#include "common/test_support.h"
#include "hvd/error.hpp"
#include "hvd_support/logging.h"

namespace hvd::agent {
namespace {

using namespace std::chrono_literals;

auth::ClusterKey newKey(const test::TempDir& dir, const std::string& name) {
  return auth::ClusterKey::generate(dir.file(name));
}

// Records what the coordinator would see.
class RecordingEvents : public coordinator::JobEvents {
 public:
  void onOutput(int rank, process::Stream stream, std::string_view line) override {
    std::lock_guard<std::mutex> lock(mutex_);
    lines.push_back(std::to_string(rank) + (stream == process::Stream::kStderr ? "!" : ":") +
                    std::string(line));
  }
  void onExit(int rank, const process::ExitStatus& status) override {
    std::lock_guard<std::mutex> lock(mutex_);
    exits.emplace_back(rank, status.shellStatus());
    changed_.notify_all();
  }
  void onAgentLost(const std::string& host, const std::string& reason) override {
    std::lock_guard<std::mutex> lock(mutex_);
    lost.push_back(host + ": " + reason);
    changed_.notify_all();
  }
  bool waitFor(size_t exitCount, size_t lostCount, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, timeout,
                             [&] { return exits.size() >= exitCount && lost.size() >= lostCount; });
  }

  std::vector<std::string> lines;
  std::vector<std::pair<int, int>> exits;
  std::vector<std::string> lost;

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
};

// A scripted agent: checks signatures with CallGuard like the real one, answers Describe with
// fixed facts, and plays a Launch stream that the test controls.
class FakeAgentService final : public v1::Agent::Service {
 public:
  explicit FakeAgentService(rpc::CallGuard* guard) : guard_(guard) {}

  grpc::Status Describe(grpc::ServerContext* context, const v1::DescribeRequest* request,
                        v1::DescribeResponse* response) override {
    if (grpc::Status s = guard_->check(*context, rpc::kDescribeMethod, *request); !s.ok()) return s;
    if (describeDelay > 0ms) std::this_thread::sleep_for(describeDelay);
    response->set_hostname("fake-node");
    response->set_cpus(7);
    response->add_addresses("10.0.0.7");
    v1::Gpu* gpu = response->add_gpus();
    gpu->set_index(0);
    gpu->set_uuid("GPU-1");
    gpu->set_memory_bytes(80ull << 30);
    response->set_version("9.9.9");
    return grpc::Status::OK;
  }

  grpc::Status Launch(grpc::ServerContext* context, const v1::LaunchRequest* request,
                      grpc::ServerWriter<v1::RankEvent>* writer) override {
    if (grpc::Status s = guard_->check(*context, rpc::kLaunchMethod, *request); !s.ok()) return s;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      lastLaunch = *request;
    }
    v1::RankEvent event;
    event.mutable_launched()->set_error(launchError);
    writer->Write(event);
    if (!launchError.empty()) return grpc::Status::OK;
    for (const v1::RankSpec& rank : request->ranks()) {
      v1::RankEvent out;
      out.mutable_output()->set_rank(rank.rank());
      out.mutable_output()->set_stream(v1::STDERR);
      out.mutable_output()->set_line("hello from " + std::to_string(rank.rank()));
      writer->Write(out);
      if (holdLastRank && rank.rank() == request->ranks().rbegin()->rank()) continue;
      v1::RankEvent exit;
      exit.mutable_exit()->set_rank(rank.rank());
      exit.mutable_exit()->set_exit_code(rank.rank() + 1);
      writer->Write(exit);
    }
    if (holdLastRank) {
      // Wait until the client cancels (or the test says to drop the stream).
      while (!context->IsCancelled() && !dropStream) std::this_thread::sleep_for(10ms);
      clientCancelled = context->IsCancelled();
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "agent going away");
    }
    return grpc::Status::OK;
  }

  grpc::Status Stop(grpc::ServerContext* context, const v1::StopRequest* request,
                    v1::StopResponse*) override {
    if (grpc::Status s = guard_->check(*context, rpc::kStopMethod, *request); !s.ok()) return s;
    std::lock_guard<std::mutex> lock(mutex_);
    stops.push_back(*request);
    return grpc::Status::OK;
  }

  std::chrono::milliseconds describeDelay{0};
  std::string launchError;
  bool holdLastRank = false;
  std::atomic<bool> dropStream{false};
  std::atomic<bool> clientCancelled{false};
  std::mutex mutex_;
  v1::LaunchRequest lastLaunch;
  std::vector<v1::StopRequest> stops;

 private:
  rpc::CallGuard* guard_;
};

// The scripted agent on 127.0.0.1:0 with a fresh key, and a signer for that key.
class FakeAgentFixture : public ::testing::Test {
 protected:
  // Starts the agent with `credentials` (insecure when null); server_ is null if it failed.
  void startAgent(std::shared_ptr<grpc::ServerCredentials> credentials = nullptr) {
    key_.emplace(newKey(dir_, "key"));
    verifier_ = std::make_unique<auth::RequestVerifier>(*key_, clock_);
    guard_ = std::make_unique<rpc::CallGuard>(verifier_.get());
    service_ = std::make_unique<FakeAgentService>(guard_.get());
    server_ = test::startLoopbackServer(service_.get(), &port_, std::move(credentials));
    signer_ = std::make_unique<rpc::CallSigner>(*key_, clock_);
  }
  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + 1s);
  }

  test::TempDir dir_;
  auth::SystemClock clock_;
  std::optional<auth::ClusterKey> key_;
  std::unique_ptr<auth::RequestVerifier> verifier_;
  std::unique_ptr<rpc::CallGuard> guard_;
  std::unique_ptr<FakeAgentService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<rpc::CallSigner> signer_;
  int port_ = 0;
};

class RpcTest : public FakeAgentFixture {
 protected:
  void SetUp() override {
    startAgent();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
  }

  std::string address() const { return test::loopbackAddress(port_); }
  client::RemoteAgentOptions options(std::chrono::milliseconds timeout = 5000ms) const {
    client::RemoteAgentOptions o;
    o.host = "node-b";
    o.address = address();
    o.callTimeout = timeout;
    return o;
  }
};

TEST(RpcMethods, NamesMatchTheServiceDescriptor) {
  const auto* service = google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
      std::string(v1::Agent::service_full_name()));
  ASSERT_NE(service, nullptr);
  ASSERT_EQ(service->method_count(), 10);
  std::vector<std::string> names;
  for (int i = 0; i < service->method_count(); ++i) {
    names.push_back("/" + service->full_name() + "/" + service->method(i)->name());
  }
  EXPECT_EQ(names, (std::vector<std::string>{
                       std::string(rpc::kDescribeMethod), std::string(rpc::kLaunchMethod),
                       std::string(rpc::kStopMethod), std::string(rpc::kReserveMethod),
                       std::string(rpc::kUnreserveMethod), std::string(rpc::kSubmitJobMethod),
                       std::string(rpc::kCancelJobMethod), std::string(rpc::kListJobsMethod),
                       std::string(rpc::kGetJobMethod), std::string(rpc::kJobLogsMethod)}));
}

TEST(RpcConvert, JobResultRoundTrips) {
  coordinator::JobResult r;
  r.jobId = "job-1";
  r.outcome = coordinator::JobOutcome::kRankFailed;
  r.exitCode = 137;
  r.summary = "hvdrun: rank 3 on b was killed by signal 9 (Killed)";
  r.rank = 3;
  r.host = "b";
  r.status = process::ExitStatus{0, 9};
  r.reason = "why";
  r.stderrTail = {"line 1", std::string("bin\xff\x00ary", 8)};
  r.unreportedRanks = {5, 6};
  const coordinator::JobResult back = rpc::fromProto(rpc::toProto(r));
  EXPECT_EQ(back.jobId, r.jobId);
  EXPECT_EQ(back.outcome, r.outcome);
  EXPECT_EQ(back.exitCode, 137);
  EXPECT_EQ(back.summary, r.summary);
  EXPECT_EQ(back.rank, 3);
  EXPECT_EQ(back.host, "b");
  ASSERT_TRUE(back.status.has_value());
  EXPECT_EQ(back.status->signal, 9);
  EXPECT_EQ(back.reason, "why");
  EXPECT_EQ(back.stderrTail, r.stderrTail);
  EXPECT_EQ(back.unreportedRanks, r.unreportedRanks);

  coordinator::JobResult ok;
  EXPECT_FALSE(rpc::fromProto(rpc::toProto(ok)).status.has_value());
}

TEST(RpcConvert, SubmitRequestRoundTripsAndIsValidated) {
  coordinator::JobSpec spec;
  spec.jobId = "train";
  spec.argv = {"./train", "--lr", "0.1"};
  spec.env = {"A=1", "B=two words"};
  spec.cwd = "/work";
  spec.np = 3;
  spec.hosts = {{"a", 1}, {"b", std::nullopt}};
  spec.oversubscribe = true;
  spec.gpuBind = node::GpuBind::kVisible;
  spec.gpusPerRank = 2;
  spec.stopSignal = SIGINT;
  spec.grace = 2500ms;
  spec.treeWidth = 3;
  spec.connectTimeout = 7s;
  spec.name = "train.py";
  spec.detach = true;
  const v1::SubmitJobRequest request = rpc::toProto(spec, {"a:7475", "b:7475"});
  EXPECT_EQ(request.hosts(1).agent_address(), "b:7475");
  EXPECT_EQ(request.hosts(1).slots(), 0);
  const coordinator::JobSpec back = rpc::fromProto(request);
  EXPECT_EQ(back.argv, spec.argv);
  EXPECT_EQ(back.env, spec.env);
  EXPECT_EQ(back.cwd, "/work");
  EXPECT_EQ(back.np, 3);
  EXPECT_EQ(back.hosts, spec.hosts);
  EXPECT_TRUE(back.oversubscribe);
  EXPECT_EQ(back.gpuBind, node::GpuBind::kVisible);
  EXPECT_EQ(back.gpusPerRank, 2);
  EXPECT_EQ(back.stopSignal, SIGINT);
  EXPECT_EQ(back.grace, 2500ms);
  // What the leader needs to reach the other hosts travels in the spec, not in the message.
  EXPECT_EQ(back.agentAddresses,
            (std::map<std::string, std::string>{{"a", "a:7475"}, {"b", "b:7475"}}));
  EXPECT_EQ(back.treeWidth, 3);
  EXPECT_EQ(back.connectTimeout, 7s);
  EXPECT_EQ(back.name, "train.py");
  EXPECT_TRUE(back.detach);
  // And back: the spec alone rebuilds the request (a queued job's saved request).
  const coordinator::JobSpec again = rpc::fromProto(rpc::toProto(back, {}));
  EXPECT_EQ(again.agentAddresses, back.agentAddresses);
  EXPECT_EQ(again.treeWidth, 3);
  EXPECT_EQ(again.connectTimeout, 7s);
  EXPECT_EQ(again.name, "train.py");
  EXPECT_TRUE(again.detach);

  v1::SubmitJobRequest bad = request;
  bad.set_np(0);
  EXPECT_THROW(rpc::fromProto(bad), hvd::InvalidArgumentError);
  bad = request;
  bad.clear_argv();
  EXPECT_THROW(rpc::fromProto(bad), hvd::InvalidArgumentError);
  bad = request;
  bad.clear_hosts();
  EXPECT_THROW(rpc::fromProto(bad), hvd::InvalidArgumentError);
  bad = request;
  bad.set_gpus_per_rank(-1);
  EXPECT_THROW(rpc::fromProto(bad), hvd::InvalidArgumentError);
  bad = request;
  bad.clear_gpus_per_rank();  // an older client: one GPU per rank
  EXPECT_EQ(rpc::fromProto(bad).gpusPerRank, 1);
  bad = request;
  bad.mutable_hosts(0)->set_slots(-1);
  EXPECT_THROW(rpc::fromProto(bad), hvd::InvalidArgumentError);
  bad = request;
  bad.set_stop_signal(0);
  EXPECT_THROW(rpc::fromProto(bad), hvd::InvalidArgumentError);
}

TEST(RpcConvert, AnElasticJobsOptionsRoundTripAndAreValidated) {
  coordinator::JobSpec spec;
  spec.argv = {"./train"};
  spec.np = 4;
  spec.hosts = {{"a", 2}, {"b", 2}};
  spec.elastic.enabled = true;
  spec.elastic.minNp = 2;
  spec.elastic.maxNp = 6;
  spec.elastic.discoveryScript = "/opt/discover.sh";
  spec.elastic.slotsPerHost = 3;
  spec.elastic.discoveryInterval = 2500ms;
  spec.elastic.timeout = 90s;
  spec.elastic.resetLimit = 0;
  spec.elastic.cooldownSeconds = std::make_pair(10, 100);
  spec.elastic.agentPort = 7700;
  const v1::SubmitJobRequest request = rpc::toProto(spec, {"a:7700", "b:7700"});
  ASSERT_TRUE(request.has_elastic());
  const coordinator::ElasticSpec back = rpc::fromProto(request).elastic;
  EXPECT_TRUE(back.enabled);
  EXPECT_EQ(back.minNp, 2);
  EXPECT_EQ(back.maxNp, 6);
  EXPECT_EQ(back.discoveryScript, "/opt/discover.sh");
  EXPECT_EQ(back.slotsPerHost, 3);
  EXPECT_EQ(back.discoveryInterval, 2500ms);
  EXPECT_EQ(back.timeout, 90s);
  EXPECT_EQ(back.resetLimit, std::optional<int>(0));  // 0 allows no reset: not "no limit"
  EXPECT_EQ(back.cooldownSeconds, std::make_optional(std::make_pair(10, 100)));
  EXPECT_EQ(back.agentPort, 7700);

  spec.elastic.resetLimit.reset();
  spec.elastic.cooldownSeconds.reset();
  const coordinator::ElasticSpec unset = rpc::fromProto(rpc::toProto(spec, {})).elastic;
  EXPECT_FALSE(unset.resetLimit.has_value());
  EXPECT_FALSE(unset.cooldownSeconds.has_value());

  spec.elastic = {};
  EXPECT_FALSE(rpc::toProto(spec, {}).has_elastic());
  EXPECT_FALSE(rpc::fromProto(rpc::toProto(spec, {})).elastic.enabled);

  v1::SubmitJobRequest bad = request;
  bad.mutable_elastic()->set_min_np(5);  // more than -np
  EXPECT_THROW(rpc::fromProto(bad), hvd::InvalidArgumentError);
  bad = request;
  bad.mutable_elastic()->set_max_np(3);  // less than -np
  EXPECT_THROW(rpc::fromProto(bad), hvd::InvalidArgumentError);
  bad = request;
  bad.mutable_elastic()->set_timeout_ms(0);
  EXPECT_THROW(rpc::fromProto(bad), hvd::InvalidArgumentError);
  bad = request;
  bad.mutable_elastic()->set_cooldown_max_seconds(5);  // below MIN
  EXPECT_THROW(rpc::fromProto(bad), hvd::InvalidArgumentError);
}

TEST(RpcConvert, LaunchRequestCarriesStopPolicy) {
  coordinator::LaunchRequest request;
  request.jobId = "j";
  request.stopSignal = SIGUSR1;
  request.grace = 1500ms;
  request.ranks.push_back({4, {{"prog", "x"}, {"K=V"}, "/tmp"}});
  const coordinator::LaunchRequest back = rpc::fromProto(rpc::toProto(request));
  EXPECT_EQ(back.jobId, "j");
  EXPECT_EQ(back.stopSignal, SIGUSR1);
  EXPECT_EQ(back.grace, 1500ms);
  ASSERT_EQ(back.ranks.size(), 1u);
  EXPECT_EQ(back.ranks[0].rank, 4);
  EXPECT_EQ(back.ranks[0].spec.argv, (std::vector<std::string>{"prog", "x"}));
  EXPECT_EQ(back.ranks[0].spec.env, (std::vector<std::string>{"K=V"}));
  EXPECT_EQ(back.ranks[0].spec.cwd, "/tmp");
}

// A job's ranks: the leader sends the host's environment template and each rank's placement;
// the agent that starts them builds each environment, equal to what building it from the whole
// input gives, and the message carries the shared part once however many ranks the host has.
TEST(RpcConvert, ALaunchCarriesTheHostsTemplateAndEachAgentBuildsItsRanksEnvironments) {
  node::WorkerEnvInput input;
  input.forwarded = {"PATH=/usr/bin", "BIG=" + std::string(1000, 'x'), "RANK=99"};
  input.size = 16;
  input.groupRank = 1;
  input.hostName = "node-b";
  input.jobId = "job-7";
  input.storeAddr = "node-a:4000";
  input.storeToken = "secret-token";
  input.masterAddr = "node-a";
  input.masterPort = 29500;
  input.hostGpus = {3, 5, 6, 7};
  input.gpusPerRank = 2;
  input.gpuBind = node::GpuBind::kVisible;
  input.oversubscribe = false;
  input.restartCount = 2;
  input.maxRestarts = 3;
  coordinator::LaunchRequest request;
  request.jobId = "job-7.1";
  request.environment = input;
  for (int local = 0; local < 2; ++local) {
    coordinator::RankLaunch rank;
    rank.rank = 8 + local;
    rank.spec.argv = {"python3", "train.py"};
    rank.spec.cwd = "/work";
    rank.placement = contract::RankPlacement{8 + local, 1, local, 2, 1, 2};
    request.ranks.push_back(rank);
  }
  const v1::LaunchRequest message = rpc::toProto(request);
  EXPECT_EQ(message.ranks(0).env_size(), 0);
  EXPECT_LT(message.ByteSizeLong(), 1400u);  // the 1000-byte entry once
  coordinator::LaunchRequest back = rpc::fromProto(message);
  ASSERT_TRUE(back.environment.has_value());
  coordinator::buildRankEnvironments(&back);
  ASSERT_EQ(back.ranks.size(), 2u);
  for (int local = 0; local < 2; ++local) {
    node::WorkerEnvInput whole = input;
    whole.placement = *request.ranks[local].placement;
    EXPECT_EQ(back.ranks[local].spec.env, node::buildWorkerEnvironment(whole)) << local;
    ASSERT_TRUE(back.ranks[local].placement.has_value());
    EXPECT_EQ(*back.ranks[local].placement, *request.ranks[local].placement);
  }
  const std::map<std::string, std::string> rank9 = test::environmentMap(back.ranks[1].spec.env);
  EXPECT_EQ(rank9.at("HVD_RANK"), "9");
  EXPECT_EQ(rank9.at("RANK"), "9");  // hvd's own value wins over the forwarded one
  EXPECT_EQ(rank9.at("HVD_LOCAL_RANK"), "1");
  EXPECT_EQ(rank9.at("HVD_GPU"), "6,7");
  EXPECT_EQ(rank9.at("CUDA_VISIBLE_DEVICES"), "6,7");
  EXPECT_EQ(rank9.at("HVD_STORE_TOKEN"), "secret-token");
  EXPECT_EQ(rank9.at("HVD_RESTART_COUNT"), "2");
  EXPECT_EQ(rank9.at("GROUP_RANK"), "1");
  // A placement without a template cannot be built.
  coordinator::LaunchRequest orphan = back;
  orphan.environment.reset();
  EXPECT_THROW(coordinator::buildRankEnvironments(&orphan), hvd::InvalidArgumentError);
}

// A host's ranks share most of their environment and their command: sent once, as the host's
// template, and given back to every rank whole.
TEST(RpcConvert, ALaunchSendsWhatItsRanksShareOnceAndGivesEachRankItsWholeEnvironment) {
  coordinator::LaunchRequest request;
  request.jobId = "j";
  const std::vector<std::string> shared = {"PATH=/usr/bin", "HVD_SIZE=8", "HVD_STORE_ADDR=h:1",
                                           "BIG=" + std::string(1000, 'x')};
  for (int r = 0; r < 8; ++r) {
    std::vector<std::string> env = shared;
    env.insert(env.begin() + 1, "HVD_RANK=" + std::to_string(r));
    env.push_back("HVD_LOCAL_RANK=" + std::to_string(r));
    request.ranks.push_back({r, {{"python3", "train.py"}, env, "/work"}});
  }
  const v1::LaunchRequest message = rpc::toProto(request);
  EXPECT_EQ(std::vector<std::string>(message.common_env().begin(), message.common_env().end()),
            shared);
  EXPECT_EQ(message.common_argv_size(), 2);
  EXPECT_EQ(message.common_cwd(), "/work");
  EXPECT_EQ(message.ranks(3).env_size(), 2);
  EXPECT_EQ(message.ranks(3).argv_size(), 0);
  // The 1000-byte entry once, not eight times.
  EXPECT_LT(message.ByteSizeLong(), 2000u);
  const coordinator::LaunchRequest back = rpc::fromProto(message);
  ASSERT_EQ(back.ranks.size(), 8u);
  for (int r = 0; r < 8; ++r) {
    std::vector<std::string> want = request.ranks[r].spec.env;
    std::vector<std::string> got = back.ranks[r].spec.env;
    std::sort(want.begin(), want.end());
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, want) << "rank " << r;
    EXPECT_EQ(back.ranks[r].spec.argv, (std::vector<std::string>{"python3", "train.py"}));
    EXPECT_EQ(back.ranks[r].spec.cwd, "/work");
  }
  // Ranks with commands of their own keep them.
  request.ranks[5].spec.argv = {"other"};
  request.ranks[6].spec.cwd = "/elsewhere";
  const coordinator::LaunchRequest mixed = rpc::fromProto(rpc::toProto(request));
  EXPECT_EQ(mixed.ranks[5].spec.argv, (std::vector<std::string>{"other"}));
  EXPECT_EQ(mixed.ranks[6].spec.cwd, "/elsewhere");
  EXPECT_EQ(mixed.ranks[4].spec.argv, (std::vector<std::string>{"python3", "train.py"}));
  EXPECT_EQ(mixed.ranks[4].spec.cwd, "/work");
}

TEST_F(RpcTest, SignedDescribeSucceedsAndConverts) {
  client::RemoteNodeAgent agent(options(), signer_.get());
  const coordinator::DescribeResult r = agent.describe();
  ASSERT_TRUE(r.ok()) << r.error.reason;
  EXPECT_EQ(r.description->hostname, "fake-node");
  EXPECT_EQ(r.description->cpus, 7);
  ASSERT_EQ(r.description->gpus.size(), 1u);
  EXPECT_EQ(r.description->gpus[0].memoryBytes, 80ull << 30);
  EXPECT_EQ(r.description->version, "9.9.9");
  EXPECT_EQ(guard_->denials(), 0u);
}

TEST_F(RpcTest, WrongKeyIsRefusedWithAuthenticationFailed) {
  auth::ClusterKey other = newKey(dir_, "other");
  rpc::CallSigner wrong(other, clock_);
  client::RemoteNodeAgent agent(options(), &wrong);
  const coordinator::DescribeResult r = agent.describe();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error.reason, "authentication failed: bad signature");
  EXPECT_TRUE(r.error.authenticationFailed);
  EXPECT_EQ(r.error.host, "node-b");
  EXPECT_EQ(r.error.address, address());
  EXPECT_EQ(guard_->denials(), 1u);
  // A retry reconnects from another port: counted, but not logged again.
  client::RemoteNodeAgent retry(options(), &wrong);
  EXPECT_FALSE(retry.describe().ok());
  EXPECT_EQ(guard_->denials(), 2u);
  EXPECT_EQ(guard_->loggedDenials(), 1u);
}

TEST_F(RpcTest, UnsignedReplayedAndTamperedCallsAreRefused) {
  auto stub = v1::Agent::NewStub(rpc::makeChannel(address(), {}));
  v1::DescribeRequest request;
  v1::DescribeResponse response;
  {
    grpc::ClientContext context;
    const grpc::Status s = stub->Describe(&context, request, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(s.error_message(), "authentication failed: missing signature");
  }
  // Capture one signature and send it twice: the second is a replay.
  auth::RequestSigner raw(*key_, clock_);
  const auth::SignedHeaders headers = raw.sign(rpc::kDescribeMethod, rpc::requestDigest(request));
  for (int attempt = 0; attempt < 2; ++attempt) {
    grpc::ClientContext context;
    context.AddMetadata("hvd-ts", headers.timestamp);
    context.AddMetadata("hvd-nonce", headers.nonce);
    context.AddMetadata("hvd-sig", headers.signature);
    const grpc::Status s = stub->Describe(&context, request, &response);
    if (attempt == 0) {
      EXPECT_TRUE(s.ok()) << s.error_message();
    } else {
      EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
      EXPECT_EQ(s.error_message(), "authentication failed: replayed nonce");
    }
  }
  // A Describe signature does not open Stop, and a signed body cannot be changed.
  {
    const auth::SignedHeaders moved = raw.sign(rpc::kDescribeMethod, rpc::requestDigest(request));
    v1::StopRequest stop;
    grpc::ClientContext context;
    context.AddMetadata("hvd-ts", moved.timestamp);
    context.AddMetadata("hvd-nonce", moved.nonce);
    context.AddMetadata("hvd-sig", moved.signature);
    v1::StopResponse stopResponse;
    EXPECT_EQ(stub->Stop(&context, stop, &stopResponse).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    v1::StopRequest signedStop;
    signedStop.set_job_id("a");
    const auth::SignedHeaders h = raw.sign(rpc::kStopMethod, rpc::requestDigest(signedStop));
    v1::StopRequest tampered = signedStop;
    tampered.set_job_id("b");
    grpc::ClientContext context;
    context.AddMetadata("hvd-ts", h.timestamp);
    context.AddMetadata("hvd-nonce", h.nonce);
    context.AddMetadata("hvd-sig", h.signature);
    v1::StopResponse stopResponse;
    const grpc::Status s = stub->Stop(&context, tampered, &stopResponse);
    EXPECT_EQ(s.error_message(), "authentication failed: bad signature");
  }
  std::lock_guard<std::mutex> lock(service_->mutex_);
  EXPECT_TRUE(service_->stops.empty());
}

TEST_F(RpcTest, UnreachableAgentFailsFastNamingTheAddress) {
  // A port that was just free: nothing listens there.
  client::RemoteAgentOptions o = options();
  o.address = test::loopbackAddress(test::closedLoopbackPort());
  client::RemoteNodeAgent agent(o, signer_.get());
  const auto start = std::chrono::steady_clock::now();
  const coordinator::DescribeResult r = agent.describe();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 4s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error.describeUnreachable().find("agent on node-b (" + o.address + ")"),
            std::string::npos);
  EXPECT_FALSE(r.error.reason.empty());
}

TEST_F(RpcTest, SlowAgentTimesOut) {
  service_->describeDelay = 1500ms;
  client::RemoteNodeAgent agent(options(300ms), signer_.get());
  const coordinator::DescribeResult r = agent.describe();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error.reason, "no answer within 300 ms");
}

coordinator::LaunchRequest twoRanks() {
  coordinator::LaunchRequest request;
  request.jobId = "job-7";
  request.ranks.push_back({2, {{"prog"}, {"HVD_RANK=2"}, ""}});
  request.ranks.push_back({3, {{"prog"}, {"HVD_RANK=3"}, ""}});
  return request;
}

TEST_F(RpcTest, LaunchStreamsOutputAndExits) {
  client::RemoteNodeAgent agent(options(), signer_.get());
  RecordingEvents events;
  ASSERT_TRUE(agent.launch(twoRanks(), &events).ok());
  ASSERT_TRUE(events.waitFor(2, 0, 5s));
  agent.shutdown();
  EXPECT_EQ(events.lines, (std::vector<std::string>{"2!hello from 2", "3!hello from 3"}));
  EXPECT_EQ(events.exits, (std::vector<std::pair<int, int>>{{2, 3}, {3, 4}}));
  EXPECT_TRUE(events.lost.empty());
  std::lock_guard<std::mutex> lock(service_->mutex_);
  EXPECT_EQ(service_->lastLaunch.job_id(), "job-7");
  EXPECT_EQ(service_->lastLaunch.ranks(1).env(0), "HVD_RANK=3");
}

TEST_F(RpcTest, LaunchErrorIsReturned) {
  service_->launchError = "rank 2: cannot execute 'prog': No such file or directory";
  client::RemoteNodeAgent agent(options(), signer_.get());
  RecordingEvents events;
  const coordinator::LaunchStatus status = agent.launch(twoRanks(), &events);
  EXPECT_EQ(status.error, service_->launchError);
  agent.shutdown();
  EXPECT_TRUE(events.exits.empty());
  EXPECT_TRUE(events.lost.empty());
}

TEST_F(RpcTest, StreamEndingWithRanksRunningIsALostAgent) {
  service_->holdLastRank = true;
  client::RemoteNodeAgent agent(options(), signer_.get());
  RecordingEvents events;
  ASSERT_TRUE(agent.launch(twoRanks(), &events).ok());
  ASSERT_TRUE(events.waitFor(1, 0, 5s));
  service_->dropStream = true;
  ASSERT_TRUE(events.waitFor(1, 1, 5s));
  agent.shutdown();
  ASSERT_EQ(events.lost.size(), 1u);
  EXPECT_EQ(events.lost[0], "node-b: agent going away");
  EXPECT_EQ(events.exits.size(), 1u);
}

TEST_F(RpcTest, ShutdownCancelsTheStreamWithoutReportingALoss) {
  service_->holdLastRank = true;
  client::RemoteNodeAgent agent(options(), signer_.get());
  RecordingEvents events;
  ASSERT_TRUE(agent.launch(twoRanks(), &events).ok());
  ASSERT_TRUE(events.waitFor(1, 0, 5s));
  agent.shutdown();
  for (int i = 0; i < 200 && !service_->clientCancelled; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(service_->clientCancelled);
  EXPECT_TRUE(events.lost.empty());
}

TEST_F(RpcTest, StopIsSentInTheBackground) {
  client::RemoteNodeAgent agent(options(), signer_.get());
  agent.stop("job-7", SIGTERM, 2500ms);
  agent.shutdown();  // joins the stop thread
  std::lock_guard<std::mutex> lock(service_->mutex_);
  ASSERT_EQ(service_->stops.size(), 1u);
  EXPECT_EQ(service_->stops[0].job_id(), "job-7");
  EXPECT_EQ(service_->stops[0].signal(), SIGTERM);
  EXPECT_EQ(service_->stops[0].grace_ms(), 2500);
}

// Mutual TLS: certificates from a throw-away CA made with the openssl CLI.
class RpcTlsTest : public FakeAgentFixture {
 protected:
  void SetUp() override {
    const std::string d = dir_.path().string();
    const std::string script =
        std::string(HVD_MAKE_TEST_CERTS) + " '" + d + "' hvd-agent hvd-client";
    ASSERT_EQ(std::system(script.c_str()), 0) << "openssl failed";
    startAgent(rpc::makeServerCredentials(tls("hvd-agent")));
    ASSERT_NE(server_, nullptr);
  }
  rpc::TlsOptions tls(const std::string& who, const std::string& ca = "ca") const {
    return {dir_.file(who + ".pem"), dir_.file(who + ".key"), dir_.file(ca + ".pem")};
  }
  coordinator::DescribeResult describeAs(const rpc::TlsOptions& tls) {
    client::RemoteAgentOptions o;
    o.host = "node-b";
    o.address = test::loopbackAddress(port_);
    o.tls = tls;
    o.tlsTargetName = "hvd-agent";
    o.callTimeout = 3000ms;
    client::RemoteNodeAgent agent(o, signer_.get());
    return agent.describe();
  }
};

TEST_F(RpcTlsTest, ClientWithCertificateFromTheCaIsServed) {
  const coordinator::DescribeResult r = describeAs(tls("hvd-client"));
  ASSERT_TRUE(r.ok()) << r.error.reason;
  EXPECT_EQ(r.description->hostname, "fake-node");
}

TEST_F(RpcTlsTest, ClientWithoutATrustedCertificateIsRefused) {
  // A self-signed client certificate the agent's CA never signed.
  const rpc::TlsOptions rogue{dir_.file("rogue.pem"), dir_.file("rogue.key"), dir_.file("ca.pem")};
  EXPECT_FALSE(describeAs(rogue).ok());
  // Plaintext against a TLS agent.
  EXPECT_FALSE(describeAs({}).ok());
}

TEST(RpcTlsOptions, HalfConfiguredTlsNamesTheMissingOption) {
  rpc::TlsOptions tls;
  tls.certFile = "/nonexistent/cert.pem";
  tls.keyFile = "/nonexistent/key.pem";
  tls.caFile = "/nonexistent/ca.pem";
  try {
    rpc::makeServerCredentials(tls);
    FAIL() << "expected an error";
  } catch (const hvd::InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("--tls-ca: cannot read '/nonexistent/ca.pem'"),
              std::string::npos)
        << e.what();
  }
  tls.caFile.clear();  // half configured: names the missing one
  try {
    rpc::makeChannel("127.0.0.1:1", tls);
    FAIL() << "expected an error";
  } catch (const hvd::InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("--tls-ca"), std::string::npos) << e.what();
  }
}

// --- refused calls, logged rate-limited (agent/rpc/denial_log.h) ------------------------------

// What the refusal log writes (the programs' "auth" subsystem).
class CapturedLog : public test::CapturedLog {
 public:
  CapturedLog() : test::CapturedLog(logging::program("auth")) {}
};

constexpr char kDescribe[] = "/hvd.v1.Agent/Describe";
const std::string kFirstLine =
    "denied /hvd.v1.Agent/Describe from ipv4:10.0.0.1:4242: bad signature (further "
    "refusals in the next 60 s are counted and summarised)";

TEST(DenialLog, FirstRefusalOfAnIntervalIsLoggedAtOnceTheRestAsOneSummary) {
  CapturedLog log;
  auth::FakeClock clock(std::chrono::system_clock::time_point(1000s));
  {
    rpc::DenialLog denials(&clock, 60s);
    denials.record(kDescribe, "ipv4:10.0.0.1:4242", "bad signature");
    EXPECT_EQ(log.lines(), std::vector<std::string>{kFirstLine});
    // Within the interval: counted, per reason and caller (a new port is the same caller).
    for (int port = 4243; port < 4246; ++port) {
      clock.advance(10s);
      denials.record(kDescribe, "ipv4:10.0.0.1:" + std::to_string(port), "bad signature");
    }
    EXPECT_EQ(log.lines().size(), 1u);
    // A reason new in the interval is logged at once: a replay must not hide behind a bad key.
    denials.record("/hvd.v1.Agent/Stop", "ipv6:[::1]:5000", "replayed nonce");
    ASSERT_EQ(log.lines().size(), 2u);
    EXPECT_EQ(log.lines()[1],
              "denied /hvd.v1.Agent/Stop from ipv6:[::1]:5000: replayed nonce "
              "(further refusals in the next 60 s are counted and summarised)");
    denials.record("/hvd.v1.Agent/Stop", "ipv6:[::1]:5001", "replayed nonce");
    EXPECT_EQ(log.lines().size(), 2u);
    EXPECT_EQ(denials.pending(), 4u);
    EXPECT_EQ(denials.total(), 6u);
    EXPECT_EQ(denials.logged(), 2u);

    // The next refusal after the interval: first the summary, then itself at once.
    clock.advance(31s);
    denials.record(kDescribe, "ipv4:10.0.0.9:1", "missing signature");
    const std::vector<std::string> lines = log.lines();
    ASSERT_EQ(lines.size(), 4u);
    EXPECT_EQ(lines[2],
              "denied 4 more call(s) from 2 caller(s) in the 60 s after the last one "
              "logged: bad signature x3, replayed nonce x1");
    EXPECT_EQ(lines[3],
              "denied /hvd.v1.Agent/Describe from ipv4:10.0.0.9:1: missing signature "
              "(further refusals in the next 60 s are counted and summarised)");
    EXPECT_EQ(denials.summaries(), 1u);
    EXPECT_EQ(denials.logged(), 3u);
    EXPECT_EQ(denials.pending(), 0u);

    // A lone refusal in an interval leaves nothing to summarise.
    clock.advance(61s);
    denials.record(kDescribe, "ipv4:10.0.0.9:2", "missing signature");
    EXPECT_EQ(log.lines().size(), 5u);
    EXPECT_EQ(denials.summaries(), 1u);
    clock.advance(1s);
    denials.record(kDescribe, "ipv4:10.0.0.9:3", "missing signature");
    EXPECT_EQ(log.lines().size(), 5u);
  }
  // What the last interval still held is summarised when the log goes.
  const std::vector<std::string> lines = log.lines();
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(lines[5],
            "denied 1 more call(s) from 1 caller(s) in the 60 s after the last one "
            "logged: missing signature x1");
}

TEST(DenialLog, ASummaryDueIsLoggedByTheNextCheckedCallWithoutANewRefusal) {
  CapturedLog log;
  auth::FakeClock clock(std::chrono::system_clock::time_point(1000s));
  rpc::DenialLog denials(&clock, 60s);
  denials.flushIfDue();  // nothing held: nothing logged
  denials.record(kDescribe, "ipv4:10.0.0.1:4242", "bad signature");
  denials.record(kDescribe, "ipv4:10.0.0.1:4243", "bad signature");
  clock.advance(59s);
  denials.flushIfDue();
  EXPECT_EQ(log.lines().size(), 1u) << "the interval is not over";
  clock.advance(1s);
  denials.flushIfDue();
  const std::vector<std::string> lines = log.lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1],
            "denied 1 more call(s) from 1 caller(s) in the 60 s after the last one "
            "logged: bad signature x1");
  // The interval is over: the next refusal is logged at once.
  clock.advance(1s);
  denials.record(kDescribe, "ipv4:10.0.0.1:4244", "bad signature");
  EXPECT_EQ(log.lines().size(), 3u);
}

TEST(DenialLog, AClockSetBackStartsANewInterval) {
  CapturedLog log;
  auth::FakeClock clock(std::chrono::system_clock::time_point(1000s));
  rpc::DenialLog denials(&clock, 60s);
  denials.record(kDescribe, "ipv4:10.0.0.1:1", "bad signature");
  denials.record(kDescribe, "ipv4:10.0.0.1:2", "bad signature");
  clock.set(std::chrono::system_clock::time_point(500s));
  denials.record(kDescribe, "ipv4:10.0.0.1:3", "bad signature");
  EXPECT_EQ(denials.logged(), 2u);
  EXPECT_EQ(denials.summaries(), 1u);
  EXPECT_EQ(log.lines().size(), 3u);
}

TEST_F(RpcTest, RefusedCallsAreLoggedOnceAnIntervalWithoutTheirMetadata) {
  CapturedLog log;
  auto stub = v1::Agent::NewStub(rpc::makeChannel(address(), {}));
  const std::string fakeSignature(64, 'e');
  const std::string nonce = "0123456789abcdef0123456789abcdef";
  for (int attempt = 0; attempt < 3; ++attempt) {
    v1::DescribeRequest request;
    v1::DescribeResponse response;
    grpc::ClientContext context;
    context.AddMetadata("hvd-ts",
                        std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                           std::chrono::system_clock::now().time_since_epoch())
                                           .count()));
    context.AddMetadata("hvd-nonce", nonce);
    context.AddMetadata("hvd-sig", fakeSignature);
    EXPECT_EQ(stub->Describe(&context, request, &response).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  EXPECT_EQ(guard_->denials(), 3u);
  EXPECT_EQ(guard_->loggedDenials(), 1u);
  std::string text;
  for (const std::string& line : log.lines()) text += line + "\n";
  EXPECT_NE(text.find("denied /hvd.v1.Agent/Describe from ipv4:127.0.0.1:"), std::string::npos)
      << text;
  EXPECT_EQ(text.find(fakeSignature), std::string::npos) << text;
  EXPECT_EQ(text.find(nonce), std::string::npos) << text;
}

}  // namespace
}  // namespace hvd::agent
