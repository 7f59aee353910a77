#include "agent/jobs/led_jobs.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "agent/auth/cluster_key.h"
#include "agent/common/thread_guard.h"
#include "agent/coordinator/restart_policy.h"
#include "agent/relay/tree_hosts.h"
#include "agent/relay/tree_shape.h"
#include "agent/rpc/convert.h"
#include "agent/rpc/net.h"
#include "common/logging.h"
#include "common/unix_time.h"
#include "contract/exit_codes.h"
#include "hvd/error.hpp"
#include "store/tcp_store_server.h"

namespace hvd::agent::jobs {
namespace {

namespace coord = coordinator;

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

void setResources(const std::vector<coord::HostResources>& resources, v1::JobInfo* info) {
  info->clear_resources();
  for (const coord::HostResources& r : resources) {
    v1::HostResources* out = info->add_resources();
    out->set_host(r.host);
    out->set_slots(r.slots);
    for (int g : r.gpus) out->add_gpus(g);
    for (const std::string& u : r.gpuUuids) out->add_gpu_uuids(u);
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
  coord::JobSpec spec;  // as submitted: attempt 0
  v1::SubmitJobRequest request;
  std::unique_ptr<records::JobLogWriter> log;
  coord::SteadyClock clock;
  std::shared_ptr<ChangeSignal> changed = std::make_shared<ChangeSignal>();
  // The attempt in progress; replaced between attempts under LedJobs::mutex_.
  std::unique_ptr<LocalHost::View> local;
  std::unique_ptr<relay::TreeHosts> remotes;  // the other hosts, through the relay tree
  std::unique_ptr<JobSink> sink;
  std::unique_ptr<coord::JobCoordinator> coordinator;
  // Set under LedJobs::mutex_.
  std::string cancelReason;
  bool cancelRequested = false;
  std::optional<std::chrono::milliseconds> cancelGrace;
  // From the first try to start its ranks on: a shutdown cancels the job rather than keeping it
  // queued, since ranks may run.
  bool startTried = false;
  // Kept in the queue by a shutdown before it started: its record stays QUEUED with its request,
  // for the next agent (LedJobs::resumeQueued).
  bool suspended = false;
  std::thread thread;
  std::atomic<bool> done{false};
};

LedJobs::LedJobs(LedJobsOptions options, LocalHost* local, store::TcpStoreServer* store,
                 records::JobHistory* history)
    : options_(std::move(options)), local_(local), store_(store), history_(history) {
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

void LedJobs::validate(const coord::JobSpec& spec, const v1::SubmitJobRequest& request) const {
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
    if (request.tree_width() < 0) {
      throw InvalidArgumentError("the tree width must be at least 1 (0: the default, " +
                                 std::to_string(relay::kDefaultTreeWidth) + ")");
    }
    for (int i = 1; i < request.hosts_size(); ++i) {
      if (request.hosts(i).agent_address().empty()) {
        throw InvalidArgumentError("host '" + request.hosts(i).host() + "' has no agent address");
      }
    }
  }
}

std::string LedJobs::submit(coord::JobSpec spec, const v1::SubmitJobRequest& request,
                            const std::string& submittedBy) {
  validate(spec, request);
  reapFinished();
  auto job = std::make_unique<Job>();
  job->id = history_->newJobId();
  spec.jobId = job->id;
  job->spec = spec;
  job->request = request;

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
  info.set_max_restarts(spec.restart.maxRestarts);
  history_->create(info);
  // A submitted job may wait in the queue past this agent's life: its request is kept until
  // it starts.
  if (request.detach() && !history_->saveRequest(job->id, request)) {
    // Not recorded is not accepted: a queued job whose request is lost would vanish at a restart.
    const int error = errno;
    history_->discard(job->id);
    throw records::StateWriteError(
        "cannot record the job: writing its request under the state directory failed: " +
            std::string(std::strerror(error)) + " (" + history_->space()->describe() +
            "); free space there, or restart hvdagent with another --state-dir",
        error);
  }
  return start(std::move(job), submittedBy);
}

std::string LedJobs::start(std::unique_ptr<Job> job, const std::string& submittedBy) {
  try {
    job->log = std::make_unique<records::JobLogWriter>(history_->logPath(job->id).value(),
                                                       options_.maxLogBytes, history_->space());
  } catch (const records::StateWriteError& e) {
    // Nothing started: the record says why rather than staying PENDING forever.
    history_->dropRequest(job->id);
    history_->update(job->id, [&](v1::JobInfo* i) {
      i->set_state(v1::JOB_FAILED);
      i->set_ended_unix_ms(nowUnixMs());
      i->mutable_end()->set_job_id(job->id);
      i->mutable_end()->set_outcome(v1::LAUNCH_FAILED);
      i->mutable_end()->set_exit_code(contract::kExitLaunchFailed);
      i->mutable_end()->set_summary(std::string("hvdrun: ") + e.what());
      i->mutable_end()->set_reason(e.what());
      i->mutable_end()->set_rank(-1);
    });
    throw;
  }
  hvd::logging::program("jobs")->info("job {}: np {} on {} host(s), '{}', {} by {}", job->id,
                                      job->spec.np, job->spec.hosts.size(), job->spec.argv[0],
                                      job->request.detach() ? "submitted" : "run", submittedBy);
  Job* raw = job.get();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (shuttingDown_) {
      history_->update(raw->id, [](v1::JobInfo* i) {
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

namespace {

// Where a queued job's record (what ps and status show) and its saved request (what would run)
// differ: "" when they agree.
std::string disagreement(const v1::JobInfo& info, const coord::JobSpec& spec) {
  const std::vector<std::string> argv(info.argv().begin(), info.argv().end());
  if (argv != spec.argv) return "the command";
  if (info.np() != spec.np) return "-np";
  if (info.cwd() != spec.cwd) return "the working directory";
  if (static_cast<size_t>(info.hosts_size()) != spec.hosts.size()) return "the hosts";
  for (size_t i = 0; i < spec.hosts.size(); ++i) {
    if (info.hosts(static_cast<int>(i)) != spec.hosts[i].host) return "the hosts";
  }
  return {};
}

}  // namespace

int LedJobs::resumeQueued() {
  int resumed = 0;
  std::vector<std::string> queued;
  for (const v1::JobInfo& info : history_->list()) {  // in submission order
    if (info.state() == v1::JOB_QUEUED) queued.push_back(info.job_id());
  }
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
      std::optional<v1::SubmitJobRequest> request = history_->savedRequest(id);
      if (!request) throw InvalidArgumentError("its saved request cannot be read");
      coord::JobSpec spec = rpc::fromProto(*request);
      validate(spec, *request);
      // What ps and status showed is what runs, or nothing does.
      if (const std::optional<v1::JobInfo> info = history_->get(id)) {
        if (const std::string why = disagreement(*info, spec); !why.empty()) {
          throw InvalidArgumentError("its record and its saved request disagree on " + why);
        }
      }
      spec.jobId = id;
      auto job = std::make_unique<Job>();
      job->id = id;
      job->spec = std::move(spec);
      job->request = std::move(*request);
      start(std::move(job), "a previous agent's queue");
      ++resumed;
    } catch (const std::exception& e) {
      leaveQueue(id);
      hvd::logging::program("jobs")->warn("job {}: cannot resume it from the queue: {}", id,
                                          e.what());
      history_->dropRequest(id);
      history_->update(id, [&](v1::JobInfo* i) {
        i->set_state(v1::JOB_FAILED);
        i->set_ended_unix_ms(nowUnixMs());
        i->mutable_end()->set_job_id(id);
        i->mutable_end()->set_outcome(v1::INVALID_JOB);
        i->mutable_end()->set_exit_code(contract::kExitUsage);
        i->mutable_end()->set_summary(
            std::string("hvdrun: job ") + id +
            " could not be resumed after the agent restarted: " + e.what());
        i->mutable_end()->set_reason(e.what());
        i->mutable_end()->set_rank(-1);
      });
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

coord::JobCoordinator::Start LedJobs::waitAndStart(Job* job, bool restarting) {
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
      suspend =
          shuttingDown_ && !cancelled && !restarting && job->request.detach() && !job->startTried;
      job->suspended = suspend;
      if (!suspend && ((ahead.empty() && !deciding) || cancelled)) job->startTried = true;
    }
    if (suspend) {
      leaveQueue(id);
      return Start::kEnded;
    }
    std::string reason;
    if ((ahead.empty() && !deciding) || cancelled) {
      const Start started =
          job->coordinator->tryStart(job->spec.queue, [&] { setTurn(id, Turn::kStarting); });
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
      reason = job->coordinator->busyReason();
    } else if (deciding) {
      // Wait for the answer of the job ahead (a moment): it starts, or it waits ahead of this
      // one. Nothing to show meanwhile.
      queueChanged_->waitPast(seen, options_.queuePoll);
      continue;
    } else if (!job->spec.queue) {
      // --no-queue does not jump the queue: the jobs ahead would wait longer.
      job->coordinator->endUnstarted("hvdrun: job " + id + " was not queued (--no-queue): " +
                                         "job " + ahead + " is waiting ahead of it",
                                     "job " + ahead + " is waiting ahead of it");
      leaveQueue(id);
      return Start::kEnded;
    } else {
      reason = "queued behind job " + ahead;
    }
    if (reason != shown) {
      hvd::logging::program("jobs")->info("job {}: queued: {}", id, reason);
      history_->update(id, [&](v1::JobInfo* info) {
        info->set_state(v1::JOB_QUEUED);
        info->set_queue_reason(reason);
      });
      job->changed->bump();
      shown = reason;
    }
    queueChanged_->waitPast(seen, options_.queuePoll);
  }
}

coord::JobResult LedJobs::runAttempt(Job* job, int attempt, const coord::JobSpec& spec) {
  const std::string& id = job->id;
  // Each attempt reaches its own store namespace with its own token: a rank of an earlier
  // attempt that is still around is refused, and no key it wrote (an NCCL id) survives.
  const std::string token = auth::randomHex(32);
  store_->removeJob(id);
  store_->addJob(id, token);
  {
    auto local =
        std::make_unique<LocalHost::View>(local_, spec.hosts[0].host, options_.describeLocal);
    std::vector<coord::NodeAgent*> agents = {local.get()};
    const std::chrono::milliseconds timeout =
        job->request.connect_timeout_ms() > 0
            ? std::chrono::milliseconds(job->request.connect_timeout_ms())
            : options_.defaultConnectTimeout;
    std::vector<relay::Target> others;
    for (size_t h = 1; h < spec.hosts.size(); ++h) {
      std::string address;
      for (const v1::HostEntry& entry : job->request.hosts()) {
        if (entry.host() == spec.hosts[h].host) address = entry.agent_address();
      }
      others.push_back({spec.hosts[h].host, address});
    }
    const int width =
        job->request.tree_width() > 0 ? job->request.tree_width() : relay::kDefaultTreeWidth;
    auto remotes = std::make_unique<relay::TreeHosts>(
        std::move(others), width,
        [factory = options_.remoteAgents, timeout](const relay::Target& t) {
          return factory(RemoteHost{t.host, t.address, timeout});
        });
    for (coord::NodeAgent* agent : remotes->agents()) agents.push_back(agent);
    // The ranks reach this agent's store (and rank 0's MASTER_PORT) at the address the agent
    // listens on when that is one specific address: it is reachable by construction and needs
    // no name resolution (the node names of a Slurm allocation, say). A wildcard bind leaves
    // the leader's host as the user named it.
    const std::string& listen = options_.listenHost;
    const bool specific = !listen.empty() && !rpc::isWildcardAddress(listen);
    const std::string storeHost = specific ? listen : spec.hosts[0].host;
    const std::string storeAddress = rpc::joinHostPort(storeHost, store_->port());
    auto sink = std::make_unique<JobSink>(job->log.get(), job->changed.get(), attempt);
    auto coordinator = std::make_unique<coord::JobCoordinator>(
        spec, agents, coord::StoreEndpoint{storeAddress, token}, sink.get(), &job->clock,
        remotes.get());
    std::lock_guard<std::mutex> lock(mutex_);
    job->local = std::move(local);
    job->remotes = std::move(remotes);
    job->sink = std::move(sink);
    job->coordinator = std::move(coordinator);
    // A cancel between attempts, or while this one was being set up, still ends it.
    if (job->cancelRequested) job->coordinator->cancel(job->cancelGrace);
  }
  const coord::JobCoordinator::Start started = waitAndStart(job, attempt > 0);
  if (job->suspended) {
    // Kept for the next agent: nothing of it ran; only the attempt's set-up goes.
    tearDownAttempt(job);
    return {};
  }
  // Every rank started (it may have ended already: a fast failure is still an attempt that ran).
  if (started == coord::JobCoordinator::Start::kRunning && job->coordinator->launched()) {
    history_->dropRequest(id);
    const int64_t now = nowUnixMs();
    const bool running = !job->coordinator->finished();
    history_->update(id, [&](v1::JobInfo* info) {
      if (running) info->set_state(v1::JOB_RUNNING);
      info->clear_queue_reason();
      if (info->started_unix_ms() == 0) info->set_started_unix_ms(now);
      info->set_restart_count(attempt);
      setRanks(job->coordinator->ranks(), info);
      setResources(job->coordinator->resources(), info);
      v1::AttemptInfo* a = info->add_attempts();
      a->set_attempt(attempt);
      for (const auto& h : spec.hosts) a->add_hosts(h.host);
      a->set_started_unix_ms(now);
    });
    job->changed->bump();
    hvd::logging::program("jobs")->info("job {} attempt {}: every rank started", id, attempt);
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
  // Teardown before anything else sees the end: no host may still deliver lines after readers
  // saw it, and the next attempt must find this one's resources released.
  tearDownAttempt(job);
  history_->update(id, [&](v1::JobInfo* info) {
    setRanks(job->coordinator->ranks(), info);
    if (info->attempts_size() == 0 || info->attempts().rbegin()->attempt() != attempt) {
      // It never got every rank started: still an attempt, with no start time.
      v1::AttemptInfo* a = info->add_attempts();
      a->set_attempt(attempt);
      for (const auto& h : spec.hosts) a->add_hosts(h.host);
    }
    v1::AttemptInfo* a = info->mutable_attempts(info->attempts_size() - 1);
    a->set_ended_unix_ms(nowUnixMs());
    *a->mutable_end() = rpc::toProto(result);
  });
  hvd::logging::program("jobs")->info("job {} attempt {}: ended, exit code {}: {}", id, attempt,
                                      result.exitCode, result.summary);
  return result;
}

void LedJobs::tearDownAttempt(Job* job) {
  std::unique_ptr<relay::TreeHosts> remotes;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    remotes.swap(job->remotes);
  }
  // No remote event of this attempt after this (its streams are closed).
  if (remotes) remotes->closeLaunches();
  // Releases the local group: leftovers SIGKILLed, ranks reaped. Their exits still reach the
  // coordinator, whose stops go through the remote hosts' call batch: those must outlive this.
  job->local->finish();
  // Their last Stops and Unreserves finish in the background, so a host that does not answer
  // them delays nobody.
  if (remotes) detached_.keep(std::move(remotes));
  store_->removeJob(job->id);
}

void LedJobs::run(Job* job) {
  const std::string& id = job->id;
  coord::JobSpec spec = job->spec;
  // MASTER_PORT for torch env://: free on this agent's address now.
  if (const int port = rpc::pickFreePort(options_.listenHost); port > 0) spec.masterPort = port;
  const std::string& listen = options_.listenHost;
  if (!listen.empty() && !rpc::isWildcardAddress(listen)) spec.masterAddr = listen;

  coord::JobResult result;
  std::optional<coord::JobResult> previous;  // the failure that caused this attempt
  for (int attempt = 0;; ++attempt) {
    spec.attempt = attempt;
    coord::JobResult ended = runAttempt(job, attempt, spec);
    if (job->suspended) {
      job->log->close();
      history_->update(id, [](v1::JobInfo* info) {
        info->set_state(v1::JOB_QUEUED);
        info->set_queue_reason(
            "its agent stopped before it started; it starts once the agent is back");
      });
      hvd::logging::program("jobs")->info(
          "job {}: kept in the queue for the next agent (not started)", id);
      job->done = true;
      job->changed->bump();
      return;
    }
    if (previous && ended.uptime.count() == 0 &&
        (ended.outcome == coord::JobOutcome::kInvalidJob ||
         ended.outcome == coord::JobOutcome::kAgentUnreachable ||
         ended.outcome == coord::JobOutcome::kLaunchFailed)) {
      // The restart could not start (the lost host's share fits nowhere else, an agent is
      // gone): the failure that asked for it stays the root cause.
      result = *previous;
      result.summary +=
          " (restart " + std::to_string(attempt) + " could not start: " + ended.reason + ")";
      break;
    }
    result = ended;
    bool stopping = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping = job->cancelRequested || shuttingDown_;
    }
    const coord::RestartDecision decision = coord::decideRestart(spec.restart, ended, attempt);
    if (!decision.restart || stopping) {
      if (!decision.why.empty()) result.summary += " (" + decision.why + ")";
      break;
    }
    // Same placement where free: the same hosts, less one whose agent was lost, and each
    // host's GPUs of this attempt asked for again.
    std::vector<std::vector<int>> preferred;
    const std::vector<coord::HostResources> held = job->coordinator->resources();
    std::vector<contract::HostSlots> hosts;
    for (size_t h = 0; h < spec.hosts.size(); ++h) {
      if (h > 0 && ended.outcome == coord::JobOutcome::kAgentLost &&
          spec.hosts[h].host == ended.host) {
        continue;
      }
      hosts.push_back(spec.hosts[h]);
      std::vector<int> gpus;
      for (const coord::HostResources& r : held) {
        if (r.host == spec.hosts[h].host) gpus = r.gpus;
      }
      preferred.push_back(std::move(gpus));
    }
    spec.hosts = std::move(hosts);
    spec.preferredGpus = std::move(preferred);
    hvd::logging::program("jobs")->warn("job {}: restarting (restart {} of {}) after: {}", id,
                                        attempt + 1, spec.restart.maxRestarts, ended.summary);
    history_->update(id, [&](v1::JobInfo* info) { info->set_restart_count(attempt + 1); });
    job->changed->bump();
    previous = ended;
  }
  job->log->close();
  history_->dropRequest(id);
  std::string cancelReason;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    cancelReason = job->cancelReason;
  }
  history_->update(id, [&](v1::JobInfo* info) {
    info->set_state(stateOfOutcome(result.outcome));
    info->set_ended_unix_ms(nowUnixMs());
    info->clear_queue_reason();
    *info->mutable_end() = rpc::toProto(result);
    if (result.outcome == coord::JobOutcome::kCancelled && !cancelReason.empty()) {
      info->mutable_end()->set_reason(cancelReason);
      info->mutable_end()->set_summary(result.summary + " (" + cancelReason + ")");
    }
    info->set_log_lines_dropped(job->log->dropped());
    info->set_log_drop_reason(job->log->dropReasons());
  });
  hvd::logging::program("jobs")->info("job {}: ended, exit code {}: {}", id, result.exitCode,
                                      result.summary);
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
  leaveQueue(id);
  // The local ranks first: their exits reach the coordinator, which stops through the remote
  // hosts (tearDownAttempt says why).
  common::runGuarded(role, [&] {
    if (job->local) job->local->finish();
  });
  common::runGuarded(role, [&] {
    std::unique_ptr<relay::TreeHosts> remotes;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      remotes.swap(job->remotes);
    }
  });
  common::runGuarded(role, [&] { store_->removeJob(id); });
  common::runGuarded(role, [&] {
    if (job->log) job->log->close();
  });
  common::runGuarded(role, [&] { history_->dropRequest(id); });
  common::runGuarded(role, [&] {
    history_->update(id, [&](v1::JobInfo* info) {
      info->set_state(v1::JOB_FAILED);
      info->set_ended_unix_ms(nowUnixMs());
      v1::JobEnd* end = info->mutable_end();
      end->set_job_id(id);
      // The leader lost track of its job, as if its agent had gone: the program did not fail.
      end->set_outcome(v1::AGENT_LOST);
      end->set_exit_code(contract::kExitInternalError);
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
    if (it != running_.end() && !it->second->done) {
      Job& job = *it->second;
      if (job.cancelReason.empty()) job.cancelReason = reason;
      // Also what the next attempt, or one still being set up, starts with: cancelled.
      job.cancelRequested = true;
      if (grace) job.cancelGrace = grace;
      // Under mutex_ so the job cannot be reaped meanwhile; cancel() only queues stops.
      if (job.coordinator) job.coordinator->cancel(grace);
      outcome.found = true;
      outcome.wasRunning = true;
    }
  }
  queueChanged_->bump();  // a queued job ends now rather than at its next poll
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
    for (const auto& [id, job] : running_) {
      // A detached job that has not tried to start stays queued (waitAndStart sees the shutdown).
      if (job->request.detach() && !job->startTried) continue;
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

bool streamJobLog(const LedJobs& led, const std::string& jobId, const records::LogFilter& filter,
                  uint64_t* offset, bool follow, const std::function<bool()>& cancelled,
                  const std::function<bool(const std::vector<records::LogLine>&)>& emitLines,
                  const std::function<bool(const v1::JobEnd&)>& emitEnd,
                  const std::function<bool(const v1::JobInfo&)>& onRecord) {
  const std::optional<std::string> path = led.history()->logPath(jobId);
  if (!path) return true;
  const std::shared_ptr<const ChangeSignal> changed = led.changedOf(jobId);
  for (;;) {
    const uint64_t seen = changed->current();
    // The state first, then the lines: the log is complete once the record is final.
    const std::optional<v1::JobInfo> info = led.history()->get(jobId);
    const bool ended = !info || rpc::isFinalState(info->state());
    if (info && onRecord && !onRecord(*info)) return false;
    for (;;) {
      const uint64_t before = *offset;
      const std::vector<records::LogLine> lines = records::readLogLines(*path, offset, filter);
      if (!lines.empty() && !emitLines(lines)) return false;
      if (*offset == before) break;
    }
    if (ended) return info && info->has_end() ? emitEnd(info->end()) : true;
    if (!follow) return true;
    if (cancelled()) return false;
    changed->waitPast(seen, std::chrono::milliseconds(150));
  }
}

}  // namespace hvd::agent::jobs
