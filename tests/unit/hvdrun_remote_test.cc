// hvdrun's remote mode against an in-process fake hvd.v1.Agent on 127.0.0.1:0: the SubmitJob
// stream client (launcher/remote_client.h), the request it sends (launcher/job_spec.h), and the
// hvdrun binary itself talking to the fake (key file, rendering, exit codes, Ctrl-C).
//
// The fake checks every call with the real CallGuard, so a test passes only if hvdrun signs
// SubmitJob and CancelJob the way a real agent verifies them.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "agent/auth/cluster_key.h"
#include "agent/auth/request_signer.h"
#include "agent/rpc/call_auth.h"
#include "agent/rpc/credentials.h"
#include "agent/rpc/methods.h"
#include "common/grpc_test_server.h"
#include "common/test_support.h"
#include "contract/exit_codes.h"
#include "hvd/error.hpp"
#include "hvd/v1/agent.grpc.pb.h"
#include "launcher/job_spec.h"
#include "launcher/options.h"
#include "launcher/remote_client.h"

namespace hvd::launcher {
namespace {

using namespace std::chrono_literals;
namespace coord = agent::coordinator;
using Clock = std::chrono::steady_clock;

using test::TempDir;

// What the fake does with one SubmitJob after accepting (or not accepting) it.
struct Script {
  bool accept = true;
  std::chrono::milliseconds acceptDelay{0};
  std::vector<v1::JobOutput> output;
  // Wait for a CancelJob before ending (JobEnd outcome CANCELLED, exit 130).
  bool waitForCancel = false;
  // Never send anything, until the client goes away.
  bool silent = false;
  std::optional<v1::JobEnd> end;           // sent last, when set
  grpc::Status status = grpc::Status::OK;  // the stream's final status
};

class FakeAgent final : public v1::Agent::Service {
 public:
  explicit FakeAgent(const agent::auth::ClusterKey& key)
      : verifier_(key, clock_), guard_(&verifier_) {
    server_ = test::startLoopbackServer(this, &port_);
  }
  ~FakeAgent() override { server_->Shutdown(std::chrono::system_clock::now() + 2s); }

  int port() const { return port_; }
  std::string address() const { return test::loopbackAddress(port_); }
  void setScript(Script s) {
    std::lock_guard<std::mutex> lock(mutex_);
    script_ = std::move(s);
  }
  std::vector<v1::SubmitJobRequest> submits() {
    std::lock_guard<std::mutex> lock(mutex_);
    return submits_;
  }
  std::vector<std::string> cancels() {
    std::lock_guard<std::mutex> lock(mutex_);
    return cancels_;
  }
  size_t denials() const { return guard_.denials(); }

  grpc::Status SubmitJob(grpc::ServerContext* context, const v1::SubmitJobRequest* request,
                         grpc::ServerWriter<v1::JobEvent>* writer) override {
    if (grpc::Status s = guard_.check(*context, agent::rpc::kSubmitJobMethod, *request); !s.ok()) {
      return s;
    }
    Script script;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      submits_.push_back(*request);
      script = script_;
    }
    if (script.silent) {
      while (!context->IsCancelled()) std::this_thread::sleep_for(10ms);
      return grpc::Status::CANCELLED;
    }
    std::this_thread::sleep_for(script.acceptDelay);
    if (script.accept) {
      v1::JobEvent accepted;
      accepted.mutable_accepted()->set_job_id("job-7");
      writer->Write(accepted);
    }
    for (const v1::JobOutput& o : script.output) {
      v1::JobEvent e;
      *e.mutable_output() = o;
      writer->Write(e);
    }
    if (script.waitForCancel) {
      std::unique_lock<std::mutex> lock(mutex_);
      cancelled_.wait_for(lock, 20s, [&] { return !cancels_.empty(); });
    }
    if (script.end) {
      v1::JobEvent e;
      *e.mutable_end() = *script.end;
      writer->Write(e);
    }
    return script.status;
  }

