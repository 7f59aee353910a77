// Job records: how a restarted hvdagent finds the workers of the agent that ran before it:
// workers die when their agent dies, and the agent cleans up after a crashed one on restart.
//
// Workers get PR_SET_PDEATHSIG, so they die with the agent's supervisor thread; but anything a
// worker started in the background (a data loader it double-forked, a shell's child) stays in
// the job's process group and survives. So for every running local job the agent writes a small
// record under its state directory: the job id, the process group id, the start time of the
// group's leader (/proc/<pid>/stat field 22, in clock ticks since boot) and the job's tag, a
// random value every rank carries in its environment (kJobTagEnv) and passes on to its
// children. When the job ends the record is removed. At start-up the agent reads the records
// left behind and SIGKILLs a recorded group when it can tell the group is still the job's:
//   * its leader is alive with the recorded start time (a reused pid has another start time), or
//   * the leader is gone (the usual case: the rank died of its death signal) but a process of
//     the group still carries the job's tag in /proc/<pid>/environ.
// A stranger that reused the number is never killed.
//
// Several agents may share a state directory (network-namespace test clusters run one agent per
// namespace on one machine): a record names the agent that wrote it (pid and start time), and
// cleanup leaves alone the records of an agent that is still running.
//
// Limit: leftovers that cleared their environment and lost their leader cannot be told from
// strangers, so they are left alone (and the record is dropped).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace hvd::agent::records {

// The environment variable that carries a job's tag into every rank (and its children).
inline constexpr const char* kJobTagEnv = "HVD_AGENT_JOB_TAG";

struct JobRecord {
  std::string jobId;
  pid_t pgid = 0;
  uint64_t leaderStartTime = 0;  // /proc/<pgid>/stat field 22; 0: the leader was gone already
  pid_t agentPid = 0;            // the agent that wrote the record
  uint64_t agentStartTime = 0;
  std::string tag;  // kJobTagEnv's value in the job's processes; empty: none
};

struct CleanupReport {
  int killed = 0;   // groups SIGKILLed
  int skipped = 0;  // gone already, leader's start time differs, or unreadable record
  int kept = 0;     // records of another agent that is still running
};

// The processes whose process group is `pgid` (field 5 of /proc/<pid>/stat).
std::vector<pid_t> processGroupMembers(pid_t pgid);

// Whether /proc/<pid>/environ (the environment the process was started with) holds `entry`
// ("K=V") exactly; false when unreadable.
bool environContains(pid_t pid, const std::string& entry);

// Start time (field 22 of /proc/<pid>/stat) of a live or zombie process; nullopt when there is
// no such process.
std::optional<uint64_t> processStartTime(pid_t pid);

// Whether `pid` is a running process (not a zombie) that started at `startTime`: how an agent
// tells that the agent which wrote a record is still there.
bool processAlive(pid_t pid, uint64_t startTime);

// The state directory when --state-dir is not given: /var/lib/hvdagent for root, else
// $XDG_STATE_HOME/hvdagent, else $HOME/.local/state/hvdagent, else the same under the home
// directory of the password database; "" when there is none (never a shared place like /tmp).
std::string defaultStateDir();

class JobRecords {
 public:
  // Creates `dir` (and parents) with mode 0700 if missing. Throws hvd::InvalidArgumentError
  // naming the directory when it cannot be created or is not a directory.
  explicit JobRecords(std::string dir);

  const std::string& dir() const { return dir_; }

  // Writes the record of a job started by this agent (atomically: temporary file + rename).
  // Reads the leader's start time itself (0 when the leader is gone: then only the tag tells the
  // group's processes); returns false (errno set, nothing written) when there is neither or the
  // file cannot be written. Thread-safe.
  bool add(const std::string& jobId, pid_t pgid, const std::string& tag);
  // Writes `record` as given (agentPid/agentStartTime included); for tests. Thread-safe.
  bool write(const JobRecord& record);
  // Removes this agent's record of `jobId`; unknown ids are ignored. Thread-safe.
  void remove(const std::string& jobId);

  // Every record in the directory that this code can parse.
  std::vector<JobRecord> list() const;

  // At start-up: for every record whose agent is no longer running, SIGKILL the recorded group
  // if it is still the job's (see above), then delete the record.
  CleanupReport cleanupLeftovers();

 private:
  std::string pathFor(const std::string& jobId, pid_t agentPid) const;

  const std::string dir_;
  const pid_t selfPid_;
  const uint64_t selfStartTime_;
  std::mutex mutex_;
};

}  // namespace hvd::agent::records
