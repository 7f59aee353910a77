// hvdagent's gRPC service (proto/hvd/v1/agent.proto; issue 3, DESIGN.md "How a job flows",
// "Security", "Failure semantics"): a thin adapter from hvd.v1.Agent onto the domain pieces.
//
//   Describe   node_facts.h
//   Launch     LocalJobs (this node's share of a job): the first event says whether every rank
//              started, then output and exits until the last rank is gone. A caller that goes
//              away gets its ranks stopped (its stop signal, grace, SIGKILL): no worker outlives
//              the job's leader.
//   Stop       LocalJobs::stop.
//   SubmitJob  the leader's JobCoordinator over this node (LocalHostAgent) and the other hosts'
//              agents (RemoteAgentFactory), with a per-job token on the agent's one job store.
//              JobAccepted, output, JobEnd. A client that goes away cancels the job.
//   CancelJob  JobCoordinator::cancel of a job this agent leads.
//
// Every handler first passes rpc::CallGuard::check (one place for authentication, before any
// request field is looked at). Nothing throws across the gRPC boundary: domain errors become
// status codes (INVALID_ARGUMENT for hvd::InvalidArgumentError, ...). Secrets (store tokens, the
// jobs' environment values) are never logged.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "agent/coordinator/job_coordinator.h"
#include "agent/coordinator/node_agent.h"
#include "agent/node/gpu_discovery.h"
#include "agent/rpc/call_auth.h"
#include "agent/service/local_jobs.h"
#include "agent/service/node_facts.h"
#include "hvd/v1/agent.grpc.pb.h"

namespace hvd::store {
class TcpStoreServer;
}

namespace hvd::agent::service {

// Another host of a submitted job, as the leader reaches it.
struct RemoteHost {
  std::string host;     // as the user named it
  std::string address;  // "host:port" of its hvdagent
  std::chrono::milliseconds callTimeout{5000};
};

// Builds the NodeAgent of another host (hvdagent: client::RemoteNodeAgent with this agent's TLS
// options and key). Its destructor must cancel its streams and deliver no event afterwards.
using RemoteAgentFactory =
    std::function<std::unique_ptr<coordinator::NodeAgent>(const RemoteHost& host)>;

struct AgentServiceOptions {
  // The IP the agent serves on (a wildcard: every address); MASTER_PORT is picked there.
  std::string listenHost = "127.0.0.1";
  bool tlsEnabled = false;  // reported in Describe's features
  // Describe/Launch timeout of the other agents when the request gives none.
  std::chrono::milliseconds defaultConnectTimeout{5000};
  // At agent shutdown, running jobs get their stop signal with at most this grace.
  std::chrono::milliseconds shutdownGrace{5000};
  // Empty: jobs with more than one host are refused.
  RemoteAgentFactory remoteAgents;
};

class AgentService final : public v1::Agent::Service {
 public:
  // guard, jobs, gpus (may be null) and store (started) must outlive the service.
  AgentService(AgentServiceOptions options, rpc::CallGuard* guard, LocalJobs* jobs,
               node::GpuDiscovery* gpus, store::TcpStoreServer* store);

  // Agent shutdown: new Launch/SubmitJob calls are refused (UNAVAILABLE), coordinated jobs are
  // cancelled and local jobs stopped (shutdownGrace). Handlers then end as their ranks exit.
  void shutdown();

  grpc::Status Describe(grpc::ServerContext* context, const v1::DescribeRequest* request,
                        v1::DescribeResponse* response) override;
  grpc::Status Launch(grpc::ServerContext* context, const v1::LaunchRequest* request,
                      grpc::ServerWriter<v1::RankEvent>* writer) override;
  grpc::Status Stop(grpc::ServerContext* context, const v1::StopRequest* request,
                    v1::StopResponse* response) override;
  grpc::Status SubmitJob(grpc::ServerContext* context, const v1::SubmitJobRequest* request,
                         grpc::ServerWriter<v1::JobEvent>* writer) override;
  grpc::Status CancelJob(grpc::ServerContext* context, const v1::CancelJobRequest* request,
                         v1::CancelJobResponse* response) override;

  // How often a streaming handler looks at its caller while waiting for events.
  static constexpr std::chrono::milliseconds kPollInterval{150};

 private:
  grpc::Status runLaunch(grpc::ServerContext* context, const v1::LaunchRequest& request,
                         grpc::ServerWriter<v1::RankEvent>* writer);
  grpc::Status runSubmit(grpc::ServerContext* context, const v1::SubmitJobRequest& request,
                         grpc::ServerWriter<v1::JobEvent>* writer);
  NodeFacts describeNode();
  bool shuttingDown() const;

  const AgentServiceOptions options_;
  rpc::CallGuard* const guard_;
  LocalJobs* const jobs_;
  node::GpuDiscovery* const gpus_;
  store::TcpStoreServer* const store_;

  std::mutex describeMutex_;  // GpuDiscovery is not thread-safe
  mutable std::mutex mutex_;
  bool shuttingDown_ = false;
  // Jobs this agent leads, for CancelJob and shutdown. A handler removes its entry (under
  // mutex_) before its coordinator is destroyed, so a pointer found here is valid under mutex_.
  std::map<std::string, coordinator::JobCoordinator*> led_;
};

// Maps an exception escaping a handler to a status: INVALID_ARGUMENT (InvalidArgumentError),
// DEADLINE_EXCEEDED (TimeoutError), UNAVAILABLE (PeerError), INTERNAL otherwise.
grpc::Status statusFromException(std::exception_ptr error);

}  // namespace hvd::agent::service
