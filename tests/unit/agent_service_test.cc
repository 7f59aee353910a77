// hvdagent's gRPC service (agent/service/agent_service.h) in-process on 127.0.0.1:0, with the
// real PosixSpawner running /bin/sh scripts: every RPC refuses unauthenticated calls, Describe,
// Launch (output, exit codes, a caller that goes away), SubmitJob and CancelJob on one host. Also
// the pieces under it: the environment merge, job records and their clean-up after a crash, and
// the command-line helpers.
#include "agent/service/agent_service.h"

#include <google/protobuf/descriptor.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "agent/auth/cluster_key.h"
#include "agent/auth/request_signer.h"
#include "agent/client/remote_node_agent.h"
#include "agent/common/net.h"
#include "agent/daemon/agent_cli.h"
#include "agent/jobs/environment.h"
#include "agent/jobs/event_queue.h"
#include "agent/jobs/local_host.h"
#include "agent/node/gpu_discovery.h"
#include "agent/node/node_facts.h"
#include "agent/process/posix_spawner.h"
#include "agent/records/job_records.h"
#include "agent/rpc/call_auth.h"
#include "common/grpc_test_server.h"
#include "common/test_support.h"
#include "hvd/error.hpp"
#include "hvd_support/tcp_store_server.h"

extern char** environ;

namespace hvd::agent::service {
namespace {

// The service's tests drive the jobs, persistence and daemon pieces it stands on.
using namespace hvd::agent::jobs;     // NOLINT(google-build-using-namespace)
using namespace hvd::agent::records;  // NOLINT(google-build-using-namespace)
using namespace hvd::agent::daemon;   // NOLINT(google-build-using-namespace)
using common::isLoopbackName;
using common::parseListenAddress;
using common::pickFreePort;

using namespace std::chrono_literals;
namespace fs = std::filesystem;

using test::TempDir;

bool processGone(pid_t pid) { return ::kill(pid, 0) != 0 && errno == ESRCH; }

bool waitUntil(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return condition();
}

v1::RankSpec* addRank(v1::LaunchRequest* request, int rank, const std::string& script) {
  v1::RankSpec* spec = request->add_ranks();
  spec->set_rank(rank);
  spec->add_argv("/bin/sh");
  spec->add_argv("-c");
  spec->add_argv(script);
  spec->add_env("HVD_TEST_RANK=" + std::to_string(rank));
  return spec;
}

// A complete agent in-process: what hvdagent's main() wires, on an ephemeral loopback port.
class AgentServiceTest : public ::testing::Test {
 protected:
  // Lets a derived fixture adjust the service's options before it starts.
  virtual void configure(AgentServiceOptions*) {}
  // The GPUs the agent's ledger accounts for (its GpuDiscovery describes none either way).
  virtual std::vector<node::GpuInfo> ledgerGpus() { return {}; }

