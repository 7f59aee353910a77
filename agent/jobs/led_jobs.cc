#include "agent/jobs/led_jobs.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "agent/auth/cluster_key.h"
#include "agent/common/net.h"
#include "agent/common/thread_guard.h"
#include "agent/coordinator/restart_policy.h"
#include "agent/records/job_log.h"
#include "agent/relay/tree_hosts.h"
#include "agent/relay/tree_shape.h"
#include "contract/exit_codes.h"
#include "hvd/error.hpp"
#include "hvd_support/logging.h"
#include "hvd_support/tcp_store_server.h"
#include "hvd_support/unix_time.h"

namespace hvd::agent::jobs {

namespace coord = coordinator;

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

namespace {

int64_t unixMs(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

std::vector<records::RoundEntry> roundEntries(const std::vector<RoundRecord>& rounds) {
  std::vector<records::RoundEntry> out;
  for (const RoundRecord& r : rounds) {
    out.push_back(
        {r.number, r.hosts, r.size, unixMs(r.start), r.end ? unixMs(*r.end) : 0, r.cause});
  }
  return out;
}

}  // namespace

// The coordinator's client for a led job: every line to the log, the end remembered.
class JobSink final : public coord::ClientEvents {
 public:
  JobSink(records::JobLogWriter* log, ChangeSignal* changed, int attempt)
      : log_(log), changed_(changed), attempt_(attempt) {}

  void onOutput(int rank, const std::string& host, process::Stream stream,
                std::string_view line) override {
    if (log_->append(nowUnixMs(), rank, stream, host, line, attempt_)) changed_->bump();
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
  records::JobLogWriter* const log_;
  ChangeSignal* const changed_;
  const int attempt_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool ended_ = false;
};

struct LedJobs::Job {
  std::string id;
  coord::JobSpec spec;  // as submitted
  std::unique_ptr<records::JobLogWriter> log;
  std::shared_ptr<ChangeSignal> changed = std::make_shared<ChangeSignal>();
  std::unique_ptr<Steps> steps;
  std::unique_ptr<JobAttempts> attempts;  // after steps: its attempts call them
  // An elastic job instead of attempts, and where its output and end go.
  std::unique_ptr<JobSink> elasticSink;
  std::unique_ptr<LedElasticJob> elastic;
  // Set under LedJobs::mutex_.
  std::string cancelReason;
  bool cancelRequested = false;
  // From the first try to start its ranks on: a shutdown cancels the job rather than keeping it
  // queued, since ranks may run.
  bool startTried = false;
  std::thread thread;
  std::atomic<bool> done{false};
};

class LedJobs::CoordinatorGate final : public StartGate {
 public:
  explicit CoordinatorGate(coord::JobCoordinator& c) : c_(c) {}
  coord::JobCoordinator::Start tryStart(bool queue,
                                        const std::function<void()>& starting) override {
    return c_.tryStart(queue, starting);
  }
  std::string busyReason() const override { return c_.busyReason(); }
  void endUnstarted(const std::string& summary, const std::string& reason) override {
    c_.endUnstarted(summary, reason);
  }

 private:
  coord::JobCoordinator& c_;
};

// An elastic job reserves nothing (its rounds change its hosts): its turn is its start.
class LedJobs::ElasticGate final : public StartGate {
 public:
  explicit ElasticGate(LedElasticJob& job) : job_(job) {}
  coord::JobCoordinator::Start tryStart(bool, const std::function<void()>& starting) override {
    if (starting) starting();
    return job_.tryStart();
  }
  std::string busyReason() const override { return {}; }
  void endUnstarted(const std::string& summary, const std::string& reason) override {
    job_.endUnstarted(summary, reason);
  }

 private:
  LedElasticJob& job_;
};

// A led job's side of its attempts: the queue before each start, the job's sink as the pace,
// and the record at each step.
class LedJobs::Steps final : public AttemptSteps {
 public:
  Steps(LedJobs* led, Job* job) : led_(led), job_(job) {}

  coord::ClientEvents* events(int attempt) override {
    // Kept for the job's life: a finished attempt's coordinator may outlive the next set-up.
    sinks_.push_back(std::make_unique<JobSink>(job_->log.get(), job_->changed.get(), attempt));
    return sinks_.back().get();
  }