  grpc::Status CancelJob(grpc::ServerContext* context, const v1::CancelJobRequest* request,
                         v1::CancelJobResponse*) override {
    if (grpc::Status s = guard_.check(*context, agent::rpc::kCancelJobMethod, *request); !s.ok()) {
      return s;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    cancels_.push_back(request->job_id());
    cancelled_.notify_all();
    return grpc::Status::OK;
  }

 private:
  agent::auth::SystemClock clock_;
  agent::auth::RequestVerifier verifier_;
  agent::rpc::CallGuard guard_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::mutex mutex_;
  std::condition_variable cancelled_;
  Script script_;
  std::vector<v1::SubmitJobRequest> submits_;
  std::vector<std::string> cancels_;
};

class RecordingEvents final : public coord::ClientEvents {
 public:
  void onOutput(int rank, const std::string& host, agent::process::Stream stream,
                std::string_view line) override {
    std::lock_guard<std::mutex> lock(mutex_);
    lines.push_back(std::to_string(rank) + "@" + host +
                    (stream == agent::process::Stream::kStdout ? " out: " : " err: ") +
                    std::string(line));
  }
  void onJobEnd(const coord::JobResult& result) override {
    std::lock_guard<std::mutex> lock(mutex_);
    ends.push_back(result);
  }
  std::vector<std::string> lines;
  std::vector<coord::JobResult> ends;

