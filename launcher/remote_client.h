// hvdrun's side of a remote job (docs/architecture.md "How a job flows", step 2): one SubmitJob
// stream to the leader agent, read by a thread that hands the job's output to ClientEvents and ends
// with the leader's JobEnd. It mirrors JobCoordinator's surface (start, cancel, tick, finished,
// result), so hvdrun's main loop drives either mode the same way.
//
// Everything that can go wrong becomes a JobResult, like the coordinator's own outcomes, so
// hvdrun prints and exits the same way for all of them:
//   * no answer: connection refused (at once: the call does not wait for the channel to become
//     ready) or nothing within the start deadline -> kAgentUnreachable, exit 69,
//     "hvdrun: agent on H (A) is unreachable: <reason>";
//   * UNAUTHENTICATED -> exit 69, "hvdrun: agent on H (A) refused the request: authentication
//     failed: <why> (is --key-file the cluster's key?)";
//   * INVALID_ARGUMENT before the job was accepted -> kInvalidJob, exit 2;
//   * the stream breaks after the job was accepted but before JobEnd -> kAgentLost, exit 75,
//     "hvdrun: lost the agent on H (A): <reason>" (the agent stops the job when its client goes).
//
// Ctrl-C: cancel() sends a signed CancelJob with a deadline (a second one within 2 s makes the
// agent escalate to SIGKILL) and the job's JobEnd is still awaited. A cancel before the job id
// is known is sent once JobAccepted arrives; a cancel the agent cannot take, a second Ctrl-C
// before acceptance, or a third Ctrl-C, closes the stream instead (the agent then stops the job
// by itself) and ends the job as cancelled.
//
// Thread-safe: cancel(), tick(), finished() and result() come from the main thread while the
// reader thread delivers events; ClientEvents calls are made without holding the lock.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "agent/coordinator/job_coordinator.h"
#include "agent/rpc/call_auth.h"
#include "hvd/v1/agent.grpc.pb.h"

namespace hvd::launcher {

struct RemoteJobConfig {
  std::string host;     // the leader host as the user named it (hosts[0])
  std::string address;  // where its agent is contacted, "host:port"
  // How long the leader may take to accept the job (its first event, JobAccepted, which the
  // agent sends before describing the other hosts); also the connect timeout the leader uses
  // for the other agents.
  std::chrono::milliseconds startTimeout{10000};
  std::chrono::milliseconds cancelTimeout{5000};  // deadline of each CancelJob call
  // hvdrun submit: the stream ends after JobAccepted once the job runs, which is success
  // (kSucceeded, exit 0); a JobEnd on it means the job could not start.
  bool detached = false;
};

class RemoteJobClient {
 public:
  // `signer` and `events` must outlive the client.
  RemoteJobClient(std::shared_ptr<grpc::Channel> channel, agent::rpc::CallSigner* signer,
                  RemoteJobConfig config, agent::coordinator::ClientEvents* events);
  // Closes a stream still open (the agent stops its job) and joins the reader thread.
  ~RemoteJobClient();

  RemoteJobClient(const RemoteJobClient&) = delete;
  RemoteJobClient& operator=(const RemoteJobClient&) = delete;

  // Opens the signed SubmitJob stream and starts reading it. Call once.
  void start(const v1::SubmitJobRequest& request);
  // Ctrl-C (see above). Returns at once when the job already ended.
  void cancel();
  // Called periodically by the owner: enforces the start deadline and sends a cancel that was
  // waiting for the job id.
  void tick();

  bool finished() const;
  std::optional<agent::coordinator::JobResult> result() const;
  // The job id from JobAccepted; empty before.
  std::string jobId() const;

 private:
  void readStream();
  // readStream's way out after an exception: the stream counts as lost, the job as stopped.
  void streamFailed(const std::string& what);
  // The result when the stream ended without JobEnd.
  agent::coordinator::JobResult resultWithoutEnd(const grpc::Status& status) const;
  agent::coordinator::JobResult makeResult(agent::coordinator::JobOutcome outcome, int exitCode,
                                           const std::string& summary,
                                           const std::string& reason) const;
  // Records `result` and tells the events, once; later calls do nothing.
  void end(agent::coordinator::JobResult result);
  // Sends CancelJob; on failure closes the stream (the agent stops the job when its client goes).
  void sendCancel(const std::string& jobId);
  void closeStream(const std::string& why);

  const RemoteJobConfig config_;
  agent::rpc::CallSigner* const signer_;
  agent::coordinator::ClientEvents* const events_;
  std::unique_ptr<v1::Agent::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReader<v1::JobEvent>> reader_;
  std::thread thread_;
  bool streamFinished_ = false;  // reader_->Finish() was called (reader thread only)

  mutable std::mutex mutex_;
  std::chrono::steady_clock::time_point startDeadline_;
  std::string jobId_;
  bool accepted_ = false;
  bool timedOut_ = false;       // tick() gave up waiting for the first event
  std::string closedBecause_;   // non-empty: we closed the stream after a cancel
  bool cancelPending_ = false;  // a cancel waits for the job id
  int cancels_ = 0;
  std::optional<std::chrono::steady_clock::time_point> lastCancel_;
  bool ended_ = false;  // result_ is set
  std::optional<agent::coordinator::JobResult> result_;
};

}  // namespace hvd::launcher
