#include "agent/process/posix_spawner.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <future>
#include <mutex>
#include <thread>

#include "agent/common/thread_guard.h"

namespace hvd::agent::process {

std::string ExitStatus::describe() const {
  if (signal == 0) return "exit code " + std::to_string(exitCode);
  const char* name = strsignal(signal);
  return "signal " + std::to_string(signal) + " (" + (name ? name : "unknown") + ")";
}

namespace {

constexpr std::string_view kNoticeStart = "[hvd] this rank (pid ";
constexpr std::string_view kStoppedMiddle = ") is stopped by ";
constexpr std::string_view kContinuedEnd = ") was continued";

}  // namespace

std::string stoppedNotice(pid_t pid, int signal) {
  const char* name = sigabbrev_np(signal);
  const std::string p = std::to_string(pid);
  return std::string(kNoticeStart) + p + std::string(kStoppedMiddle) +
         (name ? "SIG" + std::string(name) : "signal " + std::to_string(signal)) +
         ": the other ranks wait for it (kill -CONT " + p + " resumes it)";
}

std::string continuedNotice(pid_t pid) {
  return std::string(kNoticeStart) + std::to_string(pid) + std::string(kContinuedEnd);
}

bool isStoppedNotice(std::string_view line) {
  return line.substr(0, kNoticeStart.size()) == kNoticeStart &&
         line.find(kStoppedMiddle) != std::string_view::npos;
}

bool isContinuedNotice(std::string_view line) {
  return line.substr(0, kNoticeStart.size()) == kNoticeStart &&
         line.size() >= kContinuedEnd.size() &&
         line.substr(line.size() - kContinuedEnd.size()) == kContinuedEnd;
}

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Exit checks without a pidfd: frequent enough that stop() and exit reports feel immediate.
constexpr milliseconds kExitTick{20};
// How soon a stopped rank is noticed (stoppedNotice): the supervisor looks at least this often.
constexpr milliseconds kStopCheck{1000};
// Once every rank has exited and the group was SIGKILLed, a pipe can only stay open if some
// process left the group holding it; do not wait on such a process for longer than this.
constexpr milliseconds kEofGrace{2000};

// What the child sends back through its CLOEXEC pipe when it cannot reach exec.
enum Stage : int { kSetpgid = 1, kPrctl, kRedirect, kChdir, kExec };
struct ChildFailure {
  int stage;
  int error;
};

// Everything the child needs, built before fork: between fork and exec only async-signal-safe
// calls are allowed (another thread may hold the malloc lock at the moment of the fork).
struct Prepared {
  std::vector<std::string> candidates;  // paths to try with execve, in PATH order
  std::vector<char*> argv;
  std::vector<char*> envp;
  const char* cwd = nullptr;
  std::string pathNote;  // for the error message when the program is not found
};

Prepared prepare(SpawnSpec& spec) {
  Prepared p;
  const std::string& program = spec.argv[0];
  if (program.find('/') != std::string::npos) {
    p.candidates.push_back(program);
  } else {
    // PATH of the rank's environment, as a shell started in that environment would search.
    std::string path = "/usr/local/bin:/usr/bin:/bin";
    for (const std::string& kv : spec.env) {
      if (kv.rfind("PATH=", 0) == 0) path = kv.substr(5);
    }
    p.pathNote = " (searched PATH=" + path + ")";
    size_t start = 0;
    while (start <= path.size()) {
      size_t end = std::min(path.find(':', start), path.size());
      std::string dir = path.substr(start, end - start);
      p.candidates.push_back((dir.empty() ? "." : dir) + "/" + program);
      start = end + 1;
    }
  }
  for (std::string& a : spec.argv) p.argv.push_back(a.data());
  p.argv.push_back(nullptr);
  for (std::string& e : spec.env) p.envp.push_back(e.data());
  p.envp.push_back(nullptr);
  if (!spec.cwd.empty()) p.cwd = spec.cwd.c_str();
  return p;
}

// Runs in the forked child: async-signal-safe calls only, never returns.
[[noreturn]] void execChild(const Prepared& p, pid_t pgidToJoin, pid_t parent, int devNull,
                            int outFd, int errFd, int reportFd) {
  auto fail = [reportFd](int stage) {
    ChildFailure f{stage, errno};
    ssize_t ignored = write(reportFd, &f, sizeof f);
    (void)ignored;
    _exit(127);
  };
  if (setpgid(0, pgidToJoin) != 0) fail(kSetpgid);
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail(kPrctl);
  // The parent may have died between fork and prctl; then the death signal will never come.
  if (getppid() != parent) _exit(127);
  // Signal dispositions set to "ignore" and the blocked mask survive exec; the worker must start
  // with defaults (an agent that ignores SIGPIPE must not pass that on).
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &dfl, nullptr);  // EINVAL for some: fine
  if (dup2(devNull, 0) < 0 || dup2(outFd, 1) < 0 || dup2(errFd, 2) < 0) fail(kRedirect);
#ifdef SYS_close_range
  // Descriptors the agent opened without O_CLOEXEC must not leak into workers (Linux 5.11+).
  syscall(SYS_close_range, 3U, ~0U, 4U /* CLOSE_RANGE_CLOEXEC */);
#endif
  if (p.cwd != nullptr && chdir(p.cwd) != 0) fail(kChdir);
  int err = ENOENT;
  for (const std::string& candidate : p.candidates) {
    execve(candidate.c_str(), p.argv.data(), p.envp.data());
    if (errno == EACCES) {
      err = EACCES;  // like execvp: remember, but keep looking further along PATH
    } else if (errno != ENOENT && errno != ENOTDIR) {
      err = errno;
      break;
    }
  }
  errno = err;
  fail(kExec);
  _exit(127);  // unreachable; fail() exits
}

