// Job records: how a restarted hvdagent finds the workers of the agent that ran before it
// (issue 3, "workers die when their agent dies ... plus cleanup by the agent on restart").
//
// Workers get PR_SET_PDEATHSIG, so they die with the agent's supervisor thread; but anything a
// worker started in the background (a data loader it double-forked, a shell's child) stays in
// the job's process group and survives. So for every running local job the agent writes a small
// record under its state directory: the job id, the process group id and the start time of the
// group's leader (/proc/<pid>/stat field 22, in clock ticks since boot). When the job ends the
// record is removed. At start-up the agent reads the records left behind and SIGKILLs each
// recorded group whose leader still has the recorded start time: a pid that was reused by an
// unrelated process has another start time, so a stranger is never killed.
//
// Several agents may share a state directory (network-namespace test clusters run one agent per
// namespace on one machine): a record names the agent that wrote it (pid and start time), and
// cleanup leaves alone the records of an agent that is still running.
//
// Limit: a group whose leader has exited and been reaped cannot be verified, so it is skipped.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace hvd::agent::service {

struct JobRecord {
  std::string jobId;
  pid_t pgid = 0;
  uint64_t leaderStartTime = 0;  // /proc/<pgid>/stat field 22
  pid_t agentPid = 0;            // the agent that wrote the record
  uint64_t agentStartTime = 0;
};

struct CleanupReport {
  int killed = 0;   // groups SIGKILLed
  int skipped = 0;  // gone already, leader's start time differs, or unreadable record
  int kept = 0;     // records of another agent that is still running
};

// Start time (field 22 of /proc/<pid>/stat) of a live or zombie process; nullopt when there is
// no such process.
std::optional<uint64_t> processStartTime(pid_t pid);

// The state directory when --state-dir is not given: /var/lib/hvdagent for root, else
// $XDG_STATE_HOME/hvdagent, else ~/.local/state/hvdagent.
std::string defaultStateDir();

class JobRecords {
 public:
  // Creates `dir` (and parents) with mode 0700 if missing. Throws hvd::InvalidArgumentError
  // naming the directory when it cannot be created or is not a directory.
  explicit JobRecords(std::string dir);

  const std::string& dir() const { return dir_; }

  // Writes the record of a job started by this agent (atomically: temporary file + rename).
  // Reads the leader's start time itself; returns false (and writes nothing) when `pgid` is not
  // a live process or the file cannot be written. Thread-safe.
  bool add(const std::string& jobId, pid_t pgid);
  // Writes `record` as given (agentPid/agentStartTime included); for tests. Thread-safe.
  bool write(const JobRecord& record);
  // Removes this agent's record of `jobId`; unknown ids are ignored. Thread-safe.
  void remove(const std::string& jobId);

  // Every record in the directory that this code can parse.
  std::vector<JobRecord> list() const;

  // At start-up: for every record whose agent is no longer running, SIGKILL the recorded group
  // if its leader's start time matches, then delete the record.
  CleanupReport cleanupLeftovers();

 private:
  std::string pathFor(const std::string& jobId, pid_t agentPid) const;

  const std::string dir_;
  const pid_t selfPid_;
  const uint64_t selfStartTime_;
  std::mutex mutex_;
};

}  // namespace hvd::agent::service