  void SetUp() override {
    key_.emplace(auth::ClusterKey::generate((dir_.path() / "key").string()));
    wrongKey_.emplace(auth::ClusterKey::generate((dir_.path() / "wrong").string()));
    verifier_ = std::make_unique<auth::RequestVerifier>(*key_, clock_);
    guard_ = std::make_unique<rpc::CallGuard>(verifier_.get());
    signer_ = std::make_unique<rpc::CallSigner>(*key_, clock_);
    wrongSigner_ = std::make_unique<rpc::CallSigner>(*wrongKey_, clock_);
    records_ = std::make_unique<JobRecords>((dir_.path() / "state").string());
    ledger_ = std::make_unique<ledger::ResourceLedger>(
        "localhost", ledgerGpus(), 0, [] { return std::chrono::steady_clock::now(); });
    LocalHostOptions local;
    local.host = "localhost";
    local.spawner = &spawner_;
    local.gpus = &gpus_;
    local.ledger = ledger_.get();
    local.records = records_.get();
    local.baseEnv = baseEnvironment(environ);
    host_ = std::make_unique<LocalHost>(std::move(local));
    store_.start();
    AgentServiceOptions options;
    options.listenHost = "127.0.0.1";
    options.ledger = ledger_.get();
    configure(&options);
    history_ = std::make_unique<JobHistory>((dir_.path() / "state").string());
    service_ = std::make_unique<AgentService>(options, guard_.get(), host_.get(), &gpus_, &store_,
                                              history_.get());
    server_ = test::startLoopbackServer(service_.get(), &port_);
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
    stub_ = v1::Agent::NewStub(
        grpc::CreateChannel(test::loopbackAddress(port_), grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    service_->shutdown();
    server_->Shutdown(std::chrono::system_clock::now() + 5s);
    service_->join();
    host_->shutdown();
    store_.stop();
  }

  std::unique_ptr<grpc::ClientContext> signedContext(std::string_view method,
                                                     const google::protobuf::Message& request,
                                                     rpc::CallSigner* signer = nullptr) {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(std::chrono::system_clock::now() + 30s);
    (signer != nullptr ? signer : signer_.get())->sign(context.get(), method, request);
    return context;
  }

  TempDir dir_;
  auth::SystemClock clock_;
  std::optional<auth::ClusterKey> key_;
  std::optional<auth::ClusterKey> wrongKey_;
  std::unique_ptr<auth::RequestVerifier> verifier_;
  std::unique_ptr<rpc::CallGuard> guard_;
  std::unique_ptr<rpc::CallSigner> signer_;
  std::unique_ptr<rpc::CallSigner> wrongSigner_;
  process::PosixSpawner spawner_;
  node::FakeGpuDiscovery gpus_{{}};
  std::unique_ptr<JobRecords> records_;
  std::unique_ptr<ledger::ResourceLedger> ledger_;
  std::unique_ptr<LocalHost> host_;
  store::TcpStoreServer store_;
  std::unique_ptr<JobHistory> history_;
  std::unique_ptr<AgentService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::unique_ptr<v1::Agent::Stub> stub_;
};

// Calls one RPC (draining a stream) with the given signer, or unsigned when null.
using Caller = std::function<grpc::Status(v1::Agent::Stub*, rpc::CallSigner*)>;

template <typename Request>
void prepare(grpc::ClientContext* context, rpc::CallSigner* signer, std::string_view method,
             const Request& request) {
  context->set_deadline(std::chrono::system_clock::now() + 10s);
  if (signer != nullptr) signer->sign(context, method, request);
}

std::map<std::string, Caller> callers() {
  std::map<std::string, Caller> c;
  c["Describe"] = [](v1::Agent::Stub* stub, rpc::CallSigner* signer) {
    grpc::ClientContext context;
    v1::DescribeRequest request;
    v1::DescribeResponse response;
    prepare(&context, signer, "/hvd.v1.Agent/Describe", request);
    return stub->Describe(&context, request, &response);
  };
  c["Launch"] = [](v1::Agent::Stub* stub, rpc::CallSigner* signer) {
    grpc::ClientContext context;
    v1::LaunchRequest request;
    request.set_job_id("never");
    addRank(&request, 0, "echo must-not-run");
    prepare(&context, signer, "/hvd.v1.Agent/Launch", request);
    auto reader = stub->Launch(&context, request);
    v1::RankEvent event;
    while (reader->Read(&event)) ADD_FAILURE() << "an unauthenticated Launch got an event";
    return reader->Finish();
  };
  c["Stop"] = [](v1::Agent::Stub* stub, rpc::CallSigner* signer) {
    grpc::ClientContext context;
    v1::StopRequest request;
    request.set_job_id("never");
    v1::StopResponse response;
    prepare(&context, signer, "/hvd.v1.Agent/Stop", request);
    return stub->Stop(&context, request, &response);
  };
  c["SubmitJob"] = [](v1::Agent::Stub* stub, rpc::CallSigner* signer) {
    grpc::ClientContext context;
    v1::SubmitJobRequest request;
    request.add_argv("/bin/true");
    request.set_np(1);
    request.add_hosts()->set_host("localhost");
    request.set_stop_signal(SIGTERM);
    prepare(&context, signer, "/hvd.v1.Agent/SubmitJob", request);
    auto reader = stub->SubmitJob(&context, request);
    v1::JobEvent event;
    while (reader->Read(&event)) ADD_FAILURE() << "an unauthenticated SubmitJob got an event";
    return reader->Finish();
  };
  c["CancelJob"] = [](v1::Agent::Stub* stub, rpc::CallSigner* signer) {
    grpc::ClientContext context;
    v1::CancelJobRequest request;
    request.set_job_id("never");
    v1::CancelJobResponse response;
    prepare(&context, signer, "/hvd.v1.Agent/CancelJob", request);
    return stub->CancelJob(&context, request, &response);
  };
  c["ListJobs"] = [](v1::Agent::Stub* stub, rpc::CallSigner* signer) {
    grpc::ClientContext context;
    v1::ListJobsRequest request;
    v1::ListJobsResponse response;
    prepare(&context, signer, "/hvd.v1.Agent/ListJobs", request);
    return stub->ListJobs(&context, request, &response);
  };
  c["GetJob"] = [](v1::Agent::Stub* stub, rpc::CallSigner* signer) {
    grpc::ClientContext context;
    v1::GetJobRequest request;
    request.set_job_id("never");
    v1::JobInfo response;
    prepare(&context, signer, "/hvd.v1.Agent/GetJob", request);
    return stub->GetJob(&context, request, &response);
  };
  c["Reserve"] = [](v1::Agent::Stub* stub, rpc::CallSigner* signer) {
    grpc::ClientContext context;
    v1::ReserveRequest request;
    request.set_job_id("never");
    request.set_ranks(1);
    v1::ReserveResponse response;
    prepare(&context, signer, "/hvd.v1.Agent/Reserve", request);
    return stub->Reserve(&context, request, &response);
  };
  c["Unreserve"] = [](v1::Agent::Stub* stub, rpc::CallSigner* signer) {
    grpc::ClientContext context;
    v1::UnreserveRequest request;
    request.set_job_id("never");
    v1::UnreserveResponse response;
    prepare(&context, signer, "/hvd.v1.Agent/Unreserve", request);
    return stub->Unreserve(&context, request, &response);
  };
  c["JobLogs"] = [](v1::Agent::Stub* stub, rpc::CallSigner* signer) {
    grpc::ClientContext context;
    v1::JobLogsRequest request;
    request.set_job_id("never");
    prepare(&context, signer, "/hvd.v1.Agent/JobLogs", request);
    auto reader = stub->JobLogs(&context, request);
    v1::JobLogsEvent event;
    while (reader->Read(&event)) ADD_FAILURE() << "an unauthenticated JobLogs got an event";
    return reader->Finish();
  };
  return c;
}

TEST_F(AgentServiceTest, EveryRpcRefusesUnsignedCallsAndCallsSignedWithAnotherKey) {
  const google::protobuf::ServiceDescriptor* service =
      v1::DescribeRequest::descriptor()->file()->FindServiceByName("Agent");
  ASSERT_NE(service, nullptr);
  const std::map<std::string, Caller> all = callers();
  ASSERT_EQ(static_cast<size_t>(service->method_count()), all.size())
      << "a new RPC needs its entry here (and its CallGuard check in the service)";
  for (int i = 0; i < service->method_count(); ++i) {
    const std::string name = service->method(i)->name();
    SCOPED_TRACE(name);
    auto it = all.find(name);
    ASSERT_NE(it, all.end());
    for (rpc::CallSigner* signer : {static_cast<rpc::CallSigner*>(nullptr), wrongSigner_.get()}) {
      const grpc::Status status = it->second(stub_.get(), signer);
      EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
      EXPECT_NE(status.error_message().find("authentication failed"), std::string::npos)
          << status.error_message();
    }
  }
  EXPECT_EQ(guard_->denials(), 2u * all.size());
  EXPECT_TRUE(host_->processGroupId("never") == std::nullopt);
  EXPECT_TRUE(records_->list().empty());
}

TEST_F(AgentServiceTest, ReplayedRequestIsRefused) {
  v1::DescribeRequest request;
  auth::RequestSigner signer(*key_, clock_);
  const auth::SignedHeaders headers =
      signer.sign("/hvd.v1.Agent/Describe", rpc::requestDigest(request));
  for (int attempt = 0; attempt < 2; ++attempt) {
    grpc::ClientContext context;
    context.AddMetadata(std::string(auth::kTimestampMetadata), headers.timestamp);
    context.AddMetadata(std::string(auth::kNonceMetadata), headers.nonce);
    context.AddMetadata(std::string(auth::kSignatureMetadata), headers.signature);
    v1::DescribeResponse response;
    const grpc::Status status = stub_->Describe(&context, request, &response);
    if (attempt == 0) {
      EXPECT_TRUE(status.ok()) << status.error_message();
    } else {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
      EXPECT_NE(status.error_message().find("replayed nonce"), std::string::npos)
          << status.error_message();
    }
  }
}

TEST_F(AgentServiceTest, DescribeSaysWhatTheNodeHas) {
  v1::DescribeRequest request;
  auto context = signedContext("/hvd.v1.Agent/Describe", request);
  v1::DescribeResponse response;
  const grpc::Status status = stub_->Describe(context.get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  char name[256] = {};
  ASSERT_EQ(::gethostname(name, sizeof(name) - 1), 0);
  EXPECT_EQ(response.hostname(), name);
  EXPECT_GT(response.cpus(), 0);
  EXPECT_EQ(response.version(), node::agentVersion());
  EXPECT_EQ(response.gpus_size(), 0);
  ASSERT_GE(response.features_size(), 2);
  EXPECT_EQ(response.features(0), "tcp");
  EXPECT_EQ(response.features(1), "shm");
  for (const std::string& a : response.addresses()) EXPECT_FALSE(isLoopbackName(a)) << a;
}

TEST_F(AgentServiceTest, LaunchStreamsOutputAndExitCodes) {
  v1::LaunchRequest request;
  request.set_job_id("launch-1");
  request.set_stop_signal(SIGTERM);
  request.set_grace_ms(2000);
  addRank(&request, 4, "echo hello from $HVD_TEST_RANK; echo oops >&2; exit 3");
  addRank(&request, 5, "echo bye");
  auto context = signedContext("/hvd.v1.Agent/Launch", request);
  auto reader = stub_->Launch(context.get(), request);
  v1::RankEvent event;
  ASSERT_TRUE(reader->Read(&event));
  ASSERT_TRUE(event.has_launched());
  EXPECT_EQ(event.launched().error(), "");
  std::vector<std::string> lines;
  std::map<int, std::pair<int, int>> exits;
  while (reader->Read(&event)) {
    if (event.has_output()) {
      lines.push_back(std::to_string(event.output().rank()) +
                      (event.output().stream() == v1::STDERR ? "!" : ":") + event.output().line());
    } else if (event.has_exit()) {
      exits[event.exit().rank()] = {event.exit().exit_code(), event.exit().signal()};
    }
  }
  const grpc::Status status = reader->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_NE(std::find(lines.begin(), lines.end(), "4:hello from 4"), lines.end());
  EXPECT_NE(std::find(lines.begin(), lines.end(), "4!oops"), lines.end());
  EXPECT_NE(std::find(lines.begin(), lines.end(), "5:bye"), lines.end());
  ASSERT_EQ(exits.size(), 2u);
  EXPECT_EQ(exits[4], std::make_pair(3, 0));
  EXPECT_EQ(exits[5], std::make_pair(0, 0));
  // The job is over: released, its record removed.
  EXPECT_EQ(host_->processGroupId("launch-1"), std::nullopt);
  EXPECT_TRUE(records_->list().empty());
}

// An agent of a node with four GPUs: its ledger over the Reserve, Launch and Unreserve RPCs.
class LedgerServiceTest : public AgentServiceTest {
 protected:
  std::vector<node::GpuInfo> ledgerGpus() override {
    std::vector<node::GpuInfo> gpus;
    for (int i = 0; i < 4; ++i) gpus.push_back({i, "GPU-" + std::to_string(i), "fake", "", 0});
    return gpus;
  }

  v1::ReserveResponse reserve(const std::string& job, int ranks, grpc::Status* status) {
    v1::ReserveRequest request;
    request.set_job_id(job);
    request.set_job(job);
    request.set_ranks(ranks);
    request.set_lease_ms(30000);
    v1::ReserveResponse response;
    auto context = signedContext("/hvd.v1.Agent/Reserve", request);
    *status = stub_->Reserve(context.get(), request, &response);
    return response;
  }
};

TEST_F(LedgerServiceTest, ReserveGrantsDisjointGpusAndSaysWhoHoldsABusyNode) {
  grpc::Status status;
  const v1::ReserveResponse a = reserve("hvd-a", 2, &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(a.verdict(), v1::RESERVE_GRANTED);
  EXPECT_EQ(std::vector<int>(a.gpus().begin(), a.gpus().end()), (std::vector<int>{0, 1}));
  const v1::ReserveResponse b = reserve("hvd-b", 4, &status);
  EXPECT_EQ(b.verdict(), v1::RESERVE_BUSY);
  EXPECT_EQ(b.reason(), "waiting for 4 GPUs on localhost (2 free); held by hvd-a");
  const v1::ReserveResponse never = reserve("hvd-c", 5, &status);
  EXPECT_EQ(never.verdict(), v1::RESERVE_NEVER_FITS);

  v1::UnreserveRequest give;
  give.set_job_id("hvd-a");
  v1::UnreserveResponse none;
  auto context = signedContext("/hvd.v1.Agent/Unreserve", give);
  ASSERT_TRUE(stub_->Unreserve(context.get(), give, &none).ok());
  EXPECT_EQ(reserve("hvd-b", 4, &status).verdict(), v1::RESERVE_GRANTED);
}

// hvdrun doctor's facts, through the client as hvdrun reads them: which jobs hold which GPUs,
// and the agent's wall clock as it answered.
TEST_F(LedgerServiceTest, DescribeSaysWhichJobsHoldTheGpusAndTheAgentsClock) {
  grpc::Status status;
  ASSERT_EQ(reserve("hvd-a", 2, &status).verdict(), v1::RESERVE_GRANTED);
  ASSERT_EQ(reserve("hvd-b", 1, &status).verdict(), v1::RESERVE_GRANTED);
  client::RemoteAgentOptions remote;
  remote.host = "localhost";
  remote.address = test::loopbackAddress(port_);
  client::RemoteNodeAgent agent(remote, signer_.get());
  const auto unixUs = [] {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  const int64_t before = unixUs();
  const coordinator::DescribeResult result = agent.describe();
  const int64_t after = unixUs();
  ASSERT_TRUE(result.ok()) << result.error.reason;
  EXPECT_GE(result.agentUnixTimeUs, before);
  EXPECT_LE(result.agentUnixTimeUs, after);
  ASSERT_EQ(result.gpuHolders.size(), 3u);
  EXPECT_EQ(result.gpuHolders[0].gpu, 0);
  EXPECT_EQ(result.gpuHolders[0].job, "hvd-a");
  EXPECT_EQ(result.gpuHolders[1].gpu, 1);
  EXPECT_EQ(result.gpuHolders[1].job, "hvd-a");
  EXPECT_EQ(result.gpuHolders[2].gpu, 2);
  EXPECT_EQ(result.gpuHolders[2].job, "hvd-b");
  agent.shutdown();
}

TEST_F(LedgerServiceTest, AReservedLaunchBindsItsReservationAndTheEndReleasesIt) {
  grpc::Status status;
  ASSERT_EQ(reserve("hvd-a", 1, &status).verdict(), v1::RESERVE_GRANTED);
  v1::LaunchRequest request;
  request.set_job_id("hvd-a");
  request.set_reserved(true);
  addRank(&request, 0, "exit 0");
  auto context = signedContext("/hvd.v1.Agent/Launch", request);
  auto reader = stub_->Launch(context.get(), request);
  v1::RankEvent event;
  ASSERT_TRUE(reader->Read(&event));
  EXPECT_EQ(event.launched().error(), "");
  while (reader->Read(&event)) {
  }
  EXPECT_TRUE(reader->Finish().ok());
  // Its rank was reaped: the GPU is free again.
  EXPECT_TRUE(ledger_->holdings().empty());
}

TEST_F(LedgerServiceTest, AReservedLaunchWithoutItsReservationDoesNotStart) {
  v1::LaunchRequest request;
  request.set_job_id("hvd-expired");
  request.set_reserved(true);
  addRank(&request, 0, "echo must not run");
  auto context = signedContext("/hvd.v1.Agent/Launch", request);
  auto reader = stub_->Launch(context.get(), request);
  v1::RankEvent event;
  ASSERT_TRUE(reader->Read(&event));
  EXPECT_EQ(event.launched().error(),
            "no reservation of job hvd-expired on localhost (its lease expired before the "
            "launch)");
  EXPECT_FALSE(reader->Read(&event));
  reader->Finish();
  EXPECT_EQ(host_->processGroupId("hvd-expired"), std::nullopt);
}

TEST_F(AgentServiceTest, LaunchOfAMissingProgramReportsTheError) {
  v1::LaunchRequest request;
  request.set_job_id("launch-missing");
  v1::RankSpec* spec = request.add_ranks();
  spec->add_argv("/nonexistent/program");
  auto context = signedContext("/hvd.v1.Agent/Launch", request);
  auto reader = stub_->Launch(context.get(), request);
  v1::RankEvent event;
  ASSERT_TRUE(reader->Read(&event));
  ASSERT_TRUE(event.has_launched());
  EXPECT_NE(event.launched().error().find("/nonexistent/program"), std::string::npos)
      << event.launched().error();
  EXPECT_FALSE(reader->Read(&event));
  EXPECT_TRUE(reader->Finish().ok());
}

TEST_F(AgentServiceTest, LaunchWithAMalformedEnvironmentIsInvalidArgument) {
  v1::LaunchRequest request;
  request.set_job_id("launch-bad-env");
  addRank(&request, 0, "true")->add_env("NO_EQUALS_SIGN");
  auto context = signedContext("/hvd.v1.Agent/Launch", request);
  auto reader = stub_->Launch(context.get(), request);
  v1::RankEvent event;
  EXPECT_FALSE(reader->Read(&event));
  const grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
}

TEST_F(AgentServiceTest, CallerGoingAwayStopsTheRanks) {
  v1::LaunchRequest request;
  request.set_job_id("launch-cancel");
  request.set_stop_signal(SIGTERM);
  request.set_grace_ms(1000);
  // The shell ignores SIGTERM; its child sleeps: the grace runs out and SIGKILL ends both.
  addRank(&request, 0, "trap '' TERM; sleep 60 & echo $! $$; wait");
  auto context = signedContext("/hvd.v1.Agent/Launch", request);
  auto reader = stub_->Launch(context.get(), request);
  v1::RankEvent event;
  ASSERT_TRUE(reader->Read(&event));
  ASSERT_EQ(event.launched().error(), "");
  ASSERT_TRUE(reader->Read(&event));
  ASSERT_TRUE(event.has_output());
  pid_t sleeper = 0, shell = 0;
  ASSERT_EQ(std::sscanf(event.output().line().c_str(), "%d %d", &sleeper, &shell), 2);
  ASSERT_FALSE(processGone(sleeper));
  // While it runs, the job has its record.
  const std::vector<JobRecord> running = records_->list();
  ASSERT_EQ(running.size(), 1u);
  EXPECT_EQ(running[0].jobId, "launch-cancel");
  EXPECT_EQ(running[0].pgid, shell);

  const auto start = std::chrono::steady_clock::now();
  context->TryCancel();
  EXPECT_TRUE(waitUntil([&] { return processGone(sleeper) && processGone(shell); }, 10s));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 8s);
  EXPECT_TRUE(waitUntil([&] { return records_->list().empty(); }, 5s));
  reader->Finish();
}

TEST_F(AgentServiceTest, StopOfAnUnknownJobIsAccepted) {
  v1::StopRequest request;
  request.set_job_id("nothing-here");
  request.set_signal(SIGTERM);
  auto context = signedContext("/hvd.v1.Agent/Stop", request);
  v1::StopResponse response;
  EXPECT_TRUE(stub_->Stop(context.get(), request, &response).ok());
}

v1::SubmitJobRequest submitRequest(const std::string& script, int np) {
  v1::SubmitJobRequest request;
  request.add_argv("/bin/sh");
  request.add_argv("-c");
  request.add_argv(script);
  request.set_np(np);
  v1::HostEntry* host = request.add_hosts();
  host->set_host("localhost");
  host->set_slots(np);
  request.set_stop_signal(SIGTERM);
  request.set_grace_ms(2000);
  request.set_job_name("t");
  return request;
}

struct JobStream {
  std::string jobId;
  std::vector<std::string> lines;
  std::optional<v1::JobEnd> end;
  grpc::Status status;
};

TEST_F(AgentServiceTest, SubmitJobRunsRanksOnThisHost) {
  const v1::SubmitJobRequest request = submitRequest(
      "echo rank=$HVD_RANK size=$HVD_SIZE store=${HVD_STORE_ADDR%:*} master=$MASTER_ADDR", 2);
  auto context = signedContext("/hvd.v1.Agent/SubmitJob", request);
  auto reader = stub_->SubmitJob(context.get(), request);
  JobStream job;
  v1::JobEvent event;
  ASSERT_TRUE(reader->Read(&event));
  ASSERT_TRUE(event.has_accepted());
  job.jobId = event.accepted().job_id();
  EXPECT_EQ(job.jobId.rfind("hvd-", 0), 0u) << job.jobId;  // short: hvd-<6 hex>
  EXPECT_EQ(job.jobId.size(), 10u) << job.jobId;
  while (reader->Read(&event)) {
    ASSERT_FALSE(job.end.has_value()) << "an event after JobEnd";
    ASSERT_FALSE(event.has_output()) << "output of a submitted job comes in batches";
    for (const v1::JobOutput& o : event.batch().lines()) job.lines.push_back(o.line());
    if (event.has_end()) job.end = event.end();
  }
  job.status = reader->Finish();
  EXPECT_TRUE(job.status.ok()) << job.status.error_message();
  ASSERT_TRUE(job.end.has_value());
  EXPECT_EQ(job.end->outcome(), v1::SUCCEEDED) << job.end->summary();
  EXPECT_EQ(job.end->exit_code(), 0);
  std::sort(job.lines.begin(), job.lines.end());
  // The host is "localhost" to the user, but the agent listens on 127.0.0.1 (one specific
  // address): the ranks reach its store and rank 0's MASTER_PORT there, with no name to resolve.
  EXPECT_EQ(job.lines,
            (std::vector<std::string>{"rank=0 size=2 store=127.0.0.1 master=127.0.0.1",
                                      "rank=1 size=2 store=127.0.0.1 master=127.0.0.1"}));
  EXPECT_TRUE(records_->list().empty());
}

TEST_F(AgentServiceTest, SubmitJobReportsTheFailingRank) {
  const v1::SubmitJobRequest request =
      submitRequest("if [ $HVD_RANK = 1 ]; then echo broken >&2; exit 7; fi; sleep 30", 2);
  auto context = signedContext("/hvd.v1.Agent/SubmitJob", request);
  auto reader = stub_->SubmitJob(context.get(), request);
  v1::JobEvent event;
  std::optional<v1::JobEnd> end;
  const auto start = std::chrono::steady_clock::now();
  while (reader->Read(&event)) {
    if (event.has_end()) end = event.end();
  }
  EXPECT_TRUE(reader->Finish().ok());
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->outcome(), v1::RANK_FAILED);
  EXPECT_EQ(end->exit_code(), 7);
  EXPECT_EQ(end->rank(), 1);
  ASSERT_EQ(end->stderr_tail_size(), 1);
  EXPECT_EQ(end->stderr_tail(0), "broken");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);  // rank 0 stopped, not waited for
}

TEST_F(AgentServiceTest, MultiHostJobLedFromALoopbackNameIsInvalid) {
  v1::SubmitJobRequest request = submitRequest("true", 2);
  request.mutable_hosts(0)->set_slots(1);
  v1::HostEntry* other = request.add_hosts();
  other->set_host("other-host");
  other->set_agent_address("192.0.2.1:7475");
  auto context = signedContext("/hvd.v1.Agent/SubmitJob", request);
  auto reader = stub_->SubmitJob(context.get(), request);
  v1::JobEvent event;
  EXPECT_FALSE(reader->Read(&event)) << "refused before it is accepted: no job id";
  const grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("loopback"), std::string::npos) << status.error_message();
  EXPECT_TRUE(history_->list().empty()) << "a refused job leaves no record";
}

TEST_F(AgentServiceTest, CancelJobStopsARunningJob) {
  const v1::SubmitJobRequest request = submitRequest("echo started; exec sleep 60", 1);
  auto context = signedContext("/hvd.v1.Agent/SubmitJob", request);
  auto reader = stub_->SubmitJob(context.get(), request);
  v1::JobEvent event;
  ASSERT_TRUE(reader->Read(&event));
  ASSERT_TRUE(event.has_accepted());
  const std::string jobId = event.accepted().job_id();
  ASSERT_TRUE(reader->Read(&event));  // the rank runs
  ASSERT_TRUE(event.has_batch());

  v1::CancelJobRequest cancel;
  cancel.set_job_id(jobId);
  auto cancelContext = signedContext("/hvd.v1.Agent/CancelJob", cancel);
  v1::CancelJobResponse response;
  const grpc::Status cancelled = stub_->CancelJob(cancelContext.get(), cancel, &response);
  EXPECT_TRUE(cancelled.ok()) << cancelled.error_message();

  std::optional<v1::JobEnd> end;
  while (reader->Read(&event)) {
    if (event.has_end()) end = event.end();
  }
  EXPECT_TRUE(reader->Finish().ok());
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->outcome(), v1::CANCELLED);
  EXPECT_EQ(end->exit_code(), 130);