 private:
  std::mutex mutex_;
};

v1::JobOutput outputLine(int rank, v1::OutputStream stream, const std::string& line) {
  v1::JobOutput o;
  o.set_rank(rank);
  o.set_host("node-a");
  o.set_stream(stream);
  o.set_line(line);
  return o;
}

v1::JobEnd jobEnd(v1::JobOutcome outcome, int exitCode, const std::string& summary) {
  v1::JobEnd e;
  e.set_job_id("job-7");
  e.set_outcome(outcome);
  e.set_exit_code(exitCode);
  e.set_summary(summary);
  e.set_rank(-1);
  return e;
}

// A key file in `dir` (fresh random key each call).
std::string makeKey(const TempDir& dir, const std::string& name = "cluster.key") {
  const std::string path = dir.file(name);
  agent::auth::ClusterKey::generate(path);
  return path;
}

// Runs one job through RemoteJobClient the way hvdrun's main loop does (tick every 50 ms).
struct ClientRun {
  coord::JobResult result;
  double seconds = 0;
  std::vector<std::string> lines;
};

ClientRun runClient(const std::string& address, const agent::auth::ClusterKey& key,
                    std::chrono::milliseconds startTimeout = 5s,
                    std::function<void(RemoteJobClient&)> during = nullptr) {
  agent::auth::SystemClock clock;
  agent::rpc::CallSigner signer(key, clock);
  RecordingEvents events;
  RemoteJobConfig config;
  config.host = "node-a";
  config.address = address;
  config.startTimeout = startTimeout;
  const auto start = Clock::now();
  ClientRun run;
  {
    RemoteJobClient client(agent::rpc::makeChannel(address, {}), &signer, config, &events);
    v1::SubmitJobRequest request;
    request.add_argv("prog");
    request.set_np(1);
    client.start(request);
    if (during) during(client);
    const auto deadline = Clock::now() + 30s;
    while (!client.finished() && Clock::now() < deadline) {
      client.tick();
      std::this_thread::sleep_for(50ms);
    }
    EXPECT_TRUE(client.finished()) << "no result within 30 s";
    if (client.result()) run.result = *client.result();
  }
  run.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(events.ends.size(), 1u) << "onJobEnd must be called exactly once";
  run.lines = events.lines;
  return run;
}

// --- RemoteJobClient -------------------------------------------------------------------------

TEST(HvdrunRemoteClient, RendersOutputAndEndsWithTheJobEnd) {
  TempDir dir;
  const auto key = agent::auth::ClusterKey::load(makeKey(dir));
  FakeAgent fake(key);
  Script s;
  s.output = {outputLine(0, v1::STDOUT, "hello"), outputLine(1, v1::STDERR, "boom")};
  v1::JobEnd end = jobEnd(v1::RANK_FAILED, 3, "hvdrun: rank 1 on node-a exited with code 3");
  end.set_rank(1);
  end.set_host("node-a");
  end.add_stderr_tail("boom");
  s.end = end;
  fake.setScript(s);

  ClientRun run = runClient(fake.address(), key);
  EXPECT_EQ(run.lines, (std::vector<std::string>{"0@node-a out: hello", "1@node-a err: boom"}));
  EXPECT_EQ(run.result.exitCode, 3);
  EXPECT_EQ(run.result.outcome, coord::JobOutcome::kRankFailed);
  EXPECT_EQ(run.result.summary, "hvdrun: rank 1 on node-a exited with code 3");
  EXPECT_EQ(run.result.rank, 1);
  EXPECT_EQ(run.result.stderrTail, (std::vector<std::string>{"boom"}));
  EXPECT_EQ(fake.denials(), 0u);
  ASSERT_EQ(fake.submits().size(), 1u);
  EXPECT_EQ(fake.submits()[0].argv(0), "prog");
}

// An exception out of the renderer on the reader thread is a bug in hvdrun; it must end the job
// as an internal error (70) with the stream closed, not reach std::terminate.
TEST(HvdrunRemoteClient, AnExceptionOnTheReaderThreadEndsTheJobAsAnInternalError) {
  TempDir dir;
  const auto key = agent::auth::ClusterKey::load(makeKey(dir));
  FakeAgent fake(key);
  Script s;
  s.output = {outputLine(0, v1::STDOUT, "hello"), outputLine(0, v1::STDOUT, "again")};
  s.end = jobEnd(v1::SUCCEEDED, 0, "");
  fake.setScript(s);

  class ThrowingEvents final : public coord::ClientEvents {
   public:
    void onOutput(int, const std::string&, agent::process::Stream, std::string_view) override {
      throw std::runtime_error("renderer broke");
    }
    void onJobEnd(const coord::JobResult& result) override {
      std::lock_guard<std::mutex> lock(mutex);
      ends.push_back(result);
    }
    std::mutex mutex;
    std::vector<coord::JobResult> ends;
  } events;
  agent::auth::SystemClock clock;
  agent::rpc::CallSigner signer(key, clock);
  RemoteJobConfig config;
  config.host = "node-a";
  config.address = fake.address();
  config.startTimeout = 5s;
  RemoteJobClient client(agent::rpc::makeChannel(fake.address(), {}), &signer, config, &events);
  v1::SubmitJobRequest request;
  request.add_argv("prog");
  request.set_np(1);
  client.start(request);
  const auto deadline = Clock::now() + 30s;
  while (!client.finished() && Clock::now() < deadline) {
    client.tick();
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(client.finished());
  const coord::JobResult result = *client.result();
  EXPECT_EQ(result.exitCode, contract::kExitInternalError);
  EXPECT_EQ(result.outcome, coord::JobOutcome::kAgentLost);
  EXPECT_NE(result.summary.find("hvdrun: internal error reading the job's stream: renderer broke"),
            std::string::npos)
      << result.summary;
  std::lock_guard<std::mutex> lock(events.mutex);
  EXPECT_EQ(events.ends.size(), 1u);
}

TEST(HvdrunRemoteClient, WrongKeyIsAnAuthenticationFailureNamingHostAndAddress) {
  TempDir dir;
  const auto agentKey = agent::auth::ClusterKey::load(makeKey(dir, "agent.key"));
  const auto otherKey = agent::auth::ClusterKey::load(makeKey(dir, "other.key"));
  FakeAgent fake(agentKey);
  ClientRun run = runClient(fake.address(), otherKey);
  EXPECT_EQ(run.result.exitCode, 77);
  EXPECT_EQ(run.result.summary, "hvdrun: agent on node-a (" + fake.address() +
                                    ") refused the request: authentication failed: bad signature "
                                    "(is --key-file the cluster's key?)");
  EXPECT_EQ(fake.denials(), 1u);
}

TEST(HvdrunRemoteClient, ClosedPortIsUnreachableAtOnceNamingHostAndAddress) {
  // A port that was just bound and closed: nothing listens there.
  const std::string address = test::loopbackAddress(test::closedLoopbackPort());

  TempDir dir;
  const auto key = agent::auth::ClusterKey::load(makeKey(dir));
  ClientRun run = runClient(address, key, /*startTimeout=*/3s);
  EXPECT_EQ(run.result.exitCode, 69);
  EXPECT_EQ(run.result.outcome, coord::JobOutcome::kAgentUnreachable);
  EXPECT_EQ(run.result.summary,
            "hvdrun: agent on node-a (" + address + ") is unreachable: connection refused");
  EXPECT_LT(run.seconds, 3.0) << "a refused connection must not wait for the start timeout";
}

TEST(HvdrunRemoteClient, SilentAgentIsUnreachableAfterTheStartTimeout) {
  TempDir dir;
  const auto key = agent::auth::ClusterKey::load(makeKey(dir));
  FakeAgent fake(key);
  Script s;
  s.silent = true;
  fake.setScript(s);
  ClientRun run = runClient(fake.address(), key, /*startTimeout=*/500ms);
  EXPECT_EQ(run.result.exitCode, 69);
  EXPECT_EQ(run.result.summary, "hvdrun: agent on node-a (" + fake.address() +
                                    ") is unreachable: no answer within 0.5 s");
  EXPECT_GE(run.seconds, 0.45);
  EXPECT_LT(run.seconds, 5.0);
}

TEST(HvdrunRemoteClient, CancelSendsASignedCancelJobAndWaitsForTheJobEnd) {
  TempDir dir;
  const auto key = agent::auth::ClusterKey::load(makeKey(dir));
  FakeAgent fake(key);
  Script s;
  s.waitForCancel = true;
  s.end = jobEnd(v1::CANCELLED, 130, "hvdrun: job cancelled");
  fake.setScript(s);
  ClientRun run = runClient(fake.address(), key, 5s, [](RemoteJobClient& client) {
    const auto deadline = Clock::now() + 10s;
    while (client.jobId().empty() && Clock::now() < deadline) std::this_thread::sleep_for(10ms);
    EXPECT_EQ(client.jobId(), "job-7");
    client.cancel();
  });
  EXPECT_EQ(fake.cancels(), (std::vector<std::string>{"job-7"}));
  EXPECT_EQ(run.result.exitCode, 130);
  EXPECT_EQ(run.result.outcome, coord::JobOutcome::kCancelled);
  EXPECT_EQ(fake.denials(), 0u);
}

TEST(HvdrunRemoteClient, CancelBeforeAcceptanceIsSentOnceTheJobIdArrives) {
  TempDir dir;
  const auto key = agent::auth::ClusterKey::load(makeKey(dir));
  FakeAgent fake(key);
  Script s;
  s.acceptDelay = 300ms;
  s.waitForCancel = true;
  s.end = jobEnd(v1::CANCELLED, 130, "hvdrun: job cancelled");
  fake.setScript(s);
  ClientRun run =
      runClient(fake.address(), key, 5s, [](RemoteJobClient& client) { client.cancel(); });
  EXPECT_EQ(fake.cancels(), (std::vector<std::string>{"job-7"}));
  EXPECT_EQ(run.result.exitCode, 130);
}

TEST(HvdrunRemoteClient, StreamBrokenAfterAcceptanceIsALostAgent) {
  TempDir dir;
  const auto key = agent::auth::ClusterKey::load(makeKey(dir));
  FakeAgent fake(key);
  Script s;
  s.output = {outputLine(0, v1::STDOUT, "working")};
  s.status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "agent shutting down");
  fake.setScript(s);
  ClientRun run = runClient(fake.address(), key);
  EXPECT_EQ(run.result.exitCode, 75);
  EXPECT_EQ(run.result.outcome, coord::JobOutcome::kAgentLost);
  EXPECT_EQ(run.result.summary,
            "hvdrun: lost the agent on node-a (" + fake.address() + "): agent shutting down");
  EXPECT_EQ(run.lines, (std::vector<std::string>{"0@node-a out: working"}));
}

TEST(HvdrunRemoteClient, StreamEndingWithoutJobEndIsALostAgent) {
  TempDir dir;
  const auto key = agent::auth::ClusterKey::load(makeKey(dir));
  FakeAgent fake(key);
  fake.setScript(Script{});
  ClientRun run = runClient(fake.address(), key);
  EXPECT_EQ(run.result.exitCode, 75);
  EXPECT_NE(run.result.summary.find("closed the job's stream before the job ended"),
            std::string::npos)
      << run.result.summary;
}

TEST(HvdrunRemoteClient, InvalidArgumentBeforeAcceptanceIsAUsageError) {
  TempDir dir;
  const auto key = agent::auth::ClusterKey::load(makeKey(dir));
  FakeAgent fake(key);
  Script s;
  s.accept = false;
  s.status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "-np must be at least 1");
  fake.setScript(s);
  ClientRun run = runClient(fake.address(), key);
  EXPECT_EQ(run.result.exitCode, 2);
  EXPECT_EQ(run.result.summary, "hvdrun: agent on node-a (" + fake.address() +
                                    ") refused the job: -np must be at least 1");
}

// --- buildSubmitRequest ----------------------------------------------------------------------

TEST(HvdrunRemoteRequest, CarriesOnlyTheExportsAndEveryAgentAddress) {
  ASSERT_EQ(::setenv("HVD_REMOTE_TEST_FWD", "v", 1), 0);
  Options o;
  o.np = 3;
  o.command = {"train", "--epochs", "3"};
  o.exports = {"A=1", "HVD_REMOTE_TEST_FWD"};
  o.agentPort = 7000;
  o.startTimeoutSeconds = 4;
  o.gpuBind = "visible";
  o.stopSignal = "INT";
  o.graceSeconds = 2.5;
  const std::vector<contract::HostSlots> hosts = {{"node-a", 2}, {"fe80::1", std::nullopt}};
  const v1::SubmitJobRequest r = buildSubmitRequest(o, hosts);
  ::unsetenv("HVD_REMOTE_TEST_FWD");
  EXPECT_EQ(std::vector<std::string>(r.argv().begin(), r.argv().end()), o.command);
  // Not the caller's PATH/HOME: remote ranks get their agent's environment plus -x.
  EXPECT_EQ(std::vector<std::string>(r.env().begin(), r.env().end()),
            (std::vector<std::string>{"A=1", "HVD_REMOTE_TEST_FWD=v"}));
  ASSERT_EQ(r.hosts_size(), 2);
  EXPECT_EQ(r.hosts(0).host(), "node-a");
  EXPECT_EQ(r.hosts(0).slots(), 2);
  EXPECT_EQ(r.hosts(0).agent_address(), "node-a:7000");
  EXPECT_EQ(r.hosts(1).slots(), 0);
  EXPECT_EQ(r.hosts(1).agent_address(), "[fe80::1]:7000");
  EXPECT_EQ(r.np(), 3);
  EXPECT_EQ(r.gpu_bind(), v1::GPU_BIND_VISIBLE);
  EXPECT_EQ(r.stop_signal(), SIGINT);
  EXPECT_EQ(r.grace_ms(), 2500);
  EXPECT_EQ(r.connect_timeout_ms(), 4000);
  EXPECT_EQ(r.cwd(), std::filesystem::current_path().string());
  EXPECT_EQ(r.job_name(), "train");  // the program: what `hvdrun ps` names the job by
  EXPECT_FALSE(r.detach());
  EXPECT_EQ(r.time_limit_ms(), 0);
}

TEST(HvdrunRemoteRequest, ExplicitStartTimeoutReachesTheRanksUnlessExported) {
  Options o;
  o.np = 1;
  o.command = {"p"};
  o.startTimeoutSeconds = 42;
  o.startTimeoutGiven = true;
  const std::vector<contract::HostSlots> hosts = {{"node-a", 1}};
  v1::SubmitJobRequest r = buildSubmitRequest(o, hosts);
  EXPECT_EQ(std::vector<std::string>(r.env().begin(), r.env().end()),
            (std::vector<std::string>{"HVD_START_TIMEOUT=42"}));
  o.exports = {"HVD_START_TIMEOUT=5"};
  r = buildSubmitRequest(o, hosts);
  EXPECT_EQ(std::vector<std::string>(r.env().begin(), r.env().end()),
            (std::vector<std::string>{"HVD_START_TIMEOUT=5"}));
}

TEST(HvdrunRemoteRequest, LoopbackNamesCannotBeMixedWithOtherHosts) {
  EXPECT_NO_THROW(checkAgentHosts({{"localhost", 2}}));
  EXPECT_NO_THROW(checkAgentHosts({{"node-a", 2}, {"node-b", 2}}));
  try {
    checkAgentHosts({{"node-a", 2}, {"localhost", 2}});
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("host 'localhost' means a different machine to each "
                                         "agent"),
              std::string::npos)
        << e.what();
  }
}

