// SubmitJob: this agent leads a job (DESIGN.md "How a job flows", steps 3 and 6). The job
// coordinator runs here over this node (LocalHostAgent, through the same LocalJobs as Launch)
// and the other hosts' agents (RemoteAgentFactory); the job's rendezvous store is the agent's one
// TcpStoreServer with a per-job token. The handler thread owns the job: it writes JobAccepted,
// then the output the coordinator forwards, then JobEnd, and paces coordinator.tick(). A client
// that goes away (hvdrun killed, connection lost) cancels the job, which still stops properly.
#include <spdlog/spdlog.h>

#include <memory>
#include <vector>

#include "agent/auth/cluster_key.h"
#include "agent/coordinator/exit_codes.h"
#include "agent/rpc/convert.h"
#include "agent/rpc/methods.h"
#include "agent/rpc/net.h"
#include "agent/service/agent_service.h"
#include "agent/service/event_queue.h"
#include "hvd/error.hpp"
#include "store/tcp_store_server.h"

namespace hvd::agent::service {
namespace {

namespace coord = coordinator;

using auth::randomHex;

// "<job_name or job>-<8 hex>", the name reduced to characters safe in logs and file names.
std::string makeJobId(const std::string& name) {
  std::string prefix;
  for (char c : name.substr(0, 64)) {
    const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '_' || c == '.';
    prefix += safe ? c : '_';
  }
  if (prefix.empty()) prefix = "job";
  return prefix + "-" + randomHex(4);
}

// The coordinator's client: output and the end, in proto form, into the handler's queue.
class JobEventQueue final : public coord::ClientEvents {
 public:
  explicit JobEventQueue(EventQueue<v1::JobEvent>* queue) : queue_(queue) {}

  void onOutput(int rank, const std::string& host, process::Stream stream,
                std::string_view line) override {
    size_t dropped = 0;
    if (!budget_.admit(rank, line.size(), queue_->queuedBytes(), &dropped)) return;
    if (dropped > 0) {
      pushOutput(rank, host, process::Stream::kStderr, OutputBudget::notice(dropped));
    }
    pushOutput(rank, host, stream, line);
  }
  void onJobEnd(const coord::JobResult& result) override {
    for (const auto& [rank, dropped] : budget_.takeAllDropped()) {
      pushOutput(rank, "", process::Stream::kStderr, OutputBudget::notice(dropped));
    }
    v1::JobEvent event;
    *event.mutable_end() = rpc::toProto(result);
    queue_->push(std::move(event));
  }

 private:
  void pushOutput(int rank, const std::string& host, process::Stream stream,
                  std::string_view line) {
    v1::JobEvent event;
    v1::JobOutput* out = event.mutable_output();
    out->set_rank(rank);
    out->set_host(host);
    out->set_stream(rpc::toProto(stream));
    out->set_line(line.data(), line.size());
    queue_->push(std::move(event), line.size());
  }