  coord::JobCoordinator::Start start(coord::JobCoordinator& coordinator, int attempt) override {
    CoordinatorGate gate(coordinator);
    const coord::JobCoordinator::Start started = led_->waitAndStart(job_, gate, attempt > 0);
    recorded_ = coordinator.ranks();
    return started;
  }

  void started(const coord::JobCoordinator& coordinator, int attempt) override {
    const std::string& id = job_->id;
    led_->records_.dropRequest(id);
    led_->records_.attemptStarted(id, attempt, job_->attempts->spec(), !coordinator.finished(),
                                  coordinator.ranks(), coordinator.resources());
    job_->changed->bump();
    hvd::logging::program("jobs")->info("job {} attempt {}: every rank started", id, attempt);
  }

  void wait(coord::JobCoordinator&) override {
    sinks_.back()->waitEnded(std::chrono::milliseconds(150));
  }

  void progressed(const coord::JobCoordinator& coordinator) override {
    std::vector<coord::RankSnapshot> ranks = coordinator.ranks();
    if (ranks != recorded_) {  // an exit, or pids after the launch: rewrite the record
      led_->records_.ranksChanged(job_->id, ranks);
      recorded_ = std::move(ranks);
    }
  }

  void ended(const coord::JobCoordinator& coordinator, int attempt,
             const coord::JobResult& result) override {
    led_->records_.attemptEnded(job_->id, attempt, job_->attempts->spec(), coordinator.ranks(),
                                result);
    hvd::logging::program("jobs")->info("job {} attempt {}: ended, exit code {}: {}", job_->id,
                                        attempt, result.exitCode, result.summary);
  }

  bool stopping() override {
    std::lock_guard<std::mutex> lock(led_->mutex_);
    return job_->cancelRequested || led_->shuttingDown_;
  }

  void restarting(int attempt, const coord::JobResult& after) override {
    hvd::logging::program("jobs")->warn("job {}: restarting (restart {} of {}) after: {}", job_->id,
                                        attempt, job_->spec.restart.maxRestarts, after.summary);
    led_->records_.restarting(job_->id, attempt);
    ++led_->restarts_;
    job_->changed->bump();
  }