// --- the hvdrun binary against the fake ------------------------------------------------------

using BinaryRun = test::ProcessResult;

// Runs hvdrun with `args`; `during(pid)` runs while it does. SIGKILLed after 30 s.
BinaryRun runHvdrun(std::vector<std::string> args, std::function<void(pid_t)> during = nullptr) {
  args.insert(args.begin(), HVDRUN_PATH);
  test::Process hvdrun(std::move(args));
  std::thread watcher;
  if (during) watcher = std::thread([&] { during(hvdrun.pid()); });
  BinaryRun r = hvdrun.finish(30s);
  if (watcher.joinable()) watcher.join();
  return r;
}

TEST(HvdrunRemoteBinary, RendersTheAgentsOutputAndExitsWithTheJobsCode) {
  TempDir dir;
  const std::string keyFile = makeKey(dir);
  FakeAgent fake(agent::auth::ClusterKey::load(keyFile));
  Script s;
  s.output = {outputLine(0, v1::STDOUT, "hello"), outputLine(1, v1::STDERR, "boom")};
  v1::JobEnd end = jobEnd(v1::RANK_FAILED, 3, "hvdrun: rank 1 on node-a exited with code 3");
  end.set_rank(1);
  end.add_stderr_tail("boom");
  s.end = end;
  fake.setScript(s);
  BinaryRun r = runHvdrun({"--agent-port", std::to_string(fake.port()), "--key-file", keyFile,
                           "-np", "2", "-x", "A=1", "prog", "arg"});
  EXPECT_EQ(r.status, 3) << r.err;
  EXPECT_EQ(r.out, "[0]<stdout>: hello\n");
  EXPECT_NE(r.err.find("[1]<stderr>: boom\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("hvdrun: rank 1 on node-a exited with code 3\n"
                       "hvdrun: last 1 line(s) of rank 1's stderr:\n  boom\n"),
            std::string::npos)
      << r.err;
  ASSERT_EQ(fake.submits().size(), 1u);
  const v1::SubmitJobRequest req = fake.submits()[0];
  EXPECT_EQ(req.np(), 2);
  EXPECT_EQ(req.hosts(0).host(), "localhost");
  EXPECT_EQ(req.hosts(0).slots(), 2);
  EXPECT_EQ(std::vector<std::string>(req.env().begin(), req.env().end()),
            (std::vector<std::string>{"A=1"}));
}

