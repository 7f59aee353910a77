// Describe, Launch, Stop, CancelJob and the service's plumbing; SubmitJob is in submit_job.cc.
#include "agent/service/agent_service.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <exception>
#include <optional>
#include <set>
#include <thread>

#include "agent/common/thread_guard.h"
#include "agent/jobs/host_launch.h"
#include "agent/rpc/convert.h"
#include "agent/rpc/methods.h"
#include "agent/service/job_log_stream.h"
#include "hvd/error.hpp"
#include "hvd_support/logging.h"

namespace hvd::agent::service {
namespace {

// Describe's view of the ledger: one entry per GPU and the job holding it (a shared GPU has one
// per job), for `hvdrun doctor`.
void addGpuHoldings(const std::vector<ledger::Holding>& holdings, v1::DescribeResponse* response) {
  for (const ledger::Holding& holding : holdings) {
    for (int gpu : holding.gpus) {
      v1::GpuHolding* out = response->add_gpu_holdings();
      out->set_gpu_index(gpu);
      out->set_job_id(holding.job);
    }
  }
}

// One Launch's caller: the gRPC stream its events are written to, in proto form.
class LaunchStream final : public jobs::LaunchCaller {
 public:
  LaunchStream(grpc::ServerContext* context, grpc::ServerWriter<v1::RankEvent>* writer)
      : context_(context), writer_(writer) {}

  bool launched(const coordinator::LaunchStatus& status) override {
    v1::RankEvent event;
    *event.mutable_launched() = rpc::toProto(status);
    return writer_->Write(event);
  }
  bool write(const jobs::LaunchEvent& e) override {
    v1::RankEvent event;
    switch (e.kind) {
      case jobs::LaunchEvent::Kind::kOutput: {
        v1::RankOutput* out = event.mutable_output();
        out->set_rank(e.rank);
        out->set_stream(rpc::toProto(e.stream));
        out->set_line(e.line);
        break;
      }
      case jobs::LaunchEvent::Kind::kExit:
        event.mutable_exit()->set_rank(e.rank);
        event.mutable_exit()->set_exit_code(e.exit.exitCode);
        event.mutable_exit()->set_signal(e.exit.signal);
        break;
      case jobs::LaunchEvent::Kind::kHostLaunched:
        event.mutable_host_launched()->set_host(e.host);
        *event.mutable_host_launched()->mutable_result() = rpc::toProto(e.result);
        break;
      case jobs::LaunchEvent::Kind::kHostLost:
        event.mutable_host_lost()->set_host(e.host);
        event.mutable_host_lost()->set_reason(e.reason);
        break;
      case jobs::LaunchEvent::Kind::kDraining:
        event.mutable_draining()->set_host(e.host);
        break;
    }
    return writer_->Write(event);
  }
  bool gone() override { return context_->IsCancelled(); }

 private:
  grpc::ServerContext* const context_;
  grpc::ServerWriter<v1::RankEvent>* const writer_;
};

// Runs `body`, turning anything it throws into a status.
template <typename Body>
grpc::Status guarded(Body&& body) {
  try {
    return body();
  } catch (...) {
    return statusFromException(std::current_exception());
  }
}

}  // namespace

grpc::Status statusFromException(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const InvalidArgumentError& e) {
    return {grpc::StatusCode::INVALID_ARGUMENT, e.what()};
  } catch (const TimeoutError& e) {
    return {grpc::StatusCode::DEADLINE_EXCEEDED, e.what()};
  } catch (const PeerError& e) {
    return {grpc::StatusCode::UNAVAILABLE, e.what()};
  } catch (const records::StateWriteError& e) {
    // Not the caller's fault and not a bug: the agent's disk. hvdrun says so (exit 74).
    hvd::logging::program("service")->error("{}", e.what());
    return {grpc::StatusCode::RESOURCE_EXHAUSTED, e.what()};
  } catch (const std::exception& e) {
    hvd::logging::program("service")->error("internal error: {}", e.what());
    return {grpc::StatusCode::INTERNAL, e.what()};
  } catch (...) {
    hvd::logging::program("service")->error("internal error of unknown type");
    return {grpc::StatusCode::INTERNAL, "internal error"};
  }
}

AgentService::AgentService(AgentServiceOptions options, rpc::CallGuard* guard,
                           jobs::LocalHost* local, node::GpuDiscovery* gpus,
                           store::TcpStoreServer* store, records::JobHistory* history)
    : options_(std::move(options)), guard_(guard), local_(local), gpus_(gpus), history_(history) {
  jobs::LedJobsOptions led;
  led.listenHost = options_.listenHost;
  led.defaultConnectTimeout = options_.defaultConnectTimeout;
  led.maxLogBytes = options_.maxLogBytes;
  led.remoteAgents = options_.remoteAgents;
  led.describeLocal = [this] { return describeNode().node; };
  led.ledger = options_.ledger;
  led_ = std::make_unique<jobs::LedJobs>(std::move(led), local_, store, history_);
}

