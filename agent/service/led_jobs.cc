#include "agent/service/led_jobs.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <thread>
#include <utility>
#include <vector>

#include "agent/auth/cluster_key.h"
#include "agent/common/thread_guard.h"
#include "agent/coordinator/exit_codes.h"
#include "agent/rpc/convert.h"
#include "agent/rpc/net.h"
#include "hvd/error.hpp"
#include "store/tcp_store_server.h"

namespace hvd::agent::service {
namespace {

namespace coord = coordinator;

int64_t nowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

v1::RankState toProto(coord::RankState state) {
  switch (state) {
    case coord::RankState::kRunning:
      return v1::RANK_RUNNING;
    case coord::RankState::kExited:
      return v1::RANK_EXITED;
    case coord::RankState::kLost:
      return v1::RANK_LOST;
    case coord::RankState::kNotStarted:
      break;
  }
  return v1::RANK_PENDING;
}

void setRanks(const std::vector<coord::RankSnapshot>& ranks, v1::JobInfo* info) {
  info->clear_ranks();
  for (const coord::RankSnapshot& r : ranks) {
    v1::RankInfo* out = info->add_ranks();
    out->set_rank(r.rank);
    out->set_host(r.host);
    out->set_pid(r.pid);
    out->set_state(toProto(r.state));
    if (r.exit) {
      out->set_exit_code(r.exit->exitCode);
      out->set_signal(r.exit->signal);
    }
  }
}

}  // namespace

uint64_t ChangeSignal::current() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return value_;
}

void ChangeSignal::bump() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++value_;
  }
  cv_.notify_all();
}

void ChangeSignal::waitPast(uint64_t seen, std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait_for(lock, timeout, [&] { return value_ != seen; });
}

v1::JobState stateOfOutcome(coord::JobOutcome outcome) {
  switch (outcome) {
    case coord::JobOutcome::kSucceeded:
      return v1::JOB_COMPLETED;
    case coord::JobOutcome::kCancelled:
      return v1::JOB_CANCELLED;
    case coord::JobOutcome::kTimedOut:
      return v1::JOB_TIMEOUT;
    default:
      return v1::JOB_FAILED;
  }
}

// The coordinator's client for a led job: every line to the log, the end remembered.
class JobSink final : public coord::ClientEvents {
 public:
  JobSink(JobLogWriter* log, ChangeSignal* changed) : log_(log), changed_(changed) {}

  void onOutput(int rank, const std::string& host, process::Stream stream,
                std::string_view line) override {
    if (log_->append(nowUnixMs(), rank, stream, host, line)) changed_->bump();
  }
  void onJobEnd(const coord::JobResult&) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ended_ = true;
    }
    cv_.notify_all();
  }
  // The job thread's pace: returns at the end or after `timeout`.
  void waitEnded(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait_for(lock, timeout, [this] { return ended_; });
  }

 private:
  JobLogWriter* const log_;
  ChangeSignal* const changed_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool ended_ = false;
};

struct LedJobs::Job {
  std::string id;
  coord::JobSpec spec;
  std::string token;
  std::unique_ptr<LocalHostAgent> local;
  std::vector<std::unique_ptr<coord::NodeAgent>> remotes;
  std::unique_ptr<JobLogWriter> log;
  std::unique_ptr<JobSink> sink;
  coord::SteadyClock clock;
  std::unique_ptr<coord::JobCoordinator> coordinator;
  std::shared_ptr<ChangeSignal> changed = std::make_shared<ChangeSignal>();
  std::string cancelReason;  // set under LedJobs::mutex_
  std::thread thread;
  std::atomic<bool> done{false};
};

LedJobs::LedJobs(LedJobsOptions options, LocalJobs* jobs, store::TcpStoreServer* store,
                 JobHistory* history)
    : options_(std::move(options)), jobs_(jobs), store_(store), history_(history) {}

LedJobs::~LedJobs() {
  shutdown();
  join();
}

