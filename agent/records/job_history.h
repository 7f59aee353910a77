// The records of the jobs an agent leads (`hvdrun ps`, `status`, `logs` after the job and after
// an agent restart). One directory per job under <state-dir>/jobs/:
//
//   <state-dir>/jobs/<job id>/record.json   v1::JobInfo as JSON, rewritten atomically (temporary
//                                           file, fsync, rename) at every change of state
//   <state-dir>/jobs/<job id>/output.log    the job's output (job_log.h)
//   <state-dir>/jobs/<job id>/request.pb    while a submitted job waits in the queue: the
//                                           SubmitJobRequest (mode 0600; it holds the job's
//                                           environment), so that the job survives a restart
//                                           of its agent; removed once the job starts or ends
//
// A record never holds the job's environment or store token. The cache in memory is what calls
// read; the files are what a restarted agent reads.
//
// At start-up every record is loaded. One that is not finished and whose leader agent (pid and
// /proc start time) is no longer running belonged to an agent that died with the job running:
// it is marked LOST with that reason and adopted by this agent, except a detached job still
// QUEUED with its saved request: nothing of it ran, so it stays QUEUED and the new agent starts
// it in its turn (LedJobs::resumeQueued). (Its processes are cleaned up by
// JobRecords, the process-group records.) Records of another agent that is still running (agents
// of a test cluster may share a state directory) are left alone and not listed.
//
// At most `keepJobs` finished jobs are kept: past that, the oldest finished ones are removed,
// record and log, when a job ends and at start-up. Running jobs are never removed.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/records/state_space.h"
#include "agent/rpc/convert.h"
#include "hvd/v1/agent.pb.h"

namespace hvd::agent::records {

using rpc::isFinalState;
using rpc::jobStateName;

struct HistoryLoadReport {
  int loaded = 0;
  int markedLost = 0;   // unfinished records of a dead leader, now LOST
  int requeued = 0;     // queued submitted jobs of a dead leader, still QUEUED
  int unreadable = 0;   // directories without a readable record (left in place)
  int otherAgents = 0;  // records of another running agent (not loaded)
  int untrusted = 0;    // directories or files another user could have written (not loaded)
  int pruned = 0;
};

class JobHistory {
 public:
  static constexpr size_t kDefaultKeepJobs = 1000;

  // Creates <stateDir>/jobs (mode 0700) if missing and loads it (see above). Throws
  // hvd::InvalidArgumentError naming the directory when it cannot be made.
  JobHistory(const std::string& stateDir, size_t keepJobs = kDefaultKeepJobs,
             StateSpaceOptions space = {});

  const HistoryLoadReport& loadReport() const { return loadReport_; }
  // The state directory's room, which the jobs' logs share with these records.
  StateSpace* space() const { return space_.get(); }

  // "hvd-" and 6 random hex digits, used by no record here.
  std::string newJobId() const;

  // Creates the job's directory and writes its first record (leader fields set to this agent).
  // Throws hvd::InvalidArgumentError for a bad id and StateWriteError (naming the file, the
  // system's reason and the room left) when the directory or record cannot be written: a job
  // that cannot be recorded is not accepted. New jobs never use the space reserve.
  void create(v1::JobInfo info);
  // Forgets a job that never started (its record and directory), after its submit failed.
  void discard(const std::string& jobId);
  // Changes a job's record under the lock and writes it, using the space reserve if it must;
  // false for an unknown id. A failed write is logged once and kept for flush(): the cache
  // changes anyway (the job goes on, and what callers see is the change).
  bool update(const std::string& jobId, const std::function<void(v1::JobInfo*)>& change);
  // Writes again every record whose last write failed; the number still unwritten. The agent
  // calls it every second and once more at shutdown. Gives the space reserve back once all is
  // written and there is room.
  size_t flush();

  std::optional<v1::JobInfo> get(const std::string& jobId) const;
  // Every record, oldest submission first.
  std::vector<v1::JobInfo> list() const;
  // How many records are in each state (states without one are absent): the agent's metrics,
  // read every scrape, so without copying the records.
  std::map<v1::JobState, size_t> stateCounts() const;
  // Where the job's output goes; for known ids only (never built from a caller's string).
  std::optional<std::string> logPath(const std::string& jobId) const;

  // The request of a queued job (request.pb): saved at submit, read after a restart, dropped
  // when the job starts or ends. False / nullopt for unknown jobs or an unwritable file (errno
  // says why).
  bool saveRequest(const std::string& jobId, const v1::SubmitJobRequest& request);
  std::optional<v1::SubmitJobRequest> savedRequest(const std::string& jobId) const;
  void dropRequest(const std::string& jobId);

  // Removes the oldest finished jobs beyond keepJobs; returns how many.
  int prune();

 private:
  std::string jobDir(const std::string& jobId) const;
  bool writeRecord(const v1::JobInfo& info) const;
  // writeRecord through the space reserve; a failure is remembered for flush(). Under mutex_.
  void persist(const v1::JobInfo& info);
  void load();

  const std::string dir_;
  const size_t keepJobs_;
  const int selfPid_;
  const uint64_t selfStart_;
  HistoryLoadReport loadReport_;
  mutable std::mutex mutex_;
  std::map<std::string, v1::JobInfo> jobs_;
  std::set<std::string> unwritten_;  // jobs whose record on disk is older than jobs_'s
  uint64_t lastSequence_ = 0;        // the highest submit_sequence recorded here
  std::unique_ptr<StateSpace> space_;
};

}  // namespace hvd::agent::records