 private:
  LedJobs* const led_;
  Job* const job_;
  std::vector<std::unique_ptr<JobSink>> sinks_;
  std::vector<coord::RankSnapshot> recorded_;  // the ranks as the record has them
};

LedJobs::LedJobs(LedJobsOptions options, LocalHost* local, store::TcpStoreServer* store,
                 records::JobHistory* history)
    : options_(std::move(options)), local_(local), store_(store), records_(history) {
  if (options_.ledger != nullptr) {
    std::weak_ptr<ChangeSignal> signal = queueChanged_;
    options_.ledger->setOnRelease([signal] {
      if (std::shared_ptr<ChangeSignal> s = signal.lock()) s->bump();
    });
  }
}

LedJobs::~LedJobs() {
  shutdown();
  join();
  if (options_.ledger != nullptr) options_.ledger->setOnRelease(nullptr);
}

AttemptSite LedJobs::site() {
  AttemptSite site;
  site.local = local_;
  site.describeLocal = options_.describeLocal;
  site.remoteAgents = options_.remoteAgents;
  site.store = store_;
  // The ranks reach this agent's store (and rank 0's MASTER_PORT) at the address the agent
  // listens on when that is one specific address: it is reachable by construction and needs no
  // name resolution (the node names of a Slurm allocation, say). A wildcard bind leaves the
  // leader's host as the user named it.
  const std::string& listen = options_.listenHost;
  if (!listen.empty() && !common::isWildcardAddress(listen)) site.storeHost = listen;
  site.portHost = listen;
  site.defaultConnectTimeout = options_.defaultConnectTimeout;
  site.detached = &detached_;
  return site;
}

std::string LedJobs::submit(coord::JobSpec spec, const std::string& submittedBy) {
  checkRunnable(spec, site());
  reapFinished();
  auto job = std::make_unique<Job>();
  job->id = records_.newJobId();
  spec.jobId = job->id;
  job->spec = spec;

  records_.createPending(spec);
  // A submitted job may wait in the queue past this agent's life: its request is kept until
  // it starts.
  if (spec.detach && !records_.saveRequest(spec)) {
    // Not recorded is not accepted: a queued job whose request is lost would vanish at a restart.
    const int error = errno;
    records_.discard(job->id);
    throw records::StateWriteError(
        "cannot record the job: writing its request under the state directory failed: " +
            std::string(std::strerror(error)) + " (" + records_.space()->describe() +
            "); free space there, or restart hvdagent with another --state-dir",
        error);
  }
  return start(std::move(job), submittedBy);
}

std::string LedJobs::start(std::unique_ptr<Job> job, const std::string& submittedBy) {
  try {
    job->log = std::make_unique<records::JobLogWriter>(records_.logPath(job->id).value(),
                                                       options_.maxLogBytes, records_.space());
  } catch (const records::StateWriteError& e) {
    // Nothing started: the record says why rather than staying PENDING forever.
    records_.dropRequest(job->id);
    records_.failed(job->id, coord::JobOutcome::kLaunchFailed, contract::kExitLaunchFailed,
                    std::string("hvdrun: ") + e.what(), e.what());
    throw;
  }
  hvd::logging::program("jobs")->info("job {}: np {} on {} host(s), '{}', {} by {}", job->id,
                                      job->spec.np, job->spec.hosts.size(), job->spec.argv[0],
                                      job->spec.detach ? "submitted" : "run", submittedBy);
  Job* raw = job.get();
  coord::JobSpec spec = job->spec;
  const std::string& listen = options_.listenHost;
  if (!listen.empty() && !common::isWildcardAddress(listen)) spec.masterAddr = listen;
  if (spec.elastic.enabled) {
    job->elasticSink = std::make_unique<JobSink>(job->log.get(), job->changed.get(), 0);
    job->elastic = std::make_unique<LedElasticJob>(std::move(spec), site(), job->elasticSink.get());
  } else {
    job->steps = std::make_unique<Steps>(this, raw);
    job->attempts = std::make_unique<JobAttempts>(std::move(spec), site(), job->steps.get());
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (shuttingDown_) {
      records_.cancelledUnstarted(raw->id);
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

int LedJobs::resumeQueued() {
  int resumed = 0;
  const std::vector<std::string> queued = records_.queuedJobs();  // in submission order
  {
    // Their places first, in that order: each job's own thread comes to it later, in whatever
    // order the threads run.
    std::lock_guard<std::mutex> lock(mutex_);
    for (const std::string& id : queued) {
      queue_.push_back(id);
      turns_[id] = Turn::kDeciding;
    }
  }
  for (const std::string& id : queued) {
    try {
      std::optional<coord::JobSpec> saved = records_.savedRequest(id);
      if (!saved) throw InvalidArgumentError("its saved request cannot be read");
      coord::JobSpec spec = std::move(*saved);
      checkRunnable(spec, site());
      // What ps and status showed is what runs, or nothing does.
      if (const std::string why = records_.disagreement(id, spec); !why.empty()) {
        throw InvalidArgumentError("its record and its saved request disagree on " + why);
      }
      spec.jobId = id;
      auto job = std::make_unique<Job>();
      job->id = id;
      job->spec = std::move(spec);
      start(std::move(job), "a previous agent's queue");
      ++resumed;
    } catch (const std::exception& e) {
      leaveQueue(id);
      hvd::logging::program("jobs")->warn("job {}: cannot resume it from the queue: {}", id,
                                          e.what());
      records_.dropRequest(id);
      records_.failed(id, coord::JobOutcome::kInvalidJob, contract::kExitUsage,
                      std::string("hvdrun: job ") + id +
                          " could not be resumed after the agent restarted: " + e.what(),
                      e.what());
    }
  }
  return resumed;
}

void LedJobs::leaveQueue(const std::string& id) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.erase(std::remove(queue_.begin(), queue_.end(), id), queue_.end());
    turns_.erase(id);
  }
  queueChanged_->bump();
}

void LedJobs::setTurn(const std::string& id, Turn turn) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Turn& current = turns_[id];
    // Only a change wakes the others: a waiting job's every busy retry would wake itself too.
    if (current == turn) return;
    current = turn;
  }
  queueChanged_->bump();
}

coord::JobCoordinator::Start LedJobs::waitAndStart(Job* job, StartGate& coordinator,
                                                   bool restarting) {
  using Start = coord::JobCoordinator::Start;
  const std::string& id = job->id;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // A restart held its resources a moment ago: it goes first, not behind jobs that queued
    // while it ran.
    if (restarting) {
      queue_.push_front(id);
      turns_[id] = Turn::kDeciding;
    } else if (turns_.count(id) == 0) {  // else resumeQueued placed it already
      queue_.push_back(id);
      turns_[id] = Turn::kDeciding;
    }
  }
  std::string shown;
  for (;;) {
    const uint64_t seen = queueChanged_->current();
    std::string ahead;      // the first job ahead that waits for resources
    bool deciding = false;  // a job ahead is still finding out whether it can start
    bool cancelled = false;
    bool suspend = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (const std::string& other : queue_) {
        if (other == id) break;
        const Turn turn = turns_[other];
        if (turn == Turn::kStarting) continue;
        if (turn == Turn::kDeciding) deciding = true;
        if (turn == Turn::kWaiting) ahead = other;
        break;
      }
      cancelled = job->cancelRequested;
      // A submitted job that has not started outlives a graceful shutdown as it outlives a
      // crash: nothing of it ran. An attached one is its caller's, and a restart is a job that
      // ran; those end with the agent.
      suspend = shuttingDown_ && !cancelled && !restarting && job->spec.detach && !job->startTried;
      if (!suspend && ((ahead.empty() && !deciding) || cancelled)) job->startTried = true;
    }
    if (suspend) {
      leaveQueue(id);
      return Start::kEnded;
    }
    std::string reason;
    if ((ahead.empty() && !deciding) || cancelled) {
      const Start started =
          coordinator.tryStart(job->spec.queue, [&] { setTurn(id, Turn::kStarting); });
      if (started != Start::kBusy) {
        leaveQueue(id);
        return started;
      }
      {
        // Nothing started: until the next try, a shutdown keeps it queued.
        std::lock_guard<std::mutex> lock(mutex_);
        job->startTried = false;
      }
      setTurn(id, Turn::kWaiting);
      reason = coordinator.busyReason();
    } else if (deciding) {
      // Wait for the answer of the job ahead (a moment): it starts, or it waits ahead of this
      // one. Nothing to show meanwhile.
      queueChanged_->waitPast(seen, options_.queuePoll);
      continue;
    } else if (!job->spec.queue) {
      // --no-queue does not jump the queue: the jobs ahead would wait longer.
      coordinator.endUnstarted("hvdrun: job " + id + " was not queued (--no-queue): " + "job " +
                                   ahead + " is waiting ahead of it",
                               "job " + ahead + " is waiting ahead of it");
      leaveQueue(id);
      return Start::kEnded;
    } else {
      reason = "queued behind job " + ahead;
    }
    if (reason != shown) {
      hvd::logging::program("jobs")->info("job {}: queued: {}", id, reason);
      records_.queued(id, reason);
      job->changed->bump();
      shown = reason;
    }
    queueChanged_->waitPast(seen, options_.queuePoll);
  }
}

