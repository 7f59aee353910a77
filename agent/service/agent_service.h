// hvdagent's gRPC service (proto/hvd/v1/agent.proto; docs/architecture.md "How a job
// flows", "Security", "Failure semantics"): a thin adapter from hvd.v1.Agent onto the domain
// pieces.
//
//   Describe   agent/node/node_facts.h
//   Launch     HostLaunch (agent/jobs/host_launch.h: this node's share of a job and the hosts it
//              relays to): the first event says whether every rank started, then output and
//              exits until the last rank is gone. A caller that goes away gets its ranks
//              stopped (its stop signal, grace, SIGKILL): no worker outlives the job's leader.
//   Stop       LocalHost::stop.
//   Relay      a Describe, Reserve, Unreserve, Stop or Launch may also be for other hosts
//              (proto Relay: the subtree of a relay tree beyond the leader's width): this agent
//              calls them through relay::TreeHosts and answers for each (relay_calls.cc); a
//              relayed Launch carries their events on its stream, and their lost agents as
//              HostLost.
//   Reserve, Unreserve  this node's ledger (agent/ledger): a leader holds its job's share here
//              before any rank starts anywhere; Launch binds it, the job's release returns it.
//   SubmitJob  LedJobs (led_jobs.h): the job runs on the leader whoever is connected. JobAccepted,
//              then for an attached run the job's output from its log and JobEnd (a client
//              that goes away cancels an attached run); a detached one (hvdrun submit) ends
//              once every rank started, or with JobEnd when the job could not start.
//   CancelJob  a graceful stop of a job this agent leads; a finished job is left as it was.
//   ListJobs, GetJob, JobLogs  the records and logs of JobHistory (job_history.h, job_log.h).
//
// Every handler first passes rpc::CallGuard::check (one place for authentication, before any
// request field is looked at). Nothing throws across the gRPC boundary: domain errors become
// status codes (INVALID_ARGUMENT for hvd::InvalidArgumentError, ...). Secrets (store tokens, the
// jobs' environment values) are never logged.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "agent/coordinator/job_coordinator.h"
#include "agent/coordinator/node_agent.h"
#include "agent/jobs/host_launch.h"
#include "agent/jobs/led_jobs.h"
#include "agent/jobs/local_host.h"
#include "agent/node/gpu_discovery.h"
#include "agent/node/node_facts.h"
#include "agent/records/job_history.h"
#include "agent/records/job_log.h"
#include "agent/relay/detached_trees.h"
#include "agent/relay/tree_hosts.h"
#include "agent/rpc/call_auth.h"
#include "hvd/v1/agent.grpc.pb.h"

namespace hvd::store {
class TcpStoreServer;
}

namespace hvd::agent::service {

struct AgentServiceOptions {
  // The IP the agent serves on (a wildcard: every address); MASTER_PORT is picked there.
  std::string listenHost = "127.0.0.1";
  bool tlsEnabled = false;  // reported in Describe's features
  // Describe/Launch timeout of the other agents when the request gives none.
  std::chrono::milliseconds defaultConnectTimeout{5000};
  // At agent shutdown, running jobs get their stop signal with at most this grace.
  std::chrono::milliseconds shutdownGrace{5000};
  uint64_t maxLogBytes = uint64_t{1} << 30;  // per led job (--max-log-mb)
  // Empty: jobs with more than one host are refused.
  jobs::RemoteAgentFactory remoteAgents;
  // This node's ledger (the one the LocalHost reserves in); its releases wake the queue.
  ledger::ResourceLedger* ledger = nullptr;
};

class AgentService final : public v1::Agent::Service {
 public:
  // guard, local (this node), gpus (may be null), store (started) and history must outlive the
  // service.
  AgentService(AgentServiceOptions options, rpc::CallGuard* guard, jobs::LocalHost* local,
               node::GpuDiscovery* gpus, store::TcpStoreServer* store,
               records::JobHistory* history);

  // Agent shutdown: new Launch/SubmitJob calls are refused (UNAVAILABLE), led jobs are
  // cancelled and local jobs stopped (shutdownGrace). The launches of elastic jobs led by other
  // agents (drainable) are drained first: their leaders are told this host is leaving, their
  // workers get up to shutdownGrace to leave the job at their next commit, and whatever is left
  // then is stopped. Blocks for that wait (at most shutdownGrace). Handlers then end as their
  // ranks exit.
  void shutdown();
  // Waits until every led job has ended (after shutdown(): within its grace).
  void join();
  // At start-up: queued submitted jobs of the previous agent wait in this one's queue again.
  int resumeQueued() { return led_->resumeQueued(); }
  // The jobs this agent leads, for readers beside the service (the daemon's metrics).
  const jobs::LedJobs& ledJobs() const { return *led_; }