TEST(HvdrunRemoteBinary, SigintSendsCancelJobAndExitsWithTheAgentsCode) {
  TempDir dir;
  const std::string keyFile = makeKey(dir);
  FakeAgent fake(agent::auth::ClusterKey::load(keyFile));
  Script s;
  s.output = {outputLine(0, v1::STDOUT, "started")};
  s.waitForCancel = true;
  s.end = jobEnd(v1::CANCELLED, 130, "hvdrun: job cancelled");
  fake.setScript(s);
  BinaryRun r = runHvdrun(
      {"--agent-port", std::to_string(fake.port()), "--key-file", keyFile, "-np", "1", "prog"},
      [&](pid_t pid) {
        const auto deadline = Clock::now() + 10s;
        while (fake.submits().empty() && Clock::now() < deadline) {
          std::this_thread::sleep_for(20ms);
        }
        std::this_thread::sleep_for(200ms);  // let the job id arrive
        ::kill(pid, SIGINT);
      });
  EXPECT_EQ(r.status, 130) << r.err;
  EXPECT_EQ(fake.cancels(), (std::vector<std::string>{"job-7"}));
  EXPECT_NE(r.err.find("hvdrun: got SIGINT, stopping the job"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("hvdrun: job cancelled"), std::string::npos) << r.err;
}

TEST(HvdrunRemoteBinary, MissingKeyFileIsAUsageErrorNamingTheFileAndTheFix) {
  TempDir dir;
  const std::string missing = dir.file("no.key");
  BinaryRun r = runHvdrun({"--agent-port", "1", "--key-file", missing, "-np", "1", "prog"});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find(missing), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("hvdrun keygen"), std::string::npos) << r.err;
}

TEST(HvdrunRemoteBinary, WrongKeyExits77WithAuthenticationFailed) {
  TempDir dir;
  FakeAgent fake(agent::auth::ClusterKey::load(makeKey(dir, "agent.key")));
  BinaryRun r = runHvdrun({"--agent-port", std::to_string(fake.port()), "--key-file",
                           makeKey(dir, "mine.key"), "-np", "1", "prog"});
  EXPECT_EQ(r.status, 77) << r.err;
  EXPECT_NE(r.err.find("hvdrun: agent on localhost (127.0.0.1:" + std::to_string(fake.port()) +
                       ") refused the request: authentication failed: bad signature"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace hvd::launcher