std::string LedJobs::submit(coord::JobSpec spec, const v1::SubmitJobRequest& request,
                            const std::string& submittedBy) {
  if (spec.hosts.size() > 1) {
    if (rpc::isLoopbackName(spec.hosts[0].host)) {
      throw InvalidArgumentError(
          "the first host '" + spec.hosts[0].host +
          "' is a loopback name, which the other hosts cannot reach; name it by an address or "
          "hostname they can resolve");
    }
    if (!options_.remoteAgents) {
      throw InvalidArgumentError("this agent cannot reach other agents (no remote agent support)");
    }
    for (int i = 1; i < request.hosts_size(); ++i) {
      if (request.hosts(i).agent_address().empty()) {
        throw InvalidArgumentError("host '" + request.hosts(i).host() + "' has no agent address");
      }
    }
  }
  reapFinished();
  auto job = std::make_unique<Job>();
  job->id = history_->newJobId();
  spec.jobId = job->id;
  // MASTER_PORT for torch env://: free on this agent's address now.
  if (const int port = rpc::pickFreePort(options_.listenHost); port > 0) spec.masterPort = port;
  job->spec = spec;
  job->token = auth::randomHex(32);

  v1::JobInfo info;
  info.set_job_id(job->id);
  info.set_name(request.job_name());
  info.set_state(v1::JOB_PENDING);
  info.set_np(spec.np);
  for (const auto& h : spec.hosts) info.add_hosts(h.host);
  for (const std::string& a : spec.argv) info.add_argv(a);
  info.set_cwd(spec.cwd);
  info.set_submitted_unix_ms(nowUnixMs());
  info.set_time_limit_ms(spec.timeLimit.count());
  info.set_grace_ms(spec.grace.count());
  info.set_detached(request.detach());
  history_->create(info);
  try {
    job->log =
        std::make_unique<JobLogWriter>(history_->logPath(job->id).value(), options_.maxLogBytes);
  } catch (const InvalidArgumentError& e) {
    // Nothing started: the record says why rather than staying PENDING forever.
    history_->update(job->id, [&](v1::JobInfo* i) {
      i->set_state(v1::JOB_FAILED);
      i->set_ended_unix_ms(nowUnixMs());
      i->mutable_end()->set_job_id(job->id);
      i->mutable_end()->set_outcome(v1::LAUNCH_FAILED);
      i->mutable_end()->set_exit_code(coord::kExitLaunchFailed);
      i->mutable_end()->set_summary(std::string("hvdrun: ") + e.what());
      i->mutable_end()->set_reason(e.what());
      i->mutable_end()->set_rank(-1);
    });
    throw;
  }
  job->sink = std::make_unique<JobSink>(job->log.get(), job->changed.get());

  job->local = std::make_unique<LocalHostAgent>(spec.hosts[0].host, jobs_, options_.describeLocal);
  std::vector<coord::NodeAgent*> agents = {job->local.get()};
  const std::chrono::milliseconds timeout =
      request.connect_timeout_ms() > 0 ? std::chrono::milliseconds(request.connect_timeout_ms())
                                       : options_.defaultConnectTimeout;
  for (int i = 1; i < request.hosts_size(); ++i) {
    job->remotes.push_back(options_.remoteAgents(
        {request.hosts(i).host(), request.hosts(i).agent_address(), timeout}));
    agents.push_back(job->remotes.back().get());
  }
  store_->addJob(job->id, job->token);
  // The ranks reach this agent's store (and rank 0's MASTER_PORT) at the address the agent
  // listens on when that is one specific address: it is reachable by construction and needs no
  // name resolution (the node names of a Slurm allocation, say). A wildcard bind leaves the
  // leader's host as the user named it.
  const std::string& listen = options_.listenHost;
  const bool specific = !listen.empty() && !rpc::isWildcardAddress(listen);
  const std::string storeHost = specific ? listen : spec.hosts[0].host;
  if (specific) spec.masterAddr = job->spec.masterAddr = listen;
  const std::string storeAddress = rpc::joinHostPort(storeHost, store_->port());
  job->coordinator = std::make_unique<coord::JobCoordinator>(
      spec, agents, coord::StoreEndpoint{storeAddress, job->token}, job->sink.get(), &job->clock);

  spdlog::info("hvdagent: job {}: np {} on {} host(s), '{}', {} by {}", job->id, spec.np,
               spec.hosts.size(), spec.argv[0], request.detach() ? "submitted" : "run",
               submittedBy);
  Job* raw = job.get();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (shuttingDown_) {
      store_->removeJob(job->id);
      history_->update(job->id, [](v1::JobInfo* i) {
        i->set_state(v1::JOB_CANCELLED);
        i->set_ended_unix_ms(nowUnixMs());
      });
      throw PeerError("the agent is shutting down");
    }
    running_[raw->id] = std::move(job);
    raw->thread = std::thread([this, raw] {
      common::runGuarded(
          "job " + raw->id + " (leader)", [&] { run(raw); },
          [&](const std::string& what) { abandon(raw, what); });
    });
  }
  return raw->id;
}