void LedJobs::runElastic(Job* job) {
  const std::string& id = job->id;
  LedElasticJob& elastic = *job->elastic;
  ElasticGate gate(elastic);
  std::optional<coord::JobResult> ended;
  const coord::JobCoordinator::Start started = waitAndStart(job, gate, /*restarting=*/false);
  if (started == coord::JobCoordinator::Start::kRunning) {
    records_.dropRequest(id);
    // Its ranks change with its rounds: the record lists none (the log has their lines).
    records_.attemptStarted(id, 0, elastic.spec(), true, {}, {});
    job->changed->bump();
    hvd::logging::program("jobs")->info("job {}: elastic, discovery started", id);
    std::vector<records::RoundEntry> recorded;  // the rounds as the record has them
    size_t counted = 0;                         // of those, in elasticRounds_ (only grows)
    ended = elastic.run([job] { job->elasticSink->waitEnded(std::chrono::milliseconds(150)); },
                        [&](const std::vector<RoundRecord>& rounds) {
                          if (rounds.size() > counted) {
                            elasticRounds_ += rounds.size() - counted;
                            counted = rounds.size();
                          }
                          std::vector<records::RoundEntry> now = roundEntries(rounds);
                          if (now == recorded) return;
                          records_.roundsChanged(id, now);
                          recorded = std::move(now);
                          job->changed->bump();
                        });
  } else {
    ended = elastic.result();
  }
  finishRun(job, ended);
}