  cancel.set_job_id(jobId);  // over now: said so, nothing changed
  auto again = signedContext("/hvd.v1.Agent/CancelJob", cancel);
  ASSERT_TRUE(stub_->CancelJob(again.get(), cancel, &response).ok());
  EXPECT_FALSE(response.was_running());
  EXPECT_EQ(response.state(), v1::JOB_CANCELLED);
  cancel.set_job_id("hvd-000000");
  auto unknown = signedContext("/hvd.v1.Agent/CancelJob", cancel);
  EXPECT_EQ(stub_->CancelJob(unknown.get(), cancel, &response).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

// A second agent (another "host", on the same machine), reached over gRPC through the real
// RemoteNodeAgent, as hvdagent's main() wires it.
class TwoAgentsTest : public AgentServiceTest {
 protected:
  struct Other {
    explicit Other(const auth::ClusterKey& key, const fs::path& dir)
        : verifier(key, clock),
          guard(&verifier),
          signer(key, clock),
          records((dir / "other-state").string()),
          ledger("other", {}, 0, [] { return std::chrono::steady_clock::now(); }),
          host(localOptions(&spawner, &gpus, &ledger, &records)),
          history((dir / "other-state").string()),
          service(options(&ledger, &signer), &guard, &host, &gpus, &store, &history) {}
    static LocalHostOptions localOptions(process::Spawner* spawner, node::GpuDiscovery* gpus,
                                         ledger::ResourceLedger* ledger, JobRecords* records) {
      LocalHostOptions o;
      o.host = "other";
      o.spawner = spawner;
      o.gpus = gpus;
      o.ledger = ledger;
      o.records = records;
      o.baseEnv = baseEnvironment(environ);
      return o;
    }
    // It relays (proto Relay) with its own signer, as hvdagent's main() wires it.
    static AgentServiceOptions options(ledger::ResourceLedger* ledger, rpc::CallSigner* signer) {
      AgentServiceOptions o;
      o.ledger = ledger;
      o.remoteAgents = [signer](const RemoteHost& host) {
        client::RemoteAgentOptions remote;
        remote.host = host.host;
        remote.address = host.address;
        remote.callTimeout = host.callTimeout;
        return std::make_unique<client::RemoteNodeAgent>(remote, signer);
      };
      return o;
    }
    ~Other() {
      service.shutdown();
      if (server) server->Shutdown(std::chrono::system_clock::now() + 5s);
      service.join();
      host.shutdown();
      store.stop();
    }
    auth::SystemClock clock;
    auth::RequestVerifier verifier;
    rpc::CallGuard guard;
    rpc::CallSigner signer;
    process::PosixSpawner spawner;
    node::FakeGpuDiscovery gpus{{}};
    JobRecords records;
    ledger::ResourceLedger ledger;
    LocalHost host;
    store::TcpStoreServer store;
    JobHistory history;
    AgentService service;
    std::unique_ptr<grpc::Server> server;
    int port = 0;
  };

  void configure(AgentServiceOptions* options) override {
    other_ = std::make_unique<Other>(*key_, dir_.path());
    other_->store.start();
    other_->server = test::startLoopbackServer(&other_->service, &other_->port);
    options->remoteAgents = [this](const RemoteHost& host) {
      client::RemoteAgentOptions remote;
      remote.host = host.host;
      remote.address = host.address;
      remote.callTimeout = host.callTimeout;
      return std::make_unique<client::RemoteNodeAgent>(remote, signer_.get());
    };
  }

  void TearDown() override {
    AgentServiceTest::TearDown();
    other_.reset();
  }

  // np 2 over this agent (named by the machine's hostname: not a loopback name) and the other.
  v1::SubmitJobRequest twoHostRequest(const std::string& script) {
    v1::SubmitJobRequest request = submitRequest(script, 2);
    char name[256] = {};
    ::gethostname(name, sizeof(name) - 1);
    request.mutable_hosts(0)->set_host(name);
    request.mutable_hosts(0)->set_slots(1);
    v1::HostEntry* other = request.add_hosts();
    other->set_host("other");
    other->set_slots(1);
    other->set_agent_address(test::loopbackAddress(other_->port));
    request.set_connect_timeout_ms(5000);
    return request;
  }

  std::unique_ptr<Other> other_;
};

TEST_F(TwoAgentsTest, SubmitJobRunsRanksOnBothAgents) {
  ASSERT_GT(other_->port, 0);
  const v1::SubmitJobRequest request = twoHostRequest("echo rank=$HVD_RANK cross=$HVD_CROSS_RANK");
  auto context = signedContext("/hvd.v1.Agent/SubmitJob", request);
  auto reader = stub_->SubmitJob(context.get(), request);
  v1::JobEvent event;
  std::vector<std::string> lines;
  std::optional<v1::JobEnd> end;
  while (reader->Read(&event)) {
    for (const v1::JobOutput& o : event.batch().lines()) lines.push_back(o.host() + " " + o.line());
    if (event.has_end()) end = event.end();
  }
  EXPECT_TRUE(reader->Finish().ok());
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->outcome(), v1::SUCCEEDED) << end->summary();
  std::sort(lines.begin(), lines.end());
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "other rank=1 cross=1");
  EXPECT_NE(lines[1].find(" rank=0 cross=0"), std::string::npos) << lines[1];
  EXPECT_TRUE(records_->list().empty());
  EXPECT_TRUE(other_->records.list().empty());
}

TEST_F(TwoAgentsTest, ARankFailingOnTheOtherAgentStopsTheJobEverywhere) {
  ASSERT_GT(other_->port, 0);
  const v1::SubmitJobRequest request =
      twoHostRequest("if [ $HVD_RANK = 1 ]; then exit 5; fi; exec sleep 30");
  auto context = signedContext("/hvd.v1.Agent/SubmitJob", request);
  auto reader = stub_->SubmitJob(context.get(), request);
  v1::JobEvent event;
  std::optional<v1::JobEnd> end;
  const auto start = std::chrono::steady_clock::now();
  while (reader->Read(&event)) {
    if (event.has_end()) end = event.end();
  }
  EXPECT_TRUE(reader->Finish().ok());
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->outcome(), v1::RANK_FAILED) << end->summary();
  EXPECT_EQ(end->exit_code(), 5);
  EXPECT_EQ(end->host(), "other");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

TEST_F(TwoAgentsTest, LosingTheOtherAgentFailsTheJobAndStopsTheLocalRanks) {
  ASSERT_GT(other_->port, 0);
  const v1::SubmitJobRequest request = twoHostRequest("echo up $$; exec sleep 30");
  auto context = signedContext("/hvd.v1.Agent/SubmitJob", request);
  auto reader = stub_->SubmitJob(context.get(), request);
  v1::JobEvent event;
  std::map<std::string, pid_t> pids;  // by host
  while (pids.size() < 2 && reader->Read(&event)) {
    for (const v1::JobOutput& o : event.batch().lines()) {
      pids[o.host()] = std::atoi(o.line().substr(3).c_str());
    }
  }
  ASSERT_EQ(pids.size(), 2u);
  const auto start = std::chrono::steady_clock::now();
  other_->server->Shutdown(std::chrono::system_clock::now());  // the other agent goes away
  std::optional<v1::JobEnd> end;
  while (reader->Read(&event)) {
    if (event.has_end()) end = event.end();
  }
  EXPECT_TRUE(reader->Finish().ok());
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->outcome(), v1::AGENT_LOST) << end->summary();
  EXPECT_EQ(end->exit_code(), 75);
  EXPECT_EQ(end->host(), "other");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  for (const auto& [host, pid] : pids) {
    EXPECT_TRUE(waitUntil([pid = pid] { return processGone(pid); }, 5s)) << host;
  }
}

TEST_F(TwoAgentsTest, AnUnreachableAgentFailsTheJobNamingTheHost) {
  v1::SubmitJobRequest request = twoHostRequest("true");
  request.mutable_hosts(1)->set_agent_address("127.0.0.1:" +
                                              std::to_string(pickFreePort("127.0.0.1")));
  request.set_connect_timeout_ms(2000);
  auto context = signedContext("/hvd.v1.Agent/SubmitJob", request);
  auto reader = stub_->SubmitJob(context.get(), request);
  v1::JobEvent event;
  std::optional<v1::JobEnd> end;
  while (reader->Read(&event)) {
    if (event.has_end()) end = event.end();
  }
  EXPECT_TRUE(reader->Finish().ok());
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->outcome(), v1::AGENT_UNREACHABLE) << end->summary();
  EXPECT_EQ(end->exit_code(), 69);
  EXPECT_NE(end->summary().find("other"), std::string::npos) << end->summary();
}