void AgentService::shutdown() {
  std::set<std::string> draining;  // the job ids of the drainable launches here
  {
    std::lock_guard<std::mutex> lock(mutex_);
    shuttingDown_ = true;
    for (jobs::HostLaunch* launch : launches_) {
      if (!launch->drainable()) continue;
      launch->drain();
      draining.insert(launch->jobId());
    }
  }
  led_->shutdown();
  if (draining.empty()) {
    local_->stopAll(options_.shutdownGrace);
    return;
  }
  // Their leaders were told: the workers leave at their next commit, without rollback, which
  // is worth the grace (a stop now would be a failure, and cost the survivors their last steps).
  // Everything else stops now, as ever; what has not left when the grace ends is stopped.
  const auto deadline = std::chrono::steady_clock::now() + options_.shutdownGrace;
  local_->stopAll(options_.shutdownGrace, draining);
  hvd::logging::program("service")->info(
      "draining {} launch(es) of elastic jobs led elsewhere: their workers have up to {} ms to "
      "leave",
      draining.size(), options_.shutdownGrace.count());
  {
    std::unique_lock<std::mutex> lock(mutex_);
    launchEnded_.wait_until(lock, deadline, [&] {
      for (jobs::HostLaunch* launch : launches_) {
        if (draining.count(launch->jobId()) != 0) return false;
      }
      return true;
    });
  }
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  local_->stopAll(std::max(left, std::chrono::milliseconds(0)));
}

void AgentService::join() { led_->join(); }

bool AgentService::shuttingDown() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return shuttingDown_;
}

node::NodeFacts AgentService::describeNode() {
  std::lock_guard<std::mutex> lock(describeMutex_);
  return node::collectNodeFacts(gpus_, options_.tlsEnabled);
}

grpc::Status AgentService::Describe(grpc::ServerContext* context,
                                    const v1::DescribeRequest* request,
                                    v1::DescribeResponse* response) {
  if (grpc::Status s = guard_->check(*context, rpc::kDescribeMethod, *request); !s.ok()) return s;
  return guarded([&] {
    *response = rpc::toProto(describeNode());
    if (options_.ledger != nullptr) addGpuHoldings(options_.ledger->holdings(), response);
    relayDescribe(*request, response);
    // Last, so that it is as close as it can be to the answer leaving: hvdrun doctor takes the
    // clock offset as this minus the midpoint of its call.
    response->set_unix_time_us(std::chrono::duration_cast<std::chrono::microseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
    return grpc::Status::OK;
  });
}

grpc::Status AgentService::Launch(grpc::ServerContext* context, const v1::LaunchRequest* request,
                                  grpc::ServerWriter<v1::RankEvent>* writer) {
  if (grpc::Status s = guard_->check(*context, rpc::kLaunchMethod, *request); !s.ok()) return s;
  return guarded([&] { return runLaunch(context, *request, writer); });
}

grpc::Status AgentService::runLaunch(grpc::ServerContext* context, const v1::LaunchRequest& proto,
                                     grpc::ServerWriter<v1::RankEvent>* writer) {
  if (proto.job_id().empty()) throw InvalidArgumentError("the launch request has no job id");
  if (proto.ranks().empty()) throw InvalidArgumentError("the launch request has no ranks");
  if (shuttingDown()) return {grpc::StatusCode::UNAVAILABLE, "the agent is shutting down"};
  // The relayed hosts' launches (the subtree of a relay tree), checked before anything starts.
  const std::vector<relay::Target> targets = rpc::fromProto(proto.relay());
  if (proto.relayed_size() != static_cast<int>(targets.size())) {
    throw InvalidArgumentError("the launch request relays " + std::to_string(proto.relayed_size()) +
                               " launches for " + std::to_string(targets.size()) + " hosts");
  }
  std::vector<jobs::RelayedLaunch> relayed;
  for (size_t i = 0; i < targets.size(); ++i) {
    relayed.push_back({targets[i].host, rpc::fromProto(proto.relayed(static_cast<int>(i)))});
  }
  jobs::HostLaunch launch(local_, rpc::fromProto(proto), std::move(relayed),
                          subtreeOf(proto.relay()));
  hvd::logging::program("service")->info(
      "job {}: starting {} rank(s) of '{}' for {} ({} bytes){}", proto.job_id(), proto.ranks_size(),
      launch.command(), context->peer(), proto.ByteSizeLong(),
      targets.empty() ? "" : ", relaying to " + std::to_string(targets.size()) + " host(s)");
  LaunchStream stream(context, writer);
  // Listed while it runs, so that a graceful stop can drain it (shutdown()).
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (shuttingDown_) return {grpc::StatusCode::UNAVAILABLE, "the agent is shutting down"};
    launches_.insert(&launch);
  }
  struct Unlist {
    AgentService* service;
    jobs::HostLaunch* launch;
    ~Unlist() {
      {
        std::lock_guard<std::mutex> lock(service->mutex_);
        service->launches_.erase(launch);
      }
      service->launchEnded_.notify_all();
    }
  } unlist{this, &launch};
  if (launch.run(stream, context->peer()) == jobs::HostLaunch::Outcome::kCallerGone) {
    return {grpc::StatusCode::CANCELLED, "the caller went away"};
  }
  return grpc::Status::OK;
}

