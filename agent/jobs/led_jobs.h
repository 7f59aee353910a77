// The jobs an agent leads: the job's store and coordination live on the leader agent, and a
// client that disconnects changes nothing for the job. SubmitJob hands the job here; from
// then on it runs on a thread of its own, whoever is connected:
//
//   * a queue: a job whose slots or GPUs are held by other jobs is QUEUED with the reason and
//     starts in submission order once they are free (each agent's ledger, agent/ledger); a
//     submitted (detached) job that waits survives a restart of this agent;
//   * attempts: JobAttempts (attempts.h) over this node and the other hosts' agents
//     (RemoteAgentFactory), restarted while the job's restart policy allows, each with its own
//     store namespace and token, the job with its own MASTER_PORT (several jobs at once share
//     nothing but the agent); LedJobs adds the queue wait before each start, the pace (the
//     job's sink, at least every 150 ms for stop deadlines and --time-limit) and the records;
//   * its record (JobHistory, written through LedJobRecords) rewritten at each change of state,
//     every attempt listed, and every output line appended to its log (JobLogWriter) as it
//     arrives;
//   * at the end: hosts released, store namespace removed, log closed, then the final record
//     written (so a reader that sees a final state has every line), then old jobs pruned.
//
// Readers (an attached run, `hvdrun logs -f`, `hvdrun attach`: agent/service/job_log_stream.h)
// follow the log file, woken by the job's own changedOf(); they never hold up the job, and a slow
// one loses nothing.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "agent/coordinator/job_coordinator.h"
#include "agent/coordinator/job_state.h"
#include "agent/jobs/attempts.h"
#include "agent/jobs/led_elastic.h"
#include "agent/jobs/local_host.h"
#include "agent/ledger/resource_ledger.h"
#include "agent/records/led_job_records.h"
#include "agent/relay/detached_trees.h"
#include "agent/relay/subtree_link.h"

namespace hvd::store {
class TcpStoreServer;
}

namespace hvd::agent::jobs {

struct LedJobsOptions {
  std::string listenHost = "127.0.0.1";  // where MASTER_PORT is picked
  std::chrono::milliseconds defaultConnectTimeout{5000};
  uint64_t maxLogBytes = uint64_t{1} << 30;  // per job (--max-log-mb)
  RemoteAgentFactory remoteAgents;           // empty: single-host jobs only
  LocalHost::Describer describeLocal;
  // This node's ledger, whose releases wake the queue (may be null: the queue then only polls).
  ledger::ResourceLedger* ledger = nullptr;
  // How often the head of the queue asks again whether its hosts are free: other hosts'
  // releases are not signalled to this agent.
  std::chrono::milliseconds queuePoll{1000};
};

// A counter that readers wait on: bumped by every logged line and every change of state.
class ChangeSignal {
 public:
  uint64_t current() const;
  void bump();
  // Returns once the counter differs from `seen` or `timeout` passed.
  void waitPast(uint64_t seen, std::chrono::milliseconds timeout) const;

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable cv_;
  uint64_t value_ = 0;
};

class LedJobs {
 public:
  // jobs, store and history must outlive this.
  LedJobs(LedJobsOptions options, LocalHost* local, store::TcpStoreServer* store,
          records::JobHistory* history);
  // shutdown(), then waits for every job's thread.
  ~LedJobs();

  // Records the job (PENDING) and starts it on its own thread; returns its id. Throws
  // hvd::InvalidArgumentError for a job this agent cannot lead (named why), hvd::PeerError when
  // the agent is shutting down, records::StateWriteError when it cannot be recorded.
  std::string submit(coordinator::JobSpec spec, const std::string& submittedBy);
  // At start-up: the queued submitted jobs a previous agent left (JobHistory kept them QUEUED)
  // join the queue again in submission order. Returns how many; a job whose saved request
  // cannot be read or run is marked FAILED with the reason.
  int resumeQueued();

