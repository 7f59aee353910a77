#include "launcher/remote_client.h"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <utility>

#include "agent/client/remote_node_agent.h"
#include "agent/common/thread_guard.h"
#include "agent/rpc/convert.h"
#include "agent/rpc/methods.h"
#include "contract/exit_codes.h"
#include "hvd_support/logging.h"
#include "launcher/output.h"

namespace hvd::launcher {

namespace coord = agent::coordinator;
using std::chrono::steady_clock;

namespace {

std::string seconds(std::chrono::milliseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g s", static_cast<double>(d.count()) / 1000.0);
  return buf;
}

// gRPC's text for a refused connection is long ("failed to connect to all addresses; last
// error: UNKNOWN: ipv4:...: Failed to connect to remote host: Connection refused"); the address
// is already in the message, so the reason says just what happened.
std::string shortReason(const grpc::Status& status, std::chrono::milliseconds timeout) {
  const std::string& m = status.error_message();
  if (m.find("Connection refused") != std::string::npos) return "connection refused";
  if (m.find("No route to host") != std::string::npos) return "no route to host";
  if (m.find("DNS resolution failed") != std::string::npos ||
      m.find("Domain name not found") != std::string::npos) {
    return "cannot resolve the host name";
  }
  return agent::client::describeStatus(status, timeout);
}

}  // namespace

RemoteJobClient::RemoteJobClient(std::shared_ptr<grpc::Channel> channel,
                                 agent::rpc::CallSigner* signer, RemoteJobConfig config,
                                 coord::ClientEvents* events)
    : config_(std::move(config)),
      signer_(signer),
      events_(events),
      stub_(v1::Agent::NewStub(std::move(channel))) {}

RemoteJobClient::~RemoteJobClient() {
  if (reader_) context_.TryCancel();  // no-op once the stream finished
  if (thread_.joinable()) thread_.join();
}

void RemoteJobClient::start(const v1::SubmitJobRequest& request) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    startDeadline_ = steady_clock::now() + config_.startTimeout;
  }
  // A refused connection fails the call at once instead of waiting for the channel.
  context_.set_wait_for_ready(false);
  signer_->sign(&context_, agent::rpc::kSubmitJobMethod, request);
  hvd::logging::program("client")->debug("submitting the job to the agent on {} ({})", config_.host,
                                         config_.address);
  reader_ = stub_->SubmitJob(&context_, request);
  thread_ = std::thread([this] {
    agent::common::runGuarded(
        "hvdrun: job stream reader", [this] { readStream(); },
        [this](const std::string& what) { streamFailed(what); });
  });
}

void RemoteJobClient::readStream() {
  v1::JobEvent event;
  while (reader_->Read(&event)) {
    switch (event.kind_case()) {
      case v1::JobEvent::kAccepted: {
        std::lock_guard<std::mutex> lock(mutex_);
        jobId_ = event.accepted().job_id();
        accepted_ = true;
        hvd::logging::program("client")->debug("the agent on {} accepted job {}", config_.host,
                                               jobId_);
        break;
      }
      case v1::JobEvent::kOutput: {
        const v1::JobOutput& o = event.output();
        events_->onOutput(o.rank(), o.host(), agent::rpc::fromProto(o.stream()), o.line());
        break;
      }
      case v1::JobEvent::kBatch:
        for (const v1::JobOutput& o : event.batch().lines()) {
          events_->onOutput(o.rank(), o.host(), agent::rpc::fromProto(o.stream()), o.line());
        }
        break;
      case v1::JobEvent::kQueued:
        // The agent's queue: the job starts once the slots or GPUs it waits for are free.
        std::fprintf(stderr, "hvdrun: job %s is queued: %s%s\n", event.queued().job_id().c_str(),
                     event.queued().reason().c_str(),
                     config_.detached ? "" : " (waiting; Ctrl-C cancels it)");
        break;
      case v1::JobEvent::kRestarting: {
        const v1::JobRestarting& r = event.restarting();
        std::fputs(formatRestart(r.job_id(), r.restart(), r.max_restarts(), r.reason()).c_str(),
                   stderr);
        break;
      }
      case v1::JobEvent::kEnd:
        end(agent::rpc::fromProto(event.end()));
        break;
      default:
        break;  // a newer agent's event kind: nothing to do with it
    }
  }
  const grpc::Status status = reader_->Finish();
  streamFinished_ = true;
  hvd::logging::program("client")->debug("the job's stream ended: {} {}",
                                         static_cast<int>(status.error_code()),
                                         status.error_message());
  coord::JobResult result;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (ended_) return;
    result = resultWithoutEnd(status);
  }
  end(std::move(result));
}

void RemoteJobClient::streamFailed(const std::string& what) {
  if (!streamFinished_) {
    context_.TryCancel();  // the agent stops the job when its client goes
    v1::JobEvent ignored;
    while (reader_->Read(&ignored)) {
    }
    reader_->Finish();
    streamFinished_ = true;
  }
  const std::string reason = "internal error reading the job's stream: " + what;
  coord::JobResult result;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    result = makeResult(coord::JobOutcome::kAgentLost, contract::kExitInternalError,
                        "hvdrun: " + reason +
                            "; hvdrun closed the stream and the agent stops the "
                            "job",
                        reason);
  }
  end(std::move(result));  // nothing, if the job's end was what failed
}