void addRelayHost(v1::Relay* relay, const std::string& host, const std::string& address) {
  v1::HostEntry* entry = relay->add_hosts();
  entry->set_host(host);
  entry->set_agent_address(address);
}

// this agent -> other (the cluster key) -> third (a key of its own) -> ghost (nobody there), a
// chain of width 1: each hop signs its own call, and each receiver checks it.
TEST_F(TwoAgentsTest, ARelayedDescribeIsSignedAgainAtEveryHopAndAnswersForEachHost) {
  fs::create_directories(dir_.path() / "third");
  Other third(*wrongKey_, dir_.path() / "third");
  third.store.start();
  third.server = test::startLoopbackServer(&third.service, &third.port);
  v1::DescribeRequest request;
  v1::Relay* relay = request.mutable_relay();
  addRelayHost(relay, "other", test::loopbackAddress(other_->port));
  addRelayHost(relay, "third", test::loopbackAddress(third.port));
  addRelayHost(relay, "ghost", "127.0.0.1:" + std::to_string(pickFreePort("127.0.0.1")));
  relay->set_width(1);
  relay->set_call_timeout_ms(3000);
  v1::DescribeResponse response;
  auto context = signedContext("/hvd.v1.Agent/Describe", request);
  ASSERT_TRUE(stub_->Describe(context.get(), request, &response).ok());
  EXPECT_FALSE(response.hostname().empty());
  ASSERT_EQ(response.relayed_size(), 3);
  EXPECT_TRUE(response.relayed(0).has_description()) << response.relayed(0).failure().reason();
  // other signed with the cluster key; third holds another key and refused it.
  ASSERT_TRUE(response.relayed(1).has_failure());
  EXPECT_EQ(response.relayed(1).failure().host(), "third");
  EXPECT_TRUE(response.relayed(1).failure().authentication_failed())
      << response.relayed(1).failure().reason();
  // ghost was to be reached through third: its failure says so.
  ASSERT_TRUE(response.relayed(2).has_failure());
  EXPECT_EQ(response.relayed(2).failure().host(), "ghost");
  EXPECT_NE(response.relayed(2).failure().reason().find("reached through the agent on third"),
            std::string::npos)
      << response.relayed(2).failure().reason();
}

