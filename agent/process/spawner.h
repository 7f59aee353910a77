// Process supervision for the agent (docs/architecture.md "How a
// job flows" steps 4 and 6): start the ranks of a job on this node, capture their output line by
// line, report every exit, and stop them all. Modelled on Ray's src/ray/util/process.h: an
// interface that the job code depends on, a real fork/exec implementation (posix_spawner.h) and a
// fake (fake_spawner.h) so the layers above are unit-tested without processes.
//
// Expected outcomes (a program that cannot be executed, a rank that exits non-zero or dies of a
// signal) are values, never exceptions.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <csignal>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hvd::agent::process {

// One rank's command. argv[0] is the program: a path (absolute, or relative to `cwd`) when it
// contains '/', otherwise it is searched in the PATH of `env` (not of the agent), as a shell
// would do in the child's environment. Never a shell string.
struct SpawnSpec {
  std::vector<std::string> argv;
  std::vector<std::string> env;  // "K=V" entries: the complete environment, nothing inherited
  std::string cwd;               // empty: the agent's working directory
};

// How a rank ended: exactly one of exitCode / signal is meaningful (signal != 0 means it was
// killed by that signal).
struct ExitStatus {
  int exitCode = 0;
  int signal = 0;

  bool success() const { return signal == 0 && exitCode == 0; }
  // What a shell reports in $?: the exit code, or 128+signal for a signal. hvdrun exits with it.
  int shellStatus() const { return signal != 0 ? 128 + signal : exitCode; }
  bool operator==(const ExitStatus& o) const {
    return exitCode == o.exitCode && signal == o.signal;
  }
  // "exit code 3" or "signal 9 (Killed)", for the one line that names the root cause.
  std::string describe() const;
};

enum class Stream { kStdout, kStderr };

// A rank that is stopped (SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU) holds up every other rank without
// exiting, so nothing would say why the job stands still. The supervisor notices it within about
// a second and says so on the rank's stderr, as a line of its own output, which reaches the job's
// log, an attached hvdrun and the leader from any host; and again when it is continued.
std::string stoppedNotice(pid_t pid, int signal);
std::string continuedNotice(pid_t pid);
// Whether `line` is one of the above (what the leader uses to name a stopped rank in a summary).
bool isStoppedNotice(std::string_view line);
bool isContinuedNotice(std::string_view line);

// Receives the ranks' output. Contract:
// * `text` is one complete line without its '\n'; a final line without a newline is delivered
//   when the stream reaches end of file; a line longer than kMaxLineBytes arrives as pieces of
//   kMaxLineBytes (the last piece shorter), so a rank that never writes '\n' cannot make the
//   agent's memory grow.
// * Calls never overlap (one line at a time per group) and come from the group's supervisor
//   thread (the fake: from the thread that emits). `text` is valid only during the call.
// * Lines a rank wrote before it exited are delivered before its exit is reported. Output of
//   processes it left behind may still follow until the group is torn down.
// * The supervisor's own lines about a rank (stoppedNotice, continuedNotice) arrive as that
//   rank's stderr.
// * Must not block for long (it holds up the group's other output) and must not destroy the
//   group it belongs to.
class OutputSink {
 public:
  static constexpr size_t kMaxLineBytes = 64 * 1024;

  virtual ~OutputSink() = default;
  virtual void line(int rank, Stream which, std::string_view text) = 0;
};

// Called once per rank when it exits, from the same thread as the sink and under the same rules.
// Typical use (DESIGN step 6): the first failing rank calls group.requestStop() for the rest.
using ExitCallback = std::function<void(int rank, const ExitStatus& status)>;

// The ranks of one job on this node, all in one new process group. Ranks are numbered by their
// index in the vector given to Spawner::spawn (the caller maps them to global ranks).
//
// Destroying the group stops it with SIGKILL and no grace, waits until every rank is reaped and
// every pipe closed, and returns with nothing of the group left running. When every rank has
// exited by itself, whatever they left behind in the group (background children) is SIGKILLed
// as well: a job's processes end with the job.
class ProcessGroup {
 public:
  static constexpr std::chrono::milliseconds kDefaultGrace{10000};

  virtual ~ProcessGroup() = default;

  virtual int size() const = 0;
  // The process group id: the pid of rank 0, which leads the group.
  virtual pid_t pgid() const = 0;
  virtual pid_t pid(int rank) const = 0;

  // Graceful stop: `signal` to the whole group now, then SIGKILL to the whole group once `grace`
  // has passed with a rank still running. A second request with an earlier deadline (a second
  // Ctrl-C) escalates; a later deadline never delays an earlier one.
  // requestStop() only asks and returns: use it from inside the sink or the exit callback.
  // stop() also waits until every rank has exited and been reported (from inside a callback it
  // behaves like requestStop, since waiting there would deadlock).
  void requestStop(int signal = SIGTERM, std::chrono::milliseconds grace = kDefaultGrace) {
    doStop(signal, grace, /*wait=*/false);
  }
  void stop(int signal = SIGTERM, std::chrono::milliseconds grace = kDefaultGrace) {
    doStop(signal, grace, /*wait=*/true);
  }

  // The exit of `rank` once reported, else nullopt.
  virtual std::optional<ExitStatus> exitStatus(int rank) const = 0;
  // Waits up to `timeout` until every rank's exit and all output has been delivered; true if so.
  virtual bool waitAll(std::chrono::milliseconds timeout) = 0;

 protected:
  virtual void doStop(int signal, std::chrono::milliseconds grace, bool wait) = 0;
};

// Either a running group or why it could not be started.
struct SpawnResult {
  std::unique_ptr<ProcessGroup> group;
  // When group is null: names the rank, the program and the reason, e.g.
  // "rank 1: cannot execute 'train': No such file or directory (searched PATH=/usr/bin:/bin)".
  std::string error;

  bool ok() const { return group != nullptr; }
};

class Spawner {
 public:
  virtual ~Spawner() = default;

  // Starts every rank, all or nothing: if one cannot be started (exec fails, bad cwd, empty
  // argv, fork fails), those already started are killed and reaped and the error is returned.
  // `sink` (may be null: output is discarded) must outlive the group; `onExit` may be empty.
  virtual SpawnResult spawn(const std::vector<SpawnSpec>& ranks, OutputSink* sink,
                            ExitCallback onExit) = 0;
};

}  // namespace hvd::agent::process