struct Rank {
  pid_t pid = -1;
  int pidFd = -1;
  int fds[2] = {-1, -1};  // stdout, stderr read ends
  std::string pending[2];
  bool exited = false;
  bool reaped = false;  // waitpid'ed: its pid may now belong to another process
};

class PosixProcessGroup : public ProcessGroup {
 public:
  PosixProcessGroup(OutputSink* sink, ExitCallback onExit)
      : sink_(sink), onExit_(std::move(onExit)) {}

  ~PosixProcessGroup() override {
    if (thread_.joinable()) {
      doStop(SIGKILL, milliseconds(0), /*wait=*/true);
      thread_.join();
    }
    if (wakeFd_ >= 0) close(wakeFd_);
  }

  // Forks every rank on the supervisor thread; returns "" or the error.
  std::string start(std::vector<SpawnSpec> specs) {
    wakeFd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wakeFd_ < 0) return std::string("eventfd failed: ") + strerror(errno);
    statuses_.resize(specs.size());
    std::promise<std::string> started;
    std::future<std::string> result = started.get_future();
    // The promise moves into the thread: start() may return (and would destroy a promise on its
    // stack) while set_value is still finishing.
    thread_ = std::thread([this, specs = std::move(specs), started = std::move(started)]() mutable {
      bool answered = false;
      common::runGuarded(
          "process supervisor",
          [&] {
            std::string error = forkAll(specs);
            bool ok = error.empty();
            answered = true;
            started.set_value(std::move(error));
            if (ok) supervise();
          },
          [&](const std::string& what) {
            if (answered) return abandon();
            killAndReapStarted();
            started.set_value("internal error while starting the ranks: " + what);
          });
    });
    std::string error = result.get();
    if (!error.empty()) thread_.join();
    return error;
  }

  int size() const override { return static_cast<int>(ranks_.size()); }
  pid_t pgid() const override { return pgid_; }
  pid_t pid(int rank) const override { return ranks_.at(rank).pid; }

  std::optional<ExitStatus> exitStatus(int rank) const override {
    std::lock_guard<std::mutex> lock(mu_);
    return statuses_.at(rank);
  }

  bool waitAll(milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [this] { return finished_; });
  }

 protected:
  void doStop(int signal, milliseconds grace, bool wait) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (!reaped_) {
      // Signalled here, under mu_, so the supervisor cannot reap the leader (freeing the pgid)
      // in between.
      killpg(pgid_, signal);
      // A stopped rank (SIGSTOP, a debugger's Ctrl-Z) takes no signal but SIGKILL until it is
      // continued: wake it, so it gets the stop signal now rather than SIGKILL after the grace
      // (systemd does the same).
      if (signal != SIGKILL && signal != SIGCONT) killpg(pgid_, SIGCONT);
      Clock::time_point deadline = Clock::now() + grace;
      if (!killDeadline_ || deadline < *killDeadline_) killDeadline_ = deadline;
      uint64_t one = 1;
      ssize_t ignored = write(wakeFd_, &one, sizeof one);
      (void)ignored;
    }
    if (wait && std::this_thread::get_id() != thread_.get_id()) {
      cv_.wait(lock, [this] { return finished_; });
    }
  }

 private:
  std::string forkAll(std::vector<SpawnSpec>& specs);
  std::string forkOne(int index, SpawnSpec& spec, int devNull);
  void killAndReapStarted();
  void supervise();
  void abandon();
  void readPipe(int index, int stream, bool drain);
  void emit(int index, int stream, std::string_view text);
  bool checkExit(int index);
  void checkStopped(int index);

  OutputSink* sink_;
  ExitCallback onExit_;
  std::vector<Rank> ranks_;  // owned by the supervisor; pids fixed once start() returns
  pid_t pgid_ = -1;
  int wakeFd_ = -1;
  std::thread thread_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::optional<ExitStatus>> statuses_;
  std::optional<Clock::time_point> killDeadline_;
  bool reaped_ = false;    // no killpg() from now on: the pgid may be reused
  bool finished_ = false;  // everything reported, reaped and closed
};