// One Launch stream for this agent's ranks and the other's: both hosts' launch results, output
// and exits come back on it, the other's through this agent.
TEST_F(TwoAgentsTest, ARelayedLaunchCarriesTheSubtreesResultsOutputAndExits) {
  v1::LaunchRequest request;
  request.set_job_id("relayed-job");
  addRank(&request, 0, "echo here $HVD_TEST_RANK");
  v1::Relay* relay = request.mutable_relay();
  addRelayHost(relay, "other", test::loopbackAddress(other_->port));
  relay->set_width(2);
  relay->set_call_timeout_ms(5000);
  v1::LaunchRequest* relayed = request.add_relayed();
  relayed->set_job_id("relayed-job");
  addRank(relayed, 1, "echo there $HVD_TEST_RANK; exit 4");
  auto context = signedContext("/hvd.v1.Agent/Launch", request);
  auto reader = stub_->Launch(context.get(), request);
  v1::RankEvent event;
  std::vector<std::string> seen;
  std::map<int, int> exits;
  while (reader->Read(&event)) {
    if (event.has_launched()) seen.push_back("launched " + event.launched().error());
    if (event.has_host_launched()) {
      seen.push_back("host_launched " + event.host_launched().host() + " " +
                     event.host_launched().result().error());
      EXPECT_EQ(event.host_launched().result().pids_size(), 1);
    }
    if (event.has_output()) seen.push_back("output " + event.output().line());
    if (event.has_exit()) exits[event.exit().rank()] = event.exit().exit_code();
  }
  EXPECT_TRUE(reader->Finish().ok());
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen[0], "launched ");  // this agent's own result first
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<std::string>{"host_launched other ", "launched ", "output here 0",
                                            "output there 1"}));
  EXPECT_EQ(exits, (std::map<int, int>{{0, 0}, {1, 4}}));
}

