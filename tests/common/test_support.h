// What many tests need and nothing in hvd provides: a temporary directory that cleans up after
// itself, a loopback port nothing listens on, and child processes run with their output captured
// and a deadline (so a hang is a test failure with the output so far, never a stuck test).
// No gRPC here: every test can link it (tests/common/grpc_test_server.h has the gRPC part).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hvd::test {

// A fresh directory under $TMPDIR (or /tmp), named <prefix>-XXXXXX; removed with everything in
// it by the destructor. Throws std::runtime_error if it cannot be made.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "hvd-test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // path()/name as a string.
  std::string file(const std::string& name) const;

 private:
  std::filesystem::path path_;
};

// A 127.0.0.1 port that was just bound and closed: nothing listens there (until someone else
// takes it). Throws std::runtime_error if no socket could be bound.
int closedLoopbackPort();

// Sets this process's worker environment for a job of one rank (HVD_RANK=0, HVD_SIZE=1, ...,
// HVD_JOB_ID=jobId): what hvd::init() needs with no store.
void setSingleRankEnvironment(const std::string& jobId);

// "127.0.0.1:<port>".
std::string loopbackAddress(int port);

// A waitpid() status as a shell reports $?: the exit code, or 128 + the signal.
int shellStatus(int waitStatus);

struct ProcessResult {
  int status = -1;        // as a shell reports $?: exit code, or 128+signal
  bool timedOut = false;  // killed at the deadline
  std::string out;        // stdout (with stderr when Output::kMerged)
  std::string err;        // stderr (Output::kSeparate only)
  double seconds = 0;     // wall time from start to exit
};

struct ProcessOptions {
  enum class Output {
    kSeparate,  // stdout and stderr on two pipes (out, err)
    kMerged,    // both on one pipe, interleaved as written (out)
    kFile,      // both to `outputFile` (created or truncated, mode 0600); nothing captured
    kInherit,   // this process's stdout and stderr
  };
  Output output = Output::kSeparate;
  std::string outputFile;  // for Output::kFile
  // The child's environment: this process's (inheritEnv) with `env` entries ("K=V") replacing
  // or added to it, or exactly `env` when !inheritEnv.
  bool inheritEnv = true;
  std::vector<std::string> env;
  bool searchPath = false;       // argv[0] may be a name looked up in PATH
  bool stdinDevNull = false;     // stdin from /dev/null instead of this process's
  bool ownProcessGroup = false;  // a group of its own; kills then go to the whole group
};

// One child process. The destructor SIGKILLs it (its group with ownProcessGroup) and reaps it
// unless finish() or waitExit() already did.
class Process {
 public:
  explicit Process(std::vector<std::string> argv, ProcessOptions options = {});
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }

  // Output so far.
  const std::string& out() const { return out_; }
  const std::string& err() const { return err_; }

  // Sends `signal` to the child (to its group with ownProcessGroup), unless it was reaped.
  void kill(int signal);

  // Reads output until `done(out())` is true (returns true), or the timeout passes or the output
  // ends (returns done(out())).
  bool waitForOutput(const std::function<bool(const std::string&)>& done,
                     std::chrono::milliseconds timeout);

  // The exit status ($?-style) once the child has exited (reaping it), reading its output
  // meanwhile; nullopt if it still runs after `timeout`.
  std::optional<int> waitExit(std::chrono::milliseconds timeout);

  // Reads output until the child exits and reaps it; SIGKILLs it at `timeout` (counted from now).
  // After the exit, what is left in the pipes is read for at most 500 ms more: a leftover holder
  // of a pipe (a grandchild) must not hold the test. seconds counts from the start.
  ProcessResult finish(std::chrono::milliseconds timeout);

 private:
  // Waits up to `ms` for output and appends it; false once every pipe is closed.
  bool readSome(int ms);
  // waitpid with `flags`; true once the child is reaped.
  bool reap(int flags);

  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point exited_;
  bool ownGroup_ = false;
  pid_t pid_ = -1;
  bool reaped_ = false;
  int waitStatus_ = 0;
  int fds_[2] = {-1, -1};  // stdout (or merged), stderr
  std::string out_;
  std::string err_;
};

// Runs argv to completion (see Process::finish).
ProcessResult runProcess(std::vector<std::string> argv, std::chrono::milliseconds timeout,
                         ProcessOptions options = {});

// "NAME=value" entries as a map (the last value of a name wins).
inline std::map<std::string, std::string> environmentMap(const std::vector<std::string>& env) {
  std::map<std::string, std::string> out;
  for (const std::string& e : env) {
    const size_t eq = e.find('=');
    out[e.substr(0, eq)] = eq == std::string::npos ? std::string() : e.substr(eq + 1);
  }
  return out;
}

}  // namespace hvd::test