  EventQueue<v1::JobEvent>* const queue_;
  OutputBudget budget_;
};

v1::JobEvent invalidJobEnd(const std::string& jobId, const std::string& reason) {
  coord::JobResult result;
  result.jobId = jobId;
  result.outcome = coord::JobOutcome::kInvalidJob;
  result.exitCode = coord::kExitUsage;
  result.summary = "hvdrun: " + reason;
  result.reason = reason;
  v1::JobEvent event;
  *event.mutable_end() = rpc::toProto(result);
  return event;
}

// Why the request cannot run as a job, or empty.
std::string refusal(const coord::JobSpec& spec, const v1::SubmitJobRequest& request,
                    bool canReachOthers) {
  if (spec.hosts.size() <= 1) return {};
  if (rpc::isLoopbackName(spec.hosts[0].host)) {
    return "the first host '" + spec.hosts[0].host +
           "' is a loopback name, which the other hosts cannot reach; name it by an address or "
           "hostname they can resolve";
  }
  if (!canReachOthers) return "this agent cannot reach other agents (no remote agent support)";
  for (int i = 1; i < request.hosts_size(); ++i) {
    if (request.hosts(i).agent_address().empty()) {
      return "host '" + request.hosts(i).host() + "' has no agent address";
    }
  }
  return {};
}

}  // namespace

grpc::Status AgentService::SubmitJob(grpc::ServerContext* context,
                                     const v1::SubmitJobRequest* request,
                                     grpc::ServerWriter<v1::JobEvent>* writer) {
  if (grpc::Status s = guard_->check(*context, rpc::kSubmitJobMethod, *request); !s.ok()) {
    return s;
  }
  try {
    return runSubmit(context, *request, writer);
  } catch (...) {
    return statusFromException(std::current_exception());
  }
}

grpc::Status AgentService::runSubmit(grpc::ServerContext* context,
                                     const v1::SubmitJobRequest& request,
                                     grpc::ServerWriter<v1::JobEvent>* writer) {
  coord::JobSpec spec = rpc::fromProto(request);  // InvalidArgumentError: INVALID_ARGUMENT
  if (shuttingDown()) return {grpc::StatusCode::UNAVAILABLE, "the agent is shutting down"};
  spec.jobId = makeJobId(request.job_name());
  const std::string& jobId = spec.jobId;

  v1::JobEvent accepted;
  accepted.mutable_accepted()->set_job_id(jobId);
  if (!writer->Write(accepted)) return {grpc::StatusCode::CANCELLED, "the client went away"};

  if (std::string why = refusal(spec, request, static_cast<bool>(options_.remoteAgents));
      !why.empty()) {
    spdlog::warn("hvdagent: job {} refused: {}", jobId, why);
    writer->Write(invalidJobEnd(jobId, why));
    return grpc::Status::OK;
  }
  spdlog::info("hvdagent: job {}: np {} on {} host(s), '{}', submitted by {}", jobId, spec.np,
               spec.hosts.size(), spec.argv[0], context->peer());

  // The store: this agent's one server; the token reaches the ranks only through their env.
  const std::string token = randomHex(32);
  store_->addJob(jobId, token);
  struct RemoveStoreJob {
    store::TcpStoreServer* store;
    const std::string& id;
    ~RemoveStoreJob() { store->removeJob(id); }
  } removeStoreJob{store_, jobId};
  const coord::StoreEndpoint storeEndpoint{rpc::joinHostPort(spec.hosts[0].host, store_->port()),
                                           token};
  const int masterPort = rpc::pickFreePort(options_.listenHost);
  if (masterPort > 0) spec.masterPort = masterPort;

  // Agents: this node first, then one per other host.
  LocalHostAgent local(spec.hosts[0].host, jobs_, [this] { return describeNode().node; });
  std::vector<std::unique_ptr<coord::NodeAgent>> remotes;
  std::vector<coord::NodeAgent*> agents = {&local};
  const std::chrono::milliseconds timeout =
      request.connect_timeout_ms() > 0 ? std::chrono::milliseconds(request.connect_timeout_ms())
                                       : options_.defaultConnectTimeout;
  for (int i = 1; i < request.hosts_size(); ++i) {
    remotes.push_back(options_.remoteAgents(
        {request.hosts(i).host(), request.hosts(i).agent_address(), timeout}));
    agents.push_back(remotes.back().get());
  }

  EventQueue<v1::JobEvent> queue;
  JobEventQueue client(&queue);
  coord::SteadyClock clock;
  coord::JobCoordinator coordinator(spec, agents, storeEndpoint, &client, &clock);
  // Runs before the coordinator is destroyed (declared after it): no agent may deliver an event
  // to it afterwards, and CancelJob must no longer find it.
  struct Teardown {
    AgentService* self;
    const std::string& id;
    LocalHostAgent& local;
    std::vector<std::unique_ptr<coord::NodeAgent>>& remotes;
    ~Teardown() {
      {
        std::lock_guard<std::mutex> lock(self->mutex_);
        self->led_.erase(id);
      }
      remotes.clear();  // RemoteNodeAgent: cancels its streams, joins its threads
      local.finish();   // releases the local group: leftovers SIGKILLed, ranks reaped
    }
  } teardown{this, jobId, local, remotes};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (shuttingDown_) {
      writer->Write(invalidJobEnd(jobId, "the agent is shutting down"));
      return grpc::Status::OK;
    }
    led_[jobId] = &coordinator;
  }

  coordinator.start();
  bool clientGone = false;
  bool cancelled = false;
  bool ended = false;
  const auto deliver = [&](std::vector<v1::JobEvent> events) {
    for (v1::JobEvent& event : events) {
      if (ended) break;  // output of leftovers after the end is dropped
      if (event.has_end()) ended = true;
      if (!clientGone && !writer->Write(event)) clientGone = true;
    }
  };
  // Until JobEnd is through the queue, not until finished(): the coordinator reports the end to
  // its client just after it marks the job finished, possibly from another thread.
  while (!ended) {
    deliver(queue.popAll(kPollInterval));
    if (ended) break;
    if (!clientGone && context->IsCancelled()) clientGone = true;
    if (clientGone && !cancelled) {
      spdlog::warn("hvdagent: job {}: client {} went away; stopping the job", jobId,
                   context->peer());
      coordinator.cancel();
      cancelled = true;
    }
    coordinator.tick();
  }
  if (const std::optional<coord::JobResult> result = coordinator.result()) {
    spdlog::info("hvdagent: job {}: ended, exit code {}: {}", jobId, result->exitCode,
                 result->summary);
  }
  if (clientGone) return {grpc::StatusCode::CANCELLED, "the client went away"};
  return grpc::Status::OK;
}

}  // namespace hvd::agent::service