TEST(AgentEnvironmentTest, BaseDropsLauncherVariablesAndSecrets) {
  std::vector<std::string> entries = {"PATH=/usr/bin",
                                      "HOME=/home/u",
                                      "HVD_RANK=3",
                                      "HOROVOD_SIZE=2",
                                      "OMPI_COMM_WORLD_RANK=1",
                                      "SLURM_PROCID=0",
                                      "PMIX_RANK=0",
                                      "GITHUB_TOKEN=x",
                                      "AWS_SECRET_ACCESS_KEY=y",
                                      "db_password=z",
                                      "SSH_AUTH_SOCK=/s",
                                      "API_KEY=k",
                                      "LANG=C.UTF-8",
                                      "MALFORMED",
                                      "=empty-name",
                                      "KEYBOARD=us"};
  std::vector<char*> envp;
  for (std::string& e : entries) envp.push_back(e.data());
  envp.push_back(nullptr);
  EXPECT_EQ(
      baseEnvironment(envp.data()),
      (std::vector<std::string>{"PATH=/usr/bin", "HOME=/home/u", "LANG=C.UTF-8", "KEYBOARD=us"}));
}

TEST(AgentEnvironmentTest, JobEntriesOverrideTheBase) {
  EXPECT_EQ(mergeEnvironment({"PATH=/usr/bin", "HOME=/root", "LANG=C"},
                             {"HOME=/home/job", "HVD_RANK=1", "X=a=b", "HVD_RANK=2"}),
            (std::vector<std::string>{"PATH=/usr/bin", "HOME=/home/job", "LANG=C", "HVD_RANK=2",
                                      "X=a=b"}));
  EXPECT_EQ(mergeEnvironment({}, {"EMPTY="}), std::vector<std::string>{"EMPTY="});
  try {
    mergeEnvironment({"A=1"}, {"B=2", "SECRET_VALUE_WITHOUT_EQUALS"});
    FAIL() << "a malformed entry was accepted";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("entry 1"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("SECRET_VALUE"), std::string::npos) << e.what();
  }
}