void LedJobs::run(Job* job) {
  const std::string& id = job->id;
  job->coordinator->start();
  if (job->coordinator->launched() && !job->coordinator->finished()) {
    history_->update(id, [&](v1::JobInfo* info) {
      info->set_state(v1::JOB_RUNNING);
      info->set_started_unix_ms(nowUnixMs());
      setRanks(job->coordinator->ranks(), info);
    });
    job->changed->bump();
  }
  std::vector<coord::RankSnapshot> recorded = job->coordinator->ranks();
  while (!job->coordinator->finished()) {
    job->sink->waitEnded(std::chrono::milliseconds(150));
    job->coordinator->tick();
    std::vector<coord::RankSnapshot> ranks = job->coordinator->ranks();
    if (ranks != recorded) {  // an exit, or pids after the launch: rewrite the record
      history_->update(id, [&](v1::JobInfo* info) { setRanks(ranks, info); });
      recorded = std::move(ranks);
    }
  }
  const coord::JobResult result = *job->coordinator->result();
  // Teardown before the final record: no host may still deliver lines after readers saw the end.
  job->remotes.clear();  // RemoteNodeAgent: cancels its streams, joins its threads
  job->local->finish();  // releases the local group: leftovers SIGKILLed, ranks reaped
  store_->removeJob(id);
  job->log->close();
  std::string cancelReason;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    cancelReason = job->cancelReason;
  }
  history_->update(id, [&](v1::JobInfo* info) {
    info->set_state(stateOfOutcome(result.outcome));
    info->set_ended_unix_ms(nowUnixMs());
    setRanks(job->coordinator->ranks(), info);
    *info->mutable_end() = rpc::toProto(result);
    if (result.outcome == coord::JobOutcome::kCancelled && !cancelReason.empty()) {
      info->mutable_end()->set_reason(cancelReason);
      info->mutable_end()->set_summary(result.summary + " (" + cancelReason + ")");
    }
    info->set_log_lines_dropped(job->log->dropped());
  });
  spdlog::info("hvdagent: job {}: ended, exit code {}: {}", id, result.exitCode, result.summary);
  history_->prune();
  job->done = true;
  job->changed->bump();
}