grpc::Status AgentService::Reserve(grpc::ServerContext* context, const v1::ReserveRequest* request,
                                   v1::ReserveResponse* response) {
  if (grpc::Status s = guard_->check(*context, rpc::kReserveMethod, *request); !s.ok()) return s;
  return guarded([&] {
    const ledger::Request wanted = rpc::fromProto(*request);
    if (shuttingDown())
      return grpc::Status{grpc::StatusCode::UNAVAILABLE, "the agent is shutting down"};
    const coordinator::ReserveResult result = local_->reserve(wanted);
    *response = rpc::toProto(result.grant);
    if (!result.accounted) {
      // An agent always keeps a ledger; a grant without one would let jobs share GPUs unseen.
      return grpc::Status{grpc::StatusCode::INTERNAL, "this agent keeps no ledger"};
    }
    // The leader gives back what any host granted when another one cannot hold its share.
    relayReserve(*request, response);
    hvd::logging::program("service")->debug(
        "job {}: reserve {} rank(s): {}", wanted.key, wanted.ranks,
        result.grant.verdict == ledger::Verdict::kGranted ? "granted" : result.grant.reason);
    return grpc::Status::OK;
  });
}

grpc::Status AgentService::Unreserve(grpc::ServerContext* context,
                                     const v1::UnreserveRequest* request, v1::UnreserveResponse*) {
  if (grpc::Status s = guard_->check(*context, rpc::kUnreserveMethod, *request); !s.ok()) {
    return s;
  }
  return guarded([&] {
    if (request->job_id().empty()) throw InvalidArgumentError("the request names no job");
    local_->unreserve(request->job_id());
    relayUnreserve(*request);
    return grpc::Status::OK;
  });
}

grpc::Status AgentService::Stop(grpc::ServerContext* context, const v1::StopRequest* request,
                                v1::StopResponse*) {
  if (grpc::Status s = guard_->check(*context, rpc::kStopMethod, *request); !s.ok()) return s;
  return guarded([&] {
    if (request->job_id().empty()) throw InvalidArgumentError("the stop request has no job id");
    const int signal = request->signal() == 0 ? SIGTERM : request->signal();
    if (signal < 1 || signal >= NSIG) {
      throw InvalidArgumentError("stop signal " + std::to_string(signal) +
                                 " is not a signal number");
    }
    if (request->grace_ms() < 0) throw InvalidArgumentError("the grace must not be negative");
    hvd::logging::program("service")->info("job {}: stop (signal {}, grace {} ms) from {}",
                                           request->job_id(), signal, request->grace_ms(),
                                           context->peer());
    // Unknown jobs are not an error: a stop may cross the job's natural end.
    local_->stop(request->job_id(), signal, std::chrono::milliseconds(request->grace_ms()));
    relayStop(*request, signal);
    return grpc::Status::OK;
  });
}

grpc::Status AgentService::CancelJob(grpc::ServerContext* context,
                                     const v1::CancelJobRequest* request,
                                     v1::CancelJobResponse* response) {
  if (grpc::Status s = guard_->check(*context, rpc::kCancelJobMethod, *request); !s.ok()) {
    return s;
  }
  return guarded([&] {
    if (request->has_grace() && request->grace_ms() < 0) {
      throw InvalidArgumentError("the grace must not be negative");
    }
    std::optional<std::chrono::milliseconds> grace;
    if (request->has_grace()) grace = std::chrono::milliseconds(request->grace_ms());
    const jobs::LedJobs::CancelOutcome outcome = led_->cancel(request->job_id(), grace);
    if (!outcome.found) return notFound(request->job_id());
    if (outcome.wasRunning) {
      hvd::logging::program("service")->info("job {}: cancelled by {}", request->job_id(),
                                             context->peer());
    }
    response->set_was_running(outcome.wasRunning);
    response->set_state(rpc::toProto(outcome.state));
    return grpc::Status::OK;
  });
}