// A process in a group of its own, as a job's leftover would be.
pid_t spawnGroupLeader(const char* seconds) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    ::execl("/bin/sleep", "sleep", seconds, static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // no race with the child's own call: either one makes it a leader
  return pid;
}

// Whether `pid` (our child) was killed by SIGKILL within `timeout`; reaps it either way.
bool killedWithin(pid_t pid, std::chrono::milliseconds timeout) {
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
    }
    std::this_thread::sleep_for(10ms);
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return false;
}

TEST(JobRecordsTest, RestartKillsLeftoverGroupsWhoseLeaderStillMatches) {
  TempDir dir;
  const std::string state = (dir.path() / "state").string();
  const pid_t leftover = spawnGroupLeader("60");
  const pid_t stranger = spawnGroupLeader("60");
  ASSERT_TRUE(waitUntil([&] { return ::getpgid(leftover) == leftover; }, 2s));
  ASSERT_TRUE(waitUntil([&] { return ::getpgid(stranger) == stranger; }, 2s));
  {
    JobRecords before(state);  // the agent that "crashed"
    ASSERT_TRUE(before.add("job-a", leftover, ""));
    // A record whose pid now belongs to someone else: the start time differs.
    JobRecord reused{"job-b", stranger, processStartTime(stranger).value() + 1, ::getpid(), 0, ""};
    ASSERT_TRUE(before.write(reused));
    // A record of another agent that is still running (here: our parent) is left alone.
    JobRecord otherAgent{"job-c",
                         stranger,
                         processStartTime(stranger).value(),
                         ::getppid(),
                         processStartTime(::getppid()).value(),
                         ""};
    ASSERT_TRUE(before.write(otherAgent));
    ASSERT_EQ(before.list().size(), 3u);
  }
  JobRecords after(state);  // the restarted agent
  const CleanupReport report = after.cleanupLeftovers();
  EXPECT_EQ(report.killed, 1);
  EXPECT_EQ(report.skipped, 1);
  EXPECT_EQ(report.kept, 1);
  EXPECT_TRUE(killedWithin(leftover, 5s));
  EXPECT_FALSE(processGone(stranger)) << "a process whose start time did not match was killed";
  ASSERT_EQ(after.list().size(), 1u);
  EXPECT_EQ(after.list()[0].jobId, "job-c");
  ::kill(stranger, SIGKILL);
  ::waitpid(stranger, nullptr, 0);
}

// A job's leftover whose group leader is gone (the rank died with the agent; what it started in
// the background lives on): a process in the leader's group, carrying `environment`. Returns
// (pgid, leftover pid); the leftover is not our child.
std::pair<pid_t, pid_t> spawnOrphanedGroupMember(const std::string& environment) {
  int fds[2];
  if (::pipe(fds) != 0) return {0, 0};
  const pid_t leader = ::fork();
  if (leader == 0) {
    ::setpgid(0, 0);
    const pid_t member = ::fork();
    if (member == 0) {
      std::string env = environment;
      char* envp[] = {env.data(), nullptr};
      ::execle("/bin/sleep", "sleep", "60", static_cast<char*>(nullptr), envp);
      ::_exit(127);
    }
    (void)!::write(fds[1], &member, sizeof(member));
    ::_exit(0);
  }
  ::close(fds[1]);
  pid_t member = 0;
  (void)!::read(fds[0], &member, sizeof(member));
  ::close(fds[0]);
  ::waitpid(leader, nullptr, 0);
  return {leader, member};
}

// Gone, or a zombie waiting for whoever adopted it.
bool deadOrZombie(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return true;
  const size_t close = stat.rfind(')');
  return close != std::string::npos && stat.size() > close + 2 && stat[close + 2] == 'Z';
}

TEST(JobRecordsTest, RestartKillsLeftoversOfADeadLeaderByTheirTag) {
  TempDir dir;
  const std::string state = (dir.path() / "state").string();
  const auto [taggedGroup, tagged] = spawnOrphanedGroupMember("HVD_AGENT_JOB_TAG=0123abcd");
  const auto [otherGroup, other] = spawnOrphanedGroupMember("HVD_AGENT_JOB_TAG=ffff0000");
  ASSERT_GT(tagged, 0);
  ASSERT_GT(other, 0);
  ASSERT_TRUE(waitUntil([&, g = taggedGroup] { return processStartTime(g) == std::nullopt; }, 2s));
  EXPECT_EQ(processGroupMembers(taggedGroup), std::vector<pid_t>{tagged});
  {
    JobRecords before(state);
    // Leader start times that can no longer be checked: the leaders are gone.
    ASSERT_TRUE(before.write({"job-t", taggedGroup, 1, ::getpid(), 0, "0123abcd"}));
    ASSERT_TRUE(before.write({"job-o", otherGroup, 1, ::getpid(), 0, "0123abcd"}));
  }
  JobRecords after(state);
  const CleanupReport report = after.cleanupLeftovers();
  EXPECT_EQ(report.killed, 1);
  EXPECT_EQ(report.skipped, 1);
  EXPECT_TRUE(waitUntil([&, p = tagged] { return deadOrZombie(p); }, 5s));
  EXPECT_FALSE(deadOrZombie(other)) << "a group without the job's tag was killed";
  EXPECT_TRUE(after.list().empty());
  ::kill(other, SIGKILL);
}

TEST(JobRecordsTest, RemoveForgetsTheRecordAndStartTimeReadsProc) {
  TempDir dir;
  JobRecords records((dir.path() / "nested" / "state").string());
  EXPECT_EQ(fs::status(records.dir()).permissions() & fs::perms::all, fs::perms::owner_all);
  ASSERT_TRUE(records.add("job\nwith newline", ::getpid(), "t1"));
  ASSERT_EQ(records.list().size(), 1u);
  EXPECT_EQ(records.list()[0].jobId, "job?with newline");
  EXPECT_EQ(records.list()[0].leaderStartTime, processStartTime(::getpid()).value());
  EXPECT_EQ(records.list()[0].tag, "t1");
  records.remove("job\nwith newline");
  EXPECT_TRUE(records.list().empty());
  EXPECT_FALSE(records.add("gone", 0, ""));
  EXPECT_EQ(processStartTime(0), std::nullopt);
}

