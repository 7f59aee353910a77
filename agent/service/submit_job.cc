// SubmitJob: this agent leads a job (docs/architecture.md "How a job flows", steps 3 and 6; issue
// 6). The job itself runs in LedJobs, on a thread of its own; this handler only accepts it and, for
// an attached run, follows its log to the caller until JobEnd. A detached submit (hvdrun submit)
// returns once every rank has started (a rank may have failed already: the job was submitted),
// or with the JobEnd of a job that could not start, so `hvdrun submit` fails loudly for an
// impossible job instead of printing an id.
#include <spdlog/spdlog.h>

#include "agent/rpc/convert.h"
#include "agent/rpc/methods.h"
#include "agent/service/agent_service.h"
#include "agent/service/job_log_stream.h"
#include "hvd/error.hpp"
#include "hvd_support/logging.h"

namespace hvd::agent::service {
namespace {

namespace coord = coordinator;

// Waits while the job is PENDING (hosts described, ranks being started); its record after.
std::optional<v1::JobInfo> waitPastPending(const jobs::LedJobs& led, const std::string& jobId,
                                           grpc::ServerContext* context) {
  const std::shared_ptr<const jobs::ChangeSignal> changed = led.changedOf(jobId);
  for (;;) {
    const uint64_t seen = changed->current();
    std::optional<v1::JobInfo> info = led.history()->get(jobId);
    if (!info || info->state() != v1::JOB_PENDING || context->IsCancelled()) return info;
    changed->waitPast(seen, std::chrono::milliseconds(150));
  }
}

v1::JobEvent queuedEvent(const v1::JobInfo& info) {
  v1::JobEvent event;
  event.mutable_queued()->set_job_id(info.job_id());
  event.mutable_queued()->set_reason(info.queue_reason());
  return event;
}

// An attached run while its job waits in the queue: a JobQueued for each new reason, until the
// job runs or ends. False when the caller went away.
bool followQueue(const jobs::LedJobs& led, const std::string& jobId, grpc::ServerContext* context,
                 grpc::ServerWriter<v1::JobEvent>* writer) {
  const std::shared_ptr<const jobs::ChangeSignal> changed = led.changedOf(jobId);
  std::string told;
  for (;;) {
    const uint64_t seen = changed->current();
    const std::optional<v1::JobInfo> info = led.history()->get(jobId);
    if (!info) return true;
    if (info->state() == v1::JOB_QUEUED && info->queue_reason() != told) {
      if (!writer->Write(queuedEvent(*info))) return false;
      told = info->queue_reason();
    }
    if (info->state() != v1::JOB_QUEUED && info->state() != v1::JOB_PENDING) return true;
    if (context->IsCancelled()) return false;
    changed->waitPast(seen, std::chrono::milliseconds(150));
  }
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
  const std::string jobId = led_->submit(std::move(spec), context->peer());

  v1::JobEvent accepted;
  accepted.mutable_accepted()->set_job_id(jobId);
  const bool attached = !request.detach();
  if (!writer->Write(accepted)) {
    if (attached) led_->cancel(jobId, std::nullopt, "the attached client went away");
    return {grpc::StatusCode::CANCELLED, "the client went away"};
  }

  if (!attached) {
    const std::optional<v1::JobInfo> info = waitPastPending(*led_, jobId, context);
    // A job whose every rank started was submitted, even if a rank has failed already (as
    // sbatch prints the id of a job that fails at once): its end is for status and logs. Only a
    // job that could not start ends the call with its JobEnd.
    const auto started = [](const v1::JobInfo& job) {
      if (job.started_unix_ms() > 0) return true;
      if (job.ranks_size() != job.np()) return false;
      for (const v1::RankInfo& r : job.ranks()) {
        if (r.pid() <= 0) return false;
      }
      return true;
    };
    if (info && info->state() == v1::JOB_QUEUED) {
      // Submitted, and waiting for resources: hvdrun submit says so with the reason.
      writer->Write(queuedEvent(*info));
      return grpc::Status::OK;
    }
    if (info && rpc::isFinalState(info->state()) && info->has_end() && !started(*info)) {
      v1::JobEvent end;
      *end.mutable_end() = info->end();
      writer->Write(end);
    }
    return grpc::Status::OK;
  }

  uint64_t offset = 0;
  const bool delivered = followQueue(*led_, jobId, context, writer) &&
                         streamJobLog(
                             *led_, jobId, records::LogFilter{}, &offset, /*follow=*/true,
                             [&] { return context->IsCancelled(); },
                             [&](const std::vector<records::LogLine>& lines) {
                               for (v1::JobOutputBatch& batch : toBatches(lines, /*live=*/true)) {
                                 v1::JobEvent event;
                                 event.mutable_batch()->Swap(&batch);
                                 if (!writer->Write(event)) return false;
                               }
                               return true;
                             },
                             [&](const v1::JobEnd& end) {
                               v1::JobEvent event;
                               *event.mutable_end() = end;
                               return writer->Write(event);
                             },
                             [&, told = 0](const v1::JobInfo& info) mutable {
                               // The client learns of each restart, with the failure that caused
                               // it.
                               for (; told < info.restart_count(); ++told) {
                                 v1::JobEvent event;
                                 v1::JobRestarting* r = event.mutable_restarting();
                                 r->set_job_id(info.job_id());
                                 r->set_restart(told + 1);
                                 r->set_max_restarts(info.max_restarts());
                                 for (const v1::AttemptInfo& a : info.attempts()) {
                                   if (a.attempt() == told) r->set_reason(a.end().summary());
                                 }
                                 if (!writer->Write(event)) return false;
                               }
                               return true;
                             });
  if (!delivered) {
    // An attached hvdrun that is killed leaves nothing running (hvdrun submit is for that).
    hvd::logging::program("service")->warn("job {}: client {} went away; stopping the job", jobId,
                                           context->peer());
    led_->cancel(jobId, std::nullopt, "the attached client went away");
    return {grpc::StatusCode::CANCELLED, "the client went away"};
  }
  return grpc::Status::OK;
}

}  // namespace hvd::agent::service
