#include "agent/records/led_job_records.h"

#include "agent/records/job_history.h"
#include "agent/rpc/convert.h"
#include "hvd_support/unix_time.h"

namespace hvd::agent::records {
namespace {

namespace coord = coordinator;

void setRanks(const std::vector<coord::RankSnapshot>& ranks, v1::JobInfo* info) {
  info->clear_ranks();
  for (const coord::RankSnapshot& r : ranks) *info->add_ranks() = rpc::toProto(r);
}

void setResources(const std::vector<coord::HostResources>& resources, v1::JobInfo* info) {
  info->clear_resources();
  for (const coord::HostResources& r : resources) *info->add_resources() = rpc::toProto(r);
}

v1::AttemptInfo* addAttempt(int attempt, const coord::JobSpec& attemptSpec, v1::JobInfo* info) {
  v1::AttemptInfo* a = info->add_attempts();
  a->set_attempt(attempt);
  for (const auto& h : attemptSpec.hosts) a->add_hosts(h.host);
  return a;
}

}  // namespace

std::string LedJobRecords::newJobId() const { return history_->newJobId(); }

std::optional<std::string> LedJobRecords::logPath(const std::string& jobId) const {
  return history_->logPath(jobId);
}

StateSpace* LedJobRecords::space() const { return history_->space(); }

void LedJobRecords::discard(const std::string& jobId) { history_->discard(jobId); }

int LedJobRecords::prune() { return history_->prune(); }

void LedJobRecords::createPending(const coord::JobSpec& spec) {
  v1::JobInfo info;
  info.set_job_id(spec.jobId);
  info.set_name(spec.name);
  info.set_state(v1::JOB_PENDING);
  info.set_np(spec.np);
  for (const auto& h : spec.hosts) info.add_hosts(h.host);
  for (const std::string& a : spec.argv) info.add_argv(a);
  info.set_cwd(spec.cwd);
  info.set_submitted_unix_ms(nowUnixMs());
  info.set_time_limit_ms(spec.timeLimit.count());
  info.set_grace_ms(spec.grace.count());
  info.set_detached(spec.detach);
  info.set_max_restarts(spec.restart.maxRestarts);
  history_->create(info);
}

bool LedJobRecords::saveRequest(const coord::JobSpec& spec) {
  return history_->saveRequest(spec.jobId, rpc::toProto(spec, {}));
}

std::optional<coord::JobSpec> LedJobRecords::savedRequest(const std::string& jobId) const {
  const std::optional<v1::SubmitJobRequest> request = history_->savedRequest(jobId);
  if (!request) return std::nullopt;
  return rpc::fromProto(*request);
}

void LedJobRecords::dropRequest(const std::string& jobId) { history_->dropRequest(jobId); }

std::string LedJobRecords::disagreement(const std::string& jobId,
                                        const coord::JobSpec& spec) const {
  const std::optional<v1::JobInfo> info = history_->get(jobId);
  if (!info) return {};
  const std::vector<std::string> argv(info->argv().begin(), info->argv().end());
  if (argv != spec.argv) return "the command";
  if (info->np() != spec.np) return "-np";
  if (info->cwd() != spec.cwd) return "the working directory";
  if (static_cast<size_t>(info->hosts_size()) != spec.hosts.size()) return "the hosts";
  for (size_t i = 0; i < spec.hosts.size(); ++i) {
    if (info->hosts(static_cast<int>(i)) != spec.hosts[i].host) return "the hosts";
  }
  return {};
}

std::vector<std::string> LedJobRecords::queuedJobs() const {
  std::vector<std::string> queued;
  for (const v1::JobInfo& info : history_->list()) {  // in submission order
    if (info.state() == v1::JOB_QUEUED) queued.push_back(info.job_id());
  }
  return queued;
}

std::optional<coord::JobState> LedJobRecords::stateOf(const std::string& jobId) const {
  const std::optional<v1::JobInfo> info = history_->get(jobId);
  if (!info) return std::nullopt;
  return rpc::fromProto(info->state());
}

void LedJobRecords::queued(const std::string& jobId, const std::string& reason) {
  history_->update(jobId, [&](v1::JobInfo* info) {
    info->set_state(v1::JOB_QUEUED);
    info->set_queue_reason(reason);
  });
}

void LedJobRecords::attemptStarted(const std::string& jobId, int attempt,
                                   const coord::JobSpec& attemptSpec, bool running,
                                   const std::vector<coord::RankSnapshot>& ranks,
                                   const std::vector<coord::HostResources>& resources) {
  const int64_t now = nowUnixMs();
  history_->update(jobId, [&](v1::JobInfo* info) {
    if (running) info->set_state(v1::JOB_RUNNING);
    info->clear_queue_reason();
    if (info->started_unix_ms() == 0) info->set_started_unix_ms(now);
    info->set_restart_count(attempt);
    setRanks(ranks, info);
    setResources(resources, info);
    addAttempt(attempt, attemptSpec, info)->set_started_unix_ms(now);
  });
}

void LedJobRecords::ranksChanged(const std::string& jobId,
                                 const std::vector<coord::RankSnapshot>& ranks) {
  history_->update(jobId, [&](v1::JobInfo* info) { setRanks(ranks, info); });
}

void LedJobRecords::attemptEnded(const std::string& jobId, int attempt,
                                 const coord::JobSpec& attemptSpec,
                                 const std::vector<coord::RankSnapshot>& ranks,
                                 const coord::JobResult& result) {
  history_->update(jobId, [&](v1::JobInfo* info) {
    setRanks(ranks, info);
    if (info->attempts_size() == 0 || info->attempts().rbegin()->attempt() != attempt) {
      addAttempt(attempt, attemptSpec, info);
    }
    v1::AttemptInfo* a = info->mutable_attempts(info->attempts_size() - 1);
    a->set_ended_unix_ms(nowUnixMs());
    *a->mutable_end() = rpc::toProto(result);
  });
}

void LedJobRecords::restarting(const std::string& jobId, int restartCount) {
  history_->update(jobId, [&](v1::JobInfo* info) { info->set_restart_count(restartCount); });
}

void LedJobRecords::roundsChanged(const std::string& jobId, const std::vector<RoundEntry>& rounds) {
  history_->update(jobId, [&](v1::JobInfo* info) {
    info->clear_rounds();
    for (const RoundEntry& r : rounds) {
      v1::RoundInfo* round = info->add_rounds();
      round->set_round(r.number);
      for (const std::string& h : r.hosts) round->add_hosts(h);
      round->set_size(r.size);
      round->set_started_unix_ms(r.startUnixMs);
      round->set_ended_unix_ms(r.endUnixMs);
      round->set_cause(r.cause);
    }
  });
}

void LedJobRecords::ended(const std::string& jobId, const coord::JobResult& result,
                          uint64_t logLinesDropped, const std::string& logDropReason) {
  history_->update(jobId, [&](v1::JobInfo* info) {
    info->set_state(rpc::toProto(coord::stateOfOutcome(result.outcome)));
    info->set_ended_unix_ms(nowUnixMs());
    info->clear_queue_reason();
    *info->mutable_end() = rpc::toProto(result);
    info->set_log_lines_dropped(logLinesDropped);
    info->set_log_drop_reason(logDropReason);
  });
}

void LedJobRecords::failed(const std::string& jobId, coord::JobOutcome outcome, int exitCode,
                           const std::string& summary, const std::string& reason) {
  history_->update(jobId, [&](v1::JobInfo* info) {
    info->set_state(v1::JOB_FAILED);
    info->set_ended_unix_ms(nowUnixMs());
    v1::JobEnd* end = info->mutable_end();
    end->set_job_id(jobId);
    end->set_outcome(rpc::toProto(outcome));
    end->set_exit_code(exitCode);
    end->set_summary(summary);
    end->set_reason(reason);
    end->set_rank(-1);
  });
}

void LedJobRecords::cancelledUnstarted(const std::string& jobId) {
  history_->update(jobId, [](v1::JobInfo* info) {
    info->set_state(v1::JOB_CANCELLED);
    info->set_ended_unix_ms(nowUnixMs());
  });
}

}  // namespace hvd::agent::records