std::string PosixProcessGroup::forkAll(std::vector<SpawnSpec>& specs) {
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].argv.empty() || specs[i].argv[0].empty()) {
      return "rank " + std::to_string(i) + ": empty argv, no program to run";
    }
  }
  int devNull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devNull < 0) return std::string("cannot open /dev/null: ") + strerror(errno);
  std::string error;
  for (size_t i = 0; i < specs.size() && error.empty(); ++i) {
    error = forkOne(static_cast<int>(i), specs[i], devNull);
  }
  close(devNull);
  if (!error.empty()) killAndReapStarted();
  return error;
}

std::string PosixProcessGroup::forkOne(int index, SpawnSpec& spec, int devNull) {
  const std::string program = spec.argv[0];
  const std::string who = "rank " + std::to_string(index) + ": ";
  Prepared prepared = prepare(spec);
  int out[2], err[2], report[2];
  if (pipe2(out, O_CLOEXEC) != 0) return who + "pipe failed: " + strerror(errno);
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]), close(out[1]);
    return who + "pipe failed: " + strerror(errno);
  }
  if (pipe2(report, O_CLOEXEC) != 0) {
    close(out[0]), close(out[1]), close(err[0]), close(err[1]);
    return who + "pipe failed: " + strerror(errno);
  }
  const pid_t parent = getpid();
  const pid_t joinPgid = index == 0 ? 0 : pgid_;
  const pid_t pid = fork();
  if (pid == 0) execChild(prepared, joinPgid, parent, devNull, out[1], err[1], report[1]);
  const int forkErrno = errno;
  close(out[1]), close(err[1]), close(report[1]);
  if (pid < 0) {
    close(out[0]), close(err[0]), close(report[0]);
    return who + "fork failed for '" + program + "': " + strerror(forkErrno);
  }
  // Also set from this side so the group exists before the next rank tries to join it;
  // EACCES (the child already exec'd, having done it itself) is fine.
  setpgid(pid, index == 0 ? pid : pgid_);
  if (index == 0) pgid_ = pid;
  ChildFailure failure{};
  ssize_t got;
  do {
    got = read(report[0], &failure, sizeof failure);  // 0 bytes: exec closed the pipe
  } while (got < 0 && errno == EINTR);
  close(report[0]);
  Rank rank;
  rank.pid = pid;
  rank.fds[0] = out[0];
  rank.fds[1] = err[0];
  ranks_.push_back(rank);
  if (got == static_cast<ssize_t>(sizeof failure)) {
    std::string reason = strerror(failure.error);
    switch (failure.stage) {
      case kChdir:
        return who + "cannot change directory to '" + spec.cwd + "' to start '" + program +
               "': " + reason;
      case kExec:
        return who + "cannot execute '" + program + "': " + reason +
               (failure.error == ENOENT ? prepared.pathNote : "");
      default:
        return who + "cannot start '" + program + "' (setup step " + std::to_string(failure.stage) +
               "): " + reason;
    }
  }
  for (int fd : rank.fds) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  ranks_.back().pidFd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));  // -1: tick instead
  return "";
}

