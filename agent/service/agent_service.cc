// Describe, Launch, Stop, CancelJob and the service's plumbing; SubmitJob is in submit_job.cc.
#include "agent/service/agent_service.h"

#include <spdlog/spdlog.h>

#include <csignal>
#include <exception>
#include <set>

#include "agent/rpc/convert.h"
#include "agent/rpc/methods.h"
#include "agent/service/event_queue.h"
#include "hvd/error.hpp"

namespace hvd::agent::service {
namespace {

// Forwards one Launch's rank events into the handler's queue, in proto form.
class RankEventQueue final : public coordinator::JobEvents {
 public:
  explicit RankEventQueue(EventQueue<v1::RankEvent>* queue) : queue_(queue) {}

  void onOutput(int rank, process::Stream stream, std::string_view line) override {
    size_t dropped = 0;
    if (!budget_.admit(rank, line.size(), queue_->queuedBytes(), &dropped)) return;
    if (dropped > 0) pushOutput(rank, process::Stream::kStderr, OutputBudget::notice(dropped));
    pushOutput(rank, stream, line);
  }
  void onExit(int rank, const process::ExitStatus& status) override {
    if (const size_t dropped = budget_.takeDropped(rank); dropped > 0) {
      pushOutput(rank, process::Stream::kStderr, OutputBudget::notice(dropped));
    }
    v1::RankEvent event;
    v1::RankExit* exit = event.mutable_exit();
    exit->set_rank(rank);
    exit->set_exit_code(status.exitCode);
    exit->set_signal(status.signal);
    queue_->push(std::move(event));
  }
  void onAgentLost(const std::string&, const std::string&) override {}  // local: never

 private:
  void pushOutput(int rank, process::Stream stream, std::string_view line) {
    v1::RankEvent event;
    v1::RankOutput* out = event.mutable_output();
    out->set_rank(rank);
    out->set_stream(rpc::toProto(stream));
    out->set_line(line.data(), line.size());
    queue_->push(std::move(event), line.size());
  }

  EventQueue<v1::RankEvent>* const queue_;
  OutputBudget budget_;
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
  } catch (const std::exception& e) {
    spdlog::error("hvdagent: internal error: {}", e.what());
    return {grpc::StatusCode::INTERNAL, e.what()};
  } catch (...) {
    spdlog::error("hvdagent: internal error of unknown type");
    return {grpc::StatusCode::INTERNAL, "internal error"};
  }
}

AgentService::AgentService(AgentServiceOptions options, rpc::CallGuard* guard, LocalJobs* jobs,
                           node::GpuDiscovery* gpus, store::TcpStoreServer* store)
    : options_(std::move(options)), guard_(guard), jobs_(jobs), gpus_(gpus), store_(store) {}

void AgentService::shutdown() {
  std::lock_guard<std::mutex> lock(mutex_);
  shuttingDown_ = true;
  // Under mutex_ so no handler destroys its coordinator meanwhile; cancel() only queues stops.
  for (const auto& [id, coordinator] : led_) coordinator->cancel();
  jobs_->stopAll(options_.shutdownGrace);
}

bool AgentService::shuttingDown() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return shuttingDown_;
}

NodeFacts AgentService::describeNode() {
  std::lock_guard<std::mutex> lock(describeMutex_);
  return collectNodeFacts(gpus_, options_.tlsEnabled);
}

grpc::Status AgentService::Describe(grpc::ServerContext* context,
                                    const v1::DescribeRequest* request,
                                    v1::DescribeResponse* response) {
  if (grpc::Status s = guard_->check(*context, rpc::kDescribeMethod, *request); !s.ok()) return s;
  return guarded([&] {
    *response = toProto(describeNode());
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
  const coordinator::LaunchRequest request = rpc::fromProto(proto);
  const std::string& jobId = request.jobId;
  const size_t rankCount = request.ranks.size();

  EventQueue<v1::RankEvent> queue;
  RankEventQueue events(&queue);
  spdlog::info("hvdagent: job {}: starting {} rank(s) of '{}' for {}", jobId, rankCount,
               request.ranks.front().spec.argv.empty() ? "" : request.ranks.front().spec.argv[0],
               context->peer());
  const coordinator::LaunchStatus status = jobs_->launch(request, &events);
  {
    v1::RankEvent launched;
    launched.mutable_launched()->set_error(status.error);
    if (!status.ok()) {
      spdlog::warn("hvdagent: job {}: launch failed: {}", jobId, status.error);
      writer->Write(launched);
      return grpc::Status::OK;
    }
    bool callerGone = !writer->Write(launched);
    // From here on the job runs: whatever happens, it is stopped and released before returning.
    struct Release {
      LocalJobs* jobs;
      const std::string& id;
      ~Release() { jobs->release(id); }
    } release{jobs_, jobId};

    size_t exits = 0;
    bool stopped = false;
    while (exits < rankCount) {
      for (v1::RankEvent& event : queue.popAll(kPollInterval)) {
        if (event.has_exit()) ++exits;
        if (!callerGone && !writer->Write(event)) callerGone = true;
      }
      // The caller may close the stream as soon as it has the last exit: that is no loss.
      if (exits >= rankCount) break;
      if (!callerGone && context->IsCancelled()) callerGone = true;
      if (callerGone && !stopped) {
        // The leader went away (hvdrun killed, leader agent lost): no worker outlives it.
        spdlog::warn(
            "hvdagent: job {}: caller {} went away; stopping its ranks (signal {}, "
            "grace {} ms)",
            jobId, context->peer(), request.stopSignal, request.grace.count());
        jobs_->stop(jobId, request.stopSignal, request.grace);
        stopped = true;
      }
    }
    spdlog::info("hvdagent: job {}: every rank has exited", jobId);
    if (callerGone) return {grpc::StatusCode::CANCELLED, "the caller went away"};
  }
  return grpc::Status::OK;
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
    spdlog::info("hvdagent: job {}: stop (signal {}, grace {} ms) from {}", request->job_id(),
                 signal, request->grace_ms(), context->peer());
    // Unknown jobs are not an error: a stop may cross the job's natural end.
    jobs_->stop(request->job_id(), signal, std::chrono::milliseconds(request->grace_ms()));
    return grpc::Status::OK;
  });
}

grpc::Status AgentService::CancelJob(grpc::ServerContext* context,
                                     const v1::CancelJobRequest* request, v1::CancelJobResponse*) {
  if (grpc::Status s = guard_->check(*context, rpc::kCancelJobMethod, *request); !s.ok()) {
    return s;
  }
  return guarded([&] {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = led_.find(request->job_id());
    if (it == led_.end()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          "no job '" + request->job_id() + "' is running on this agent");
    }
    spdlog::info("hvdagent: job {}: cancelled by {}", request->job_id(), context->peer());
    it->second->cancel();
    return grpc::Status::OK;
  });
}

}  // namespace hvd::agent::service