  grpc::Status Describe(grpc::ServerContext* context, const v1::DescribeRequest* request,
                        v1::DescribeResponse* response) override;
  grpc::Status Launch(grpc::ServerContext* context, const v1::LaunchRequest* request,
                      grpc::ServerWriter<v1::RankEvent>* writer) override;
  grpc::Status Stop(grpc::ServerContext* context, const v1::StopRequest* request,
                    v1::StopResponse* response) override;
  grpc::Status Reserve(grpc::ServerContext* context, const v1::ReserveRequest* request,
                       v1::ReserveResponse* response) override;
  grpc::Status Unreserve(grpc::ServerContext* context, const v1::UnreserveRequest* request,
                         v1::UnreserveResponse* response) override;
  grpc::Status SubmitJob(grpc::ServerContext* context, const v1::SubmitJobRequest* request,
                         grpc::ServerWriter<v1::JobEvent>* writer) override;
  grpc::Status CancelJob(grpc::ServerContext* context, const v1::CancelJobRequest* request,
                         v1::CancelJobResponse* response) override;
  grpc::Status ListJobs(grpc::ServerContext* context, const v1::ListJobsRequest* request,
                        v1::ListJobsResponse* response) override;
  grpc::Status GetJob(grpc::ServerContext* context, const v1::GetJobRequest* request,
                      v1::JobInfo* response) override;
  grpc::Status JobLogs(grpc::ServerContext* context, const v1::JobLogsRequest* request,
                       grpc::ServerWriter<v1::JobLogsEvent>* writer) override;

  // How often a streaming handler looks at its caller while waiting for events.
  static constexpr std::chrono::milliseconds kPollInterval{150};

 private:
  grpc::Status runLaunch(grpc::ServerContext* context, const v1::LaunchRequest& request,
                         grpc::ServerWriter<v1::RankEvent>* writer);
  grpc::Status runSubmit(grpc::ServerContext* context, const v1::SubmitJobRequest& request,
                         grpc::ServerWriter<v1::JobEvent>* writer);
  grpc::Status runJobLogs(grpc::ServerContext* context, const v1::JobLogsRequest& request,
                          grpc::ServerWriter<v1::JobLogsEvent>* writer);
  grpc::Status notFound(const std::string& jobId) const;
  node::NodeFacts describeNode();
  bool shuttingDown() const;
  // The hosts a relayed call names (relay_calls.cc), as a relay tree of this agent's links; null
  // when it names none. Throws InvalidArgumentError for a malformed relay.
  std::unique_ptr<relay::TreeHosts> subtreeOf(const v1::Relay& relay);
  void relayDescribe(const v1::DescribeRequest& request, v1::DescribeResponse* response);
  void relayReserve(const v1::ReserveRequest& request, v1::ReserveResponse* response);
  void relayUnreserve(const v1::UnreserveRequest& request);
  void relayStop(const v1::StopRequest& request, int signal);

  const AgentServiceOptions options_;
  rpc::CallGuard* const guard_;
  jobs::LocalHost* const local_;
  node::GpuDiscovery* const gpus_;
  records::JobHistory* const history_;

  std::mutex describeMutex_;  // GpuDiscovery is not thread-safe
  mutable std::mutex mutex_;
  bool shuttingDown_ = false;
  std::set<jobs::HostLaunch*> launches_;  // the Launch calls running now
  std::condition_variable launchEnded_;   // one of launches_ ended
  relay::DetachedTrees detached_;         // relayed Stops and Unreserves still in flight
  std::unique_ptr<jobs::LedJobs> led_;    // last: its jobs use everything above
};

// Logged lines as the messages that carry them (JobLogs and attached runs): batches of at most
// kLinesPerBatch lines or about kBytesPerBatch bytes, so a chatty job costs a few messages per
// read rather than one per line. `live`: lines of an attached run, whose client stamps its own
// time (unix_ms 0).
inline constexpr size_t kLinesPerBatch = 1024;
inline constexpr size_t kBytesPerBatch = size_t{1} << 20;
std::vector<v1::JobOutputBatch> toBatches(const std::vector<records::LogLine>& lines, bool live);

// Maps an exception escaping a handler to a status: INVALID_ARGUMENT (InvalidArgumentError),
// DEADLINE_EXCEEDED (TimeoutError), UNAVAILABLE (PeerError), INTERNAL otherwise.
grpc::Status statusFromException(std::exception_ptr error);

}  // namespace hvd::agent::service
