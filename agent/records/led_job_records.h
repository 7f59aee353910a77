// The records of the jobs an agent leads, in the jobs' own terms: LedJobs (agent/jobs) says what
// happened to a job with the coordinator's types, and this writes it into the job's record
// (JobHistory's JobInfo) and its saved request, converted by agent/rpc/convert.h. So the jobs
// never see a message, and the record's layout is decided in one place, beside JobHistory.
//
// Dependencies point one way: agent/jobs -> agent/records -> agent/rpc -> agent/coordinator;
// agent/rpc includes nothing of agent/records.
//
// Every call is one JobHistory::update (or read) of one job; an unknown id changes nothing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agent/coordinator/job_coordinator.h"
#include "agent/coordinator/job_state.h"

namespace hvd::agent::records {

class JobHistory;
class StateSpace;

// One round of an elastic job as its record lists it (LedJobs converts the job's RoundRecord).
struct RoundEntry {
  int number = 0;
  std::vector<std::string> hosts;  // "host:workers", in rank order
  int size = 0;
  int64_t startUnixMs = 0;
  int64_t endUnixMs = 0;  // 0: the current round
  std::string cause;      // why it began

  bool operator==(const RoundEntry& o) const {
    return number == o.number && hosts == o.hosts && size == o.size &&
           startUnixMs == o.startUnixMs && endUnixMs == o.endUnixMs && cause == o.cause;
  }
  bool operator!=(const RoundEntry& o) const { return !(*this == o); }
};

class LedJobRecords {
 public:
  // history must outlive this.
  explicit LedJobRecords(JobHistory* history) : history_(history) {}

  JobHistory* history() const { return history_; }

  // JobHistory's own, for the jobs (job_history.h).
  std::string newJobId() const;
  std::optional<std::string> logPath(const std::string& jobId) const;
  StateSpace* space() const;
  void discard(const std::string& jobId);
  int prune();

  // Records job spec.jobId as PENDING, submitted now. Throws as JobHistory::create.
  void createPending(const coordinator::JobSpec& spec);
  // The request of a job that may wait in the queue past this agent's life, kept until it
  // starts or ends. False when it cannot be written (errno says why).
  bool saveRequest(const coordinator::JobSpec& spec);
  // That request as the job it runs (jobId empty); nullopt when it cannot be read. Throws
  // hvd::InvalidArgumentError for a request no hvdrun sends.
  std::optional<coordinator::JobSpec> savedRequest(const std::string& jobId) const;
  void dropRequest(const std::string& jobId);
  // Where the job's record (what ps and status show) and `spec` (what would run) differ: "the
  // command", "-np", "the working directory" or "the hosts"; "" when they agree or there is no
  // record.
  std::string disagreement(const std::string& jobId, const coordinator::JobSpec& spec) const;

  // The jobs recorded QUEUED, oldest submission first.
  std::vector<std::string> queuedJobs() const;
  std::optional<coordinator::JobState> stateOf(const std::string& jobId) const;

  // QUEUED, waiting for `reason`.
  void queued(const std::string& jobId, const std::string& reason);
  // Attempt `attempt` (of `attemptSpec`'s hosts) started its ranks: RUNNING unless it has
  // finished already, the job's start time once, a new attempt listed with its start time.
  void attemptStarted(const std::string& jobId, int attempt,
                      const coordinator::JobSpec& attemptSpec, bool running,
                      const std::vector<coordinator::RankSnapshot>& ranks,
                      const std::vector<coordinator::HostResources>& resources);
  void ranksChanged(const std::string& jobId, const std::vector<coordinator::RankSnapshot>& ranks);
  // The attempt's end; an attempt that never got every rank started is listed now, with no start
  // time.
  void attemptEnded(const std::string& jobId, int attempt, const coordinator::JobSpec& attemptSpec,
                    const std::vector<coordinator::RankSnapshot>& ranks,
                    const coordinator::JobResult& result);
  void restarting(const std::string& jobId, int restartCount);
  // An elastic job's rounds so far, the current one last (replacing those recorded).
  void roundsChanged(const std::string& jobId, const std::vector<RoundEntry>& rounds);
  // The job's end (its state from the outcome) and what its log could not keep.
  void ended(const std::string& jobId, const coordinator::JobResult& result,
             uint64_t logLinesDropped, const std::string& logDropReason);
  // FAILED without an attempt's result (a log that cannot be opened, a queued job that cannot
  // be resumed, the leader losing track of its job): the end's outcome, exit code, summary and
  // reason, no root-cause rank.
  void failed(const std::string& jobId, coordinator::JobOutcome outcome, int exitCode,
              const std::string& summary, const std::string& reason);
  // CANCELLED before anything started (the agent was shutting down).
  void cancelledUnstarted(const std::string& jobId);

 private:
  JobHistory* const history_;
};

}  // namespace hvd::agent::records