coord::JobResult RemoteJobClient::makeResult(coord::JobOutcome outcome, int exitCode,
                                             const std::string& summary,
                                             const std::string& reason) const {
  coord::JobResult r;
  r.jobId = jobId_;
  r.outcome = outcome;
  r.exitCode = exitCode;
  r.summary = summary;
  r.host = config_.host;
  r.reason = reason;
  return r;
}

coord::JobResult RemoteJobClient::resultWithoutEnd(const grpc::Status& status) const {
  const std::string where = "agent on " + config_.host + " (" + config_.address + ")";
  if (!closedBecause_.empty()) {
    return makeResult(coord::JobOutcome::kCancelled, contract::kExitCancelled,
                      "hvdrun: job cancelled; " + closedBecause_, closedBecause_);
  }
  if (timedOut_) {
    const std::string reason = "no answer within " + seconds(config_.startTimeout);
    coord::AgentError e{config_.host, config_.address, reason};
    return makeResult(coord::JobOutcome::kAgentUnreachable, contract::kExitAgentUnreachable,
                      "hvdrun: " + e.describeUnreachable(), reason);
  }
  if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
    const std::string reason = agent::client::describeStatus(status, config_.startTimeout);
    return makeResult(coord::JobOutcome::kAgentUnreachable, contract::kExitAuthenticationFailed,
                      "hvdrun: " + where + " refused the request: " + reason +
                          " (is --key-file the cluster's key?)",
                      reason);
  }
  if (config_.detached && accepted_ && status.ok()) {
    return makeResult(coord::JobOutcome::kSucceeded, contract::kExitSuccess,
                      "hvdrun: submitted job " + jobId_, "");
  }
  const std::string reason = shortReason(status, config_.startTimeout);
  if (!accepted_) {
    if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
      return makeResult(coord::JobOutcome::kInvalidJob, contract::kExitUsage,
                        "hvdrun: " + where + " refused the job: " + reason, reason);
    }
    if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      // Its state directory is full or failing: the agent's message names it and the errno.
      return makeResult(coord::JobOutcome::kInvalidJob, contract::kExitAgentCannotRecord,
                        "hvdrun: the " + where + " " + status.error_message(),
                        status.error_message());
    }
    coord::AgentError e{config_.host, config_.address, reason};
    return makeResult(coord::JobOutcome::kAgentUnreachable, contract::kExitAgentUnreachable,
                      "hvdrun: " + e.describeUnreachable(), reason);
  }
  const std::string lost =
      status.ok() ? std::string("the agent closed the job's stream before the job ended") : reason;
  return makeResult(coord::JobOutcome::kAgentLost, contract::kExitAgentLost,
                    "hvdrun: lost the " + where + ": " + lost, lost);
}

void RemoteJobClient::end(coord::JobResult result) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (ended_) return;
    ended_ = true;
    result_ = result;
  }
  // Every output line was delivered before (one reader thread), so the owner that wakes up on
  // this finds the job's output complete.
  events_->onJobEnd(result);
}

void RemoteJobClient::cancel() {
  std::string jobId;
  int cancels = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (ended_) return;
    const auto now = steady_clock::now();
    const bool quickSecond =
        lastCancel_ && now - *lastCancel_ <= coord::JobCoordinator::kCancelEscalationWindow;
    lastCancel_ = now;
    cancels = ++cancels_;
    if (!accepted_) {
      if (!quickSecond) {
        cancelPending_ = true;  // sent by tick() once the job id is known
        return;
      }
    } else if (cancels_ < 3) {
      jobId = jobId_;
    }
  }
  if (jobId.empty()) {
    closeStream(cancels >= 3 ? "the stream was closed after a third Ctrl-C; the agent stops "
                               "the job"
                             : "the stream was closed before the agent accepted the job");
    return;
  }
  sendCancel(jobId);
}

void RemoteJobClient::tick() {
  std::string jobId;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (ended_ || reader_ == nullptr) return;
    if (!accepted_) {
      if (steady_clock::now() >= startDeadline_ && !timedOut_) {
        timedOut_ = true;
        context_.TryCancel();
      }
      return;
    }
    if (!cancelPending_) return;
    cancelPending_ = false;
    jobId = jobId_;
  }
  sendCancel(jobId);
}

void RemoteJobClient::sendCancel(const std::string& jobId) {
  v1::CancelJobRequest request;
  request.set_job_id(jobId);
  v1::CancelJobResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + config_.cancelTimeout);
  signer_->sign(&context, agent::rpc::kCancelJobMethod, request);
  const grpc::Status status = stub_->CancelJob(&context, request, &response);
  if (status.ok() || status.error_code() == grpc::StatusCode::NOT_FOUND) {
    // NOT_FOUND: the job ended on its own meanwhile; its JobEnd is on the way.
    hvd::logging::program("client")->debug("CancelJob {}: {}", jobId,
                                           status.ok() ? "sent" : "job already over");
    return;
  }
  closeStream("the agent did not take the cancel (" +
              agent::client::describeStatus(status, config_.cancelTimeout) +
              "), so hvdrun closed the stream and the agent stops the job");
}

void RemoteJobClient::closeStream(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (ended_) return;
    closedBecause_ = why;
  }
  context_.TryCancel();
}

bool RemoteJobClient::finished() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ended_;
}

std::optional<coord::JobResult> RemoteJobClient::result() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return result_;
}

std::string RemoteJobClient::jobId() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return jobId_;
}

}  // namespace hvd::launcher