  struct CancelOutcome {
    bool found = false;
    bool wasRunning = false;  // false: it had ended, nothing changed
    coordinator::JobState state = coordinator::JobState::kUnspecified;
  };
  // Graceful stop of a running job (JobCoordinator::cancel; a second within 2 s kills).
  CancelOutcome cancel(const std::string& jobId,
                       std::optional<std::chrono::milliseconds> grace = std::nullopt,
                       const std::string& reason = "");

  // Refuses new jobs and cancels the running ones (reason: the agent shut down). A detached job
  // that has not started stays QUEUED, its request kept, for the next agent's resumeQueued(),
  // as after a crash; an attached one ends with its caller's agent.
  void shutdown();
  // Waits for every job's thread to end.
  void join();

  // What a reader of job `jobId` waits on: bumped by each of its logged lines and changes of
  // state. A job no longer running gets a signal nobody bumps (its record is final already).
  std::shared_ptr<const ChangeSignal> changedOf(const std::string& jobId) const;
  // The jobs' records (job_history.h), for the readers that answer with them (agent/service).
  records::JobHistory* history() const { return records_.history(); }

  // What the agent's metrics read of the led jobs: the queue now, and counts since this agent
  // started.
  struct Counts {
    size_t queued = 0;      // jobs in the queue now (waiting, or deciding whether they can start)
    uint64_t restarts = 0;  // attempts started again after a failure (restart policy)
    uint64_t elasticRounds = 0;  // rounds elastic jobs began, each job's first included
  };
  Counts counts() const;

 private:
  struct Job;
  class Steps;
  // Where this agent's jobs run their attempts.
  AttemptSite site();
  std::string start(std::unique_ptr<Job> job, const std::string& submittedBy);
  void run(Job* job);
  // How a job starts at its turn: its attempt's coordinator, or its elastic job.
  class StartGate {
   public:
    virtual ~StartGate() = default;
    virtual coordinator::JobCoordinator::Start tryStart(bool queue,
                                                        const std::function<void()>& starting) = 0;
    virtual std::string busyReason() const = 0;
    virtual void endUnstarted(const std::string& summary, const std::string& reason) = 0;
  };
  class CoordinatorGate;
  class ElasticGate;
  // Waits for the job's turn and its resources; the gate's start outcome.
  coordinator::JobCoordinator::Start waitAndStart(Job* job, StartGate& gate, bool restarting);
  // An elastic job (spec.elastic.enabled) from its turn to its end.
  void runElastic(Job* job);
  // The end of a job's run (nullopt: put aside unstarted): the log closed, the record final.
  void finishRun(Job* job, const std::optional<coordinator::JobResult>& ended);
  void leaveQueue(const std::string& id);
  // Where a queued job is (turns_). The queue holds the jobs that wait for resources: one
  // whose first try is still deciding holds up the jobs behind it (they wait for its answer,
  // and --no-queue fails for none of them meanwhile); one that has reserved its resources and
  // is starting holds up no one; one that found them taken is waiting, ahead of the rest.
  enum class Turn { kDeciding, kStarting, kWaiting };
  void setTurn(const std::string& id, Turn turn);
  void abandon(Job* job, const std::string& what);
  void reapFinished();

  const LedJobsOptions options_;
  LocalHost* const local_;
  store::TcpStoreServer* const store_;
  records::LedJobRecords records_;
  relay::DetachedTrees detached_;  // finished attempts' hosts, until their last calls are answered

  std::atomic<uint64_t> restarts_{0};
  std::atomic<uint64_t> elasticRounds_{0};

  mutable std::mutex mutex_;
  bool shuttingDown_ = false;
  std::map<std::string, std::unique_ptr<Job>> running_;
  std::deque<std::string> queue_;      // ids of jobs waiting to start, in turn order
  std::map<std::string, Turn> turns_;  // of every id in queue_
  // Bumped by every change that may let a queued job start: a ledger release, a job leaving
  // the queue, a cancel. Shared with the ledger's callback, which may outlive this object.
  std::shared_ptr<ChangeSignal> queueChanged_ = std::make_shared<ChangeSignal>();
};

}  // namespace hvd::agent::jobs