void LedJobs::run(Job* job) {
  if (job->elastic) {
    runElastic(job);
    return;
  }
  finishRun(job, job->attempts->run());
}

void LedJobs::finishRun(Job* job, const std::optional<coord::JobResult>& ended) {
  const std::string& id = job->id;
  if (!ended) {
    // Put aside by a shutdown before it started (waitAndStart).
    job->log->close();
    records_.queued(id, "its agent stopped before it started; it starts once the agent is back");
    hvd::logging::program("jobs")->info(
        "job {}: kept in the queue for the next agent (not started)", id);
    job->done = true;
    job->changed->bump();
    return;
  }
  const coord::JobResult& result = *ended;
  job->log->close();
  records_.dropRequest(id);
  std::string cancelReason;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    cancelReason = job->cancelReason;
  }
  coord::JobResult recorded = result;
  if (result.outcome == coord::JobOutcome::kCancelled && !cancelReason.empty()) {
    recorded.reason = cancelReason;
    recorded.summary = result.summary + " (" + cancelReason + ")";
  }
  records_.ended(id, recorded, job->log->dropped(), job->log->dropReasons());
  hvd::logging::program("jobs")->info("job {}: ended, exit code {}: {}", id, result.exitCode,
                                      result.summary);
  records_.prune();
  job->done = true;
  job->changed->bump();
}

// After an exception escaped run(): the job must still end, its ranks stopped, its record final
// and its readers woken, or it would keep its ranks and read RUNNING forever. Each step is
// guarded on its own so that one failing does not skip the others.
void LedJobs::abandon(Job* job, const std::string& what) {
  const std::string& id = job->id;
  const std::string role = "job " + id + " (leader, ending it)";
  leaveQueue(id);
  common::runGuarded(role, [&] {
    if (job->attempts) job->attempts->abandon();
    if (job->elastic) job->elastic->abandon();
  });
  common::runGuarded(role, [&] {
    if (job->log) job->log->close();
  });
  common::runGuarded(role, [&] { records_.dropRequest(id); });
  common::runGuarded(role, [&] {
    // The leader lost track of its job, as if its agent had gone: the program did not fail.
    records_.failed(id, coord::JobOutcome::kAgentLost, contract::kExitInternalError,
                    "hvdrun: internal error in the agent leading job " + id + ": " + what +
                        "; its ranks were stopped",
                    "internal error: " + what);
  });
  job->done = true;
  job->changed->bump();
}

LedJobs::Counts LedJobs::counts() const {
  Counts counts;
  counts.restarts = restarts_;
  counts.elasticRounds = elasticRounds_;
  std::lock_guard<std::mutex> lock(mutex_);
  counts.queued = queue_.size();
  return counts;
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
    if (it != running_.end() && !it->second->done) {
      Job& job = *it->second;
      if (job.cancelReason.empty()) job.cancelReason = reason;
      // Also what the next attempt, or one still being set up, starts with: cancelled.
      job.cancelRequested = true;
      // Under mutex_ so the job cannot be reaped meanwhile; cancel() only queues stops.
      if (job.attempts) job.attempts->cancel(grace);
      if (job.elastic) job.elastic->cancel(grace);
      outcome.found = true;
      outcome.wasRunning = true;
    }
  }
  queueChanged_->bump();  // a queued job ends now rather than at its next poll
  if (const std::optional<coord::JobState> state = records_.stateOf(jobId)) {
    outcome.found = true;
    outcome.state = *state;
  }
  return outcome;
}

void LedJobs::shutdown() {
  std::vector<std::string> ids;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    shuttingDown_ = true;
    for (const auto& [id, job] : running_) {
      // A detached job that has not tried to start stays queued (waitAndStart sees the shutdown).
      if (job->spec.detach && !job->startTried) continue;
      ids.push_back(id);
    }
  }
  for (const std::string& id : ids) cancel(id, std::nullopt, "the agent shut down");
  queueChanged_->bump();  // the queued ones wake and step aside
}

void LedJobs::join() {
  std::map<std::string, std::unique_ptr<Job>> jobs;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs.swap(running_);
  }
  for (auto& [id, job] : jobs) job->thread.join();
}

}  // namespace hvd::agent::jobs