TEST(AgentCliTest, ListenAddresses) {
  EXPECT_EQ(parseListenAddress("127.0.0.1:7475").toString(), "127.0.0.1:7475");
  EXPECT_EQ(parseListenAddress("[::1]:0").toString(), "[::1]:0");
  EXPECT_EQ(parseListenAddress("localhost:1").host, "127.0.0.1");
  EXPECT_TRUE(parseListenAddress("0.0.0.0:7475").wildcard());
  for (const char* bad : {"127.0.0.1", "127.0.0.1:", "127.0.0.1:x", "::1:7475", "[::1]7475",
                          "host.example:7475", "127.0.0.1:65536", ""}) {
    EXPECT_THROW(parseListenAddress(bad), InvalidArgumentError) << bad;
  }
  EXPECT_TRUE(isLoopbackName("localhost"));
  EXPECT_TRUE(isLoopbackName("127.0.1.1"));
  EXPECT_TRUE(isLoopbackName("::1"));
  EXPECT_FALSE(isLoopbackName("10.0.0.1"));
  EXPECT_FALSE(isLoopbackName("node-1"));
  EXPECT_GT(pickFreePort("127.0.0.1"), 0);
}

TEST(AgentCliTest, DefaultsAreClosed) {
  std::string name = "hvdagent";
  char* argv[] = {name.data(), nullptr};
  AgentCliOptions options;
  ASSERT_EQ(parseAgentCommandLine(1, argv, &options), std::nullopt);
  EXPECT_EQ(options.listen, "127.0.0.1:7475");
  EXPECT_TRUE(isLoopbackName(parseListenAddress(options.listen).host));
  EXPECT_FALSE(options.allowRunAsRoot);
  EXPECT_FALSE(options.tls.enabled());
  EXPECT_FALSE(options.stateDir.empty());
}

// parseAgentCommandLine over `args` (after the program name): the exit code, the options and
// what it printed on stderr.
struct AgentParsed {
  std::optional<int> code;
  AgentCliOptions options;
  std::string stderrText;
};
AgentParsed parseAgent(std::vector<std::string> args) {
  args.insert(args.begin(), "hvdagent");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  AgentParsed p;
  ::testing::internal::CaptureStderr();
  p.code = parseAgentCommandLine(static_cast<int>(argv.size()), argv.data(), &p.options);
  p.stderrText = ::testing::internal::GetCapturedStderr();
  return p;
}

TEST(AgentCliTest, SlotsDefaultToZeroAndTakeAWholeNumber) {
  AgentParsed p = parseAgent({});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(p.options.slots, 0);
  p = parseAgent({"--slots", "8"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(p.options.slots, 8);
  for (const char* bad : {"-1", "1.5", "many", ""}) {
    p = parseAgent({"--slots", bad});
    EXPECT_EQ(p.code, 2) << bad;
    EXPECT_NE(p.stderrText.find("hvdagent: --slots: '" + std::string(bad) + "'"), std::string::npos)
        << p.stderrText;
  }
}

TEST(AgentCliTest, EmptyPathsAndAddressesAreUsageErrors) {
  for (const char* option : {"--listen", "--key-file", "--tls-cert", "--tls-key", "--tls-ca",
                             "--state-dir", "--port-file"}) {
    AgentParsed p = parseAgent({option, ""});
    EXPECT_EQ(p.code, 2) << option;
    EXPECT_NE(p.stderrText.find("hvdagent: " + std::string(option) + ": '' is empty"),
              std::string::npos)
        << p.stderrText;
  }
}

TEST(AgentCliTest, NumbersMustBeFiniteAndInRange) {
  for (const char* bad : {"nan", "inf", "-1", "3601", "5s"}) {
    AgentParsed p = parseAgent({"--shutdown-grace", bad});
    EXPECT_EQ(p.code, 2) << bad;
    EXPECT_NE(p.stderrText.find("--shutdown-grace: '" + std::string(bad) + "'"), std::string::npos)
        << p.stderrText;
  }
  AgentParsed ok = parseAgent({"--shutdown-grace", "2.5", "--keep-jobs", "3", "--max-log-mb", "1"});
  ASSERT_EQ(ok.code, std::nullopt) << ok.stderrText;
  EXPECT_EQ(ok.options.shutdownGraceSeconds, 2.5);
  EXPECT_EQ(ok.options.keepJobs, 3u);
  EXPECT_EQ(ok.options.maxLogMb, 1u);
  EXPECT_EQ(ok.options.maxStoreMb, 64u);
  for (const auto& [option, bad] : std::vector<std::pair<const char*, const char*>>{
           {"--keep-jobs", "0"}, {"--keep-jobs", "-1"}, {"--max-log-mb", "1e3"}}) {
    AgentParsed p = parseAgent({option, bad});
    EXPECT_EQ(p.code, 2) << option << " " << bad;
    EXPECT_NE(p.stderrText.find(std::string(option) + ": '" + bad + "'"), std::string::npos)
        << p.stderrText;
  }
}

TEST(AgentCliTest, RootNeedsBothConfirmations) {
  EXPECT_EQ(rootRefusal(false, false, nullptr), "");
  EXPECT_EQ(rootRefusal(true, true, "1"), "");
  for (auto [flag, env] :
       {std::pair<bool, const char*>{false, nullptr}, {true, nullptr}, {false, "1"}, {true, "0"}}) {
    const std::string message = rootRefusal(true, flag, env);
    EXPECT_NE(message.find("--allow-run-as-root"), std::string::npos) << message;
    EXPECT_NE(message.find("HVD_ALLOW_RUN_AS_ROOT_CONFIRM=1"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace hvd::agent::service

namespace hvd::agent::service {
namespace {

TEST(OutputBudget, DropsBeyondTheBudgetAndReportsTheCountOnce) {
  EventQueue<std::string> queue;
  OutputBudget budget(10);
  size_t dropped = 99;
  ASSERT_TRUE(budget.admit(0, 6, queue.queuedBytes(), &dropped));
  EXPECT_EQ(dropped, 0u);
  queue.push("aaaaaa", 6);
  EXPECT_EQ(queue.queuedBytes(), 6u);
  EXPECT_FALSE(budget.admit(0, 6, queue.queuedBytes(), &dropped));
  EXPECT_FALSE(budget.admit(0, 5, queue.queuedBytes(), &dropped));
  EXPECT_FALSE(budget.admit(1, 5, queue.queuedBytes(), &dropped));
  EXPECT_TRUE(budget.admit(1, 4, queue.queuedBytes(), &dropped));  // fits exactly
  EXPECT_EQ(dropped, 1u);
  EXPECT_EQ(queue.popAll(std::chrono::milliseconds(0)).size(), 1u);
  EXPECT_EQ(queue.queuedBytes(), 0u);
  ASSERT_TRUE(budget.admit(0, 6, queue.queuedBytes(), &dropped));
  EXPECT_EQ(dropped, 2u);  // rank 0's two dropped lines, reported once
  ASSERT_TRUE(budget.admit(0, 1, queue.queuedBytes(), &dropped));
  EXPECT_EQ(dropped, 0u);
  EXPECT_FALSE(budget.admit(2, 11, 0, &dropped));
  EXPECT_EQ(budget.takeDropped(2), 1u);
  EXPECT_EQ(budget.takeDropped(2), 0u);
  EXPECT_NE(OutputBudget::notice(7).find("7 line(s)"), std::string::npos);
}

}  // namespace
}  // namespace hvd::agent::service