grpc::Status AgentService::notFound(const std::string& jobId) const {
  return {grpc::StatusCode::NOT_FOUND,
          "no job '" + jobId +
              "' on this agent (it keeps the records of running jobs and of "
              "the last finished ones, --keep-jobs)"};
}

grpc::Status AgentService::ListJobs(grpc::ServerContext* context,
                                    const v1::ListJobsRequest* request,
                                    v1::ListJobsResponse* response) {
  if (grpc::Status s = guard_->check(*context, rpc::kListJobsMethod, *request); !s.ok()) return s;
  return guarded([&] {
    for (v1::JobInfo& info : history_->list()) {
      info.clear_ranks();
      *response->add_jobs() = std::move(info);
    }
    return grpc::Status::OK;
  });
}

grpc::Status AgentService::GetJob(grpc::ServerContext* context, const v1::GetJobRequest* request,
                                  v1::JobInfo* response) {
  if (grpc::Status s = guard_->check(*context, rpc::kGetJobMethod, *request); !s.ok()) return s;
  return guarded([&] {
    std::optional<v1::JobInfo> info = history_->get(request->job_id());
    if (!info) return notFound(request->job_id());
    *response = std::move(*info);
    return grpc::Status::OK;
  });
}

std::vector<v1::JobOutputBatch> toBatches(const std::vector<records::LogLine>& lines, bool live) {
  std::vector<v1::JobOutputBatch> batches;
  size_t bytes = 0;
  for (const records::LogLine& line : lines) {
    if (batches.empty() || bytes + line.text.size() > kBytesPerBatch ||
        batches.back().lines_size() >= static_cast<int>(kLinesPerBatch)) {
      batches.emplace_back();
      bytes = 0;
    }
    v1::JobOutput* out = batches.back().add_lines();
    out->set_rank(line.rank);
    out->set_host(line.host);
    out->set_stream(rpc::toProto(line.stream));
    out->set_line(line.text);
    out->set_unix_ms(live ? 0 : line.unixMs);
    out->set_attempt(line.attempt);
    bytes += line.text.size() + line.host.size() + 16;
  }
  return batches;
}

grpc::Status AgentService::JobLogs(grpc::ServerContext* context, const v1::JobLogsRequest* request,
                                   grpc::ServerWriter<v1::JobLogsEvent>* writer) {
  if (grpc::Status s = guard_->check(*context, rpc::kJobLogsMethod, *request); !s.ok()) return s;
  return guarded([&] { return runJobLogs(context, *request, writer); });
}

grpc::Status AgentService::runJobLogs(grpc::ServerContext* context,
                                      const v1::JobLogsRequest& request,
                                      grpc::ServerWriter<v1::JobLogsEvent>* writer) {
  const std::optional<std::string> path = history_->logPath(request.job_id());
  if (!path) return notFound(request.job_id());
  records::LogFilter filter;
  filter.stderrOnly = request.stderr_only();
  if (request.has_ranks()) {
    if (request.first_rank() < 0 || request.last_rank() < request.first_rank()) {
      throw InvalidArgumentError("rank range " + std::to_string(request.first_rank()) + "-" +
                                 std::to_string(request.last_rank()) + " is empty");
    }
    filter.ranks = std::make_pair(request.first_rank(), request.last_rank());
  }
  if (request.tail_lines() < 0) throw InvalidArgumentError("--tail must not be negative");
  const auto emitLines = [&](const std::vector<records::LogLine>& lines) {
    for (v1::JobOutputBatch& batch : toBatches(lines, /*live=*/false)) {
      v1::JobLogsEvent event;
      event.mutable_batch()->Swap(&batch);
      if (!writer->Write(event)) return false;
    }
    return true;
  };
  uint64_t offset = 0;
  if (request.tail_lines() > 0 || request.from_end()) {
    const std::vector<records::LogLine> tail =
        records::tailLogLines(*path, static_cast<size_t>(request.tail_lines()), filter, &offset);
    // Tells an attaching client that "from now" is marked (it says "attached" then), before
    // the first line, which may be long in coming.
    if (request.from_end()) {
      context->AddInitialMetadata(rpc::kFollowingFromEndKey, "1");
      writer->SendInitialMetadata();
    }
    if (!emitLines(tail)) return {grpc::StatusCode::CANCELLED, "the client went away"};
  }
  const bool ok = streamJobLog(
      *led_, request.job_id(), filter, &offset, request.follow(),
      [&] { return context->IsCancelled(); }, emitLines,
      [&](const v1::JobEnd& end) {
        v1::JobLogsEvent event;
        *event.mutable_end() = end;
        return writer->Write(event);
      });
  if (!ok) return {grpc::StatusCode::CANCELLED, "the client went away"};
  return grpc::Status::OK;
}

}  // namespace hvd::agent::service