// After an exception escaped run(): the job must still end, its ranks stopped, its record final
// and its readers woken, or it would keep its ranks and read RUNNING forever. Each step is
// guarded on its own so that one failing does not skip the others.
void LedJobs::abandon(Job* job, const std::string& what) {
  const std::string& id = job->id;
  const std::string role = "job " + id + " (leader, ending it)";
  common::runGuarded(role, [&] { job->remotes.clear(); });
  common::runGuarded(role, [&] { job->local->finish(); });
  common::runGuarded(role, [&] { store_->removeJob(id); });
  common::runGuarded(role, [&] { job->log->close(); });
  common::runGuarded(role, [&] {
    history_->update(id, [&](v1::JobInfo* info) {
      info->set_state(v1::JOB_FAILED);
      info->set_ended_unix_ms(nowUnixMs());
      v1::JobEnd* end = info->mutable_end();
      end->set_job_id(id);
      // The leader lost track of its job, as if its agent had gone: the program did not fail.
      end->set_outcome(v1::AGENT_LOST);
      end->set_exit_code(coord::kExitInternalError);
      end->set_summary("hvdrun: internal error in the agent leading job " + id + ": " + what +
                       "; its ranks were stopped");
      end->set_reason("internal error: " + what);
      end->set_rank(-1);
    });
  });
  job->done = true;
  job->changed->bump();
}

std::shared_ptr<const ChangeSignal> LedJobs::changedOf(const std::string& jobId) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = running_.find(jobId);
  if (it != running_.end()) return it->second->changed;
  return std::make_shared<const ChangeSignal>();
}

void LedJobs::reapFinished() {
  std::vector<std::unique_ptr<Job>> finished;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = running_.begin(); it != running_.end();) {
      if (it->second->done) {
        finished.push_back(std::move(it->second));
        it = running_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (std::unique_ptr<Job>& job : finished) job->thread.join();
}

LedJobs::CancelOutcome LedJobs::cancel(const std::string& jobId,
                                       std::optional<std::chrono::milliseconds> grace,
                                       const std::string& reason) {
  CancelOutcome outcome;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = running_.find(jobId);
    if (it != running_.end() && !it->second->done && !it->second->coordinator->finished()) {
      if (it->second->cancelReason.empty()) it->second->cancelReason = reason;
      // Under mutex_ so the job cannot be reaped meanwhile; cancel() only queues stops.
      it->second->coordinator->cancel(grace);
      outcome.found = true;
      outcome.wasRunning = true;
    }
  }
  if (const std::optional<v1::JobInfo> info = history_->get(jobId)) {
    outcome.found = true;
    outcome.state = info->state();
  }
  return outcome;
}

void LedJobs::shutdown() {
  std::vector<std::string> ids;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    shuttingDown_ = true;
    for (const auto& [id, job] : running_) ids.push_back(id);
  }
  for (const std::string& id : ids) cancel(id, std::nullopt, "the agent shut down");
}

void LedJobs::join() {
  std::map<std::string, std::unique_ptr<Job>> jobs;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs.swap(running_);
  }
  for (auto& [id, job] : jobs) job->thread.join();
}

bool streamJobLog(const LedJobs& led, const std::string& jobId, const LogFilter& filter,
                  uint64_t* offset, bool follow, const std::function<bool()>& cancelled,
                  const std::function<bool(const std::vector<LogLine>&)>& emitLines,
                  const std::function<bool(const v1::JobEnd&)>& emitEnd) {
  const std::optional<std::string> path = led.history()->logPath(jobId);
  if (!path) return true;
  const std::shared_ptr<const ChangeSignal> changed = led.changedOf(jobId);
  for (;;) {
    const uint64_t seen = changed->current();
    // The state first, then the lines: the log is complete once the record is final.
    const std::optional<v1::JobInfo> info = led.history()->get(jobId);
    const bool ended = !info || isFinalState(info->state());
    for (;;) {
      const uint64_t before = *offset;
      const std::vector<LogLine> lines = readLogLines(*path, offset, filter);
      if (!lines.empty() && !emitLines(lines)) return false;
      if (*offset == before) break;
    }
    if (ended) return info && info->has_end() ? emitEnd(info->end()) : true;
    if (!follow) return true;
    if (cancelled()) return false;
    changed->waitPast(seen, std::chrono::milliseconds(150));
  }
}

}  // namespace hvd::agent::service