void PosixProcessGroup::killAndReapStarted() {
  if (pgid_ > 0) killpg(pgid_, SIGKILL);
  for (Rank& r : ranks_) {
    while (waitpid(r.pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    for (int fd : r.fds) close(fd);
    if (r.pidFd >= 0) close(r.pidFd);
  }
  ranks_.clear();
}

void PosixProcessGroup::emit(int index, int stream, std::string_view text) {
  if (sink_ == nullptr) return;
  // Pieces of at most kMaxLineBytes, so neither a long line nor the buffer grows without bound.
  do {
    size_t n = std::min(text.size(), OutputSink::kMaxLineBytes);
    sink_->line(index, stream == 0 ? Stream::kStdout : Stream::kStderr, text.substr(0, n));
    text.remove_prefix(n);
  } while (!text.empty());
}

// Reads what is available (all of it when `drain`), delivers complete lines, and on end of file
// the unterminated rest, then closes the pipe.
void PosixProcessGroup::readPipe(int index, int stream, bool drain) {
  Rank& r = ranks_[index];
  std::string& buf = r.pending[stream];
  char chunk[OutputSink::kMaxLineBytes];
  while (r.fds[stream] >= 0) {
    ssize_t n = read(r.fds[stream], chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    if (n <= 0) {  // end of file (or a read error, which ends the stream just the same)
      if (!buf.empty()) emit(index, stream, buf);
      buf.clear();
      close(r.fds[stream]);
      r.fds[stream] = -1;
      return;
    }
    buf.append(chunk, static_cast<size_t>(n));
    size_t start = 0;
    for (size_t nl; (nl = buf.find('\n', start)) != std::string::npos; start = nl + 1) {
      emit(index, stream, std::string_view(buf).substr(start, nl - start));
    }
    while (buf.size() - start >= OutputSink::kMaxLineBytes) {
      emit(index, stream, std::string_view(buf).substr(start, OutputSink::kMaxLineBytes));
      start += OutputSink::kMaxLineBytes;
    }
    buf.erase(0, start);
    if (!drain) return;
  }
}

// Reports the rank's exit if it has exited (leaving it a zombie); true if it has.
bool PosixProcessGroup::checkExit(int index) {
  Rank& r = ranks_[index];
  siginfo_t info{};
  int rc = waitid(P_PID, static_cast<id_t>(r.pid), &info, WEXITED | WNOHANG | WNOWAIT);
  ExitStatus status;
  if (rc == 0 && info.si_pid == 0) return false;
  if (rc != 0) {
    if (errno == EINTR) return false;
    status.exitCode = 255;  // ECHILD: someone else reaped it; the status is lost
  } else if (info.si_code == CLD_EXITED) {
    status.exitCode = info.si_status;
  } else if (info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED) {
    status.signal = info.si_status;
  } else {
    return false;  // stopped or continued: still alive
  }
  r.exited = true;
  for (int stream = 0; stream < 2; ++stream) readPipe(index, stream, /*drain=*/true);
  {
    std::lock_guard<std::mutex> lock(mu_);
    statuses_[index] = status;
  }
  if (onExit_) onExit_(index, status);
  return true;
}

// Says so on the rank's stderr when it has been stopped or continued since the last look (the
// event is consumed: each is said once).
void PosixProcessGroup::checkStopped(int index) {
  const Rank& r = ranks_[index];
  siginfo_t info{};
  if (waitid(P_PID, static_cast<id_t>(r.pid), &info, WSTOPPED | WCONTINUED | WNOHANG) != 0 ||
      info.si_pid == 0) {
    return;
  }
  if (info.si_code == CLD_STOPPED) {
    emit(index, 1, stoppedNotice(r.pid, info.si_status));
  } else if (info.si_code == CLD_CONTINUED) {
    emit(index, 1, continuedNotice(r.pid));
  }
}

void PosixProcessGroup::supervise() {
  bool groupKilled = false;
  Clock::time_point eofDeadline{};
  std::vector<pollfd> fds;
  std::vector<std::pair<int, int>> owner;  // (rank, 0/1 pipe, 2 pidfd) per entry after the first
  for (;;) {
    fds.assign(1, pollfd{wakeFd_, POLLIN, 0});
    owner.assign(1, {-1, -1});
    bool allExited = true, needTick = false, pipesOpen = false;
    for (int i = 0; i < size(); ++i) {
      Rank& r = ranks_[i];
      for (int s = 0; s < 2; ++s) {
        if (r.fds[s] >= 0) fds.push_back({r.fds[s], POLLIN, 0}), owner.push_back({i, s});
        pipesOpen |= r.fds[s] >= 0;
      }
      if (r.exited) continue;
      allExited = false;
      if (r.pidFd >= 0) fds.push_back({r.pidFd, POLLIN, 0}), owner.push_back({i, 2});
      needTick |= r.pidFd < 0;
    }
    std::optional<Clock::time_point> wakeAt;
    if (!allExited) {
      std::lock_guard<std::mutex> lock(mu_);
      wakeAt = killDeadline_;
    } else if (!groupKilled) {
      // Every rank is gone: kill what they left behind, while the zombie leader still holds
      // the group id.
      killpg(pgid_, SIGKILL);
      groupKilled = true;
      eofDeadline = Clock::now() + kEofGrace;
    }
    if (allExited && (!pipesOpen || Clock::now() >= eofDeadline)) break;
    if (allExited) wakeAt = eofDeadline;
    milliseconds timeout(-1);
    if (!allExited) timeout = kStopCheck;
    if (needTick) timeout = kExitTick;
    if (wakeAt) {
      auto left = std::chrono::ceil<milliseconds>(*wakeAt - Clock::now());
      left = std::max(left, milliseconds(0));
      timeout = timeout.count() < 0 ? left : std::min(timeout, left);
    }
    if (poll(fds.data(), fds.size(), static_cast<int>(timeout.count())) < 0 && errno != EINTR) {
      std::this_thread::sleep_for(kExitTick);  // should not happen; do not spin
    }
    if (fds[0].revents != 0) {
      uint64_t count;
      ssize_t ignored = read(wakeFd_, &count, sizeof count);
      (void)ignored;
    }
    for (size_t k = 1; k < fds.size(); ++k) {
      if (fds[k].revents != 0 && owner[k].second < 2)
        readPipe(owner[k].first, owner[k].second, false);
    }
    for (int i = 0; i < size(); ++i) {
      // A continuation is said only while the rank lives: a zombie has no stop state left.
      if (!ranks_[i].exited) {
        checkStopped(i);
        checkExit(i);
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (killDeadline_ && Clock::now() >= *killDeadline_) {
      bool running =
          std::any_of(ranks_.begin(), ranks_.end(), [](const Rank& r) { return !r.exited; });
      if (running) killpg(pgid_, SIGKILL);
      killDeadline_.reset();
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    reaped_ = true;
  }
  for (Rank& r : ranks_) {
    for (int s = 0; s < 2; ++s) {
      if (r.fds[s] < 0) continue;
      if (!r.pending[s].empty()) emit(static_cast<int>(&r - ranks_.data()), s, r.pending[s]);
      close(r.fds[s]);
      r.fds[s] = -1;
    }
    while (waitpid(r.pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    r.reaped = true;
    if (r.pidFd >= 0) close(r.pidFd);
    r.pidFd = -1;
  }
  std::lock_guard<std::mutex> lock(mu_);
  finished_ = true;
  cv_.notify_all();
}

// The supervisor's way out after an exception (an output sink or exit callback that threw): no
// rank may outlive it unseen and no waiter may wait forever. Kills the group, reaps every rank
// and reports those not reported yet as killed.
void PosixProcessGroup::abandon() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!reaped_) killpg(pgid_, SIGKILL);
    reaped_ = true;
  }
  for (size_t i = 0; i < ranks_.size(); ++i) {
    Rank& r = ranks_[i];
    for (int& fd : r.fds) {
      if (fd >= 0) close(fd);
      fd = -1;
    }
    while (!r.reaped && waitpid(r.pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    r.reaped = true;
    if (r.pidFd >= 0) close(r.pidFd);
    r.pidFd = -1;
    if (r.exited) continue;
    r.exited = true;
    ExitStatus status;
    status.signal = SIGKILL;
    {
      std::lock_guard<std::mutex> lock(mu_);
      statuses_[i] = status;
    }
    common::runGuarded("process supervisor", [&] {
      if (onExit_) onExit_(static_cast<int>(i), status);
    });
  }
  std::lock_guard<std::mutex> lock(mu_);
  finished_ = true;
  cv_.notify_all();
}

}  // namespace

SpawnResult PosixSpawner::spawn(const std::vector<SpawnSpec>& ranks, OutputSink* sink,
                                ExitCallback onExit) {
  SpawnResult result;
  if (ranks.empty()) {
    result.error = "no ranks to start";
    return result;
  }
  auto group = std::make_unique<PosixProcessGroup>(sink, std::move(onExit));
  result.error = group->start(ranks);
  if (result.error.empty()) result.group = std::move(group);
  return result;
}

}  // namespace hvd::agent::process
