#include "e2e_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>

extern char** environ;

namespace hvd::e2e {

using Clock = std::chrono::steady_clock;

Child::Child(std::vector<std::string> argv, std::vector<std::string> extraEnv)
    : start_(Clock::now()) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  for (std::string& entry : extraEnv) env.push_back(std::move(entry));

  int pipeFds[2];
  if (::pipe2(pipeFds, O_CLOEXEC) != 0) std::abort();
  pid_ = ::fork();
  if (pid_ < 0) std::abort();
  if (pid_ == 0) {
    ::setpgid(0, 0);
    ::dup2(pipeFds[1], 1);
    ::dup2(pipeFds[1], 2);
    const int devNull = ::open("/dev/null", O_RDONLY);
    if (devNull >= 0) ::dup2(devNull, 0);
    std::vector<char*> args;
    for (std::string& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    std::vector<char*> envp;
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    ::execvpe(args[0], args.data(), envp.data());
    const std::string msg = "cannot execute " + argv[0] + "\n";
    (void)!::write(2, msg.data(), msg.size());
    ::_exit(127);
  }
  ::setpgid(pid_, pid_);  // also here: no race with a kill of the group before the child runs
  ::close(pipeFds[1]);
  fd_ = pipeFds[0];
}

Child::~Child() {
  if (pid_ > 0) {
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  if (fd_ >= 0) ::close(fd_);
}

bool Child::readSome(int ms) {
  if (fd_ < 0) return false;
  pollfd pfd{fd_, POLLIN, 0};
  if (::poll(&pfd, 1, ms) <= 0) return true;
  char buf[8192];
  const ssize_t n = ::read(fd_, buf, sizeof(buf));
  if (n > 0) {
    output_.append(buf, static_cast<size_t>(n));
    return true;
  }
  ::close(fd_);
  fd_ = -1;
  return false;
}

bool Child::waitForOutput(const std::function<bool(const std::string&)>& done,
                          std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!done(output_)) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    if (!readSome(static_cast<int>(std::min<long long>(left.count(), 100)))) return done(output_);
  }
  return true;
}

RunResult Child::finish(std::chrono::milliseconds timeout) {
  RunResult r;
  const auto deadline = Clock::now() + timeout;
  // The pipe may stay open after the child exits (a grandchild holding it), so watch both.
  int status = 0;
  bool reaped = false;
  Clock::time_point exited;
  const auto reap = [&](int flags) {
    if (!reaped && ::waitpid(pid_, &status, flags) == pid_) {
      reaped = true;
      exited = Clock::now();
    }
  };
  for (;;) {
    reap(WNOHANG);
    if (reaped) {
      // Give the rest of the output a moment, then stop reading: a leftover holder of the pipe
      // (a grandchild) must not hold the test.
      const auto stop = Clock::now() + std::chrono::milliseconds(500);
      while (fd_ >= 0 && Clock::now() < stop) readSome(50);
      break;
    }
    if (Clock::now() >= deadline && !r.timedOut) {
      r.timedOut = true;
      ::kill(-pid_, SIGKILL);
      ::kill(pid_, SIGKILL);
    }
    if (fd_ >= 0) {
      readSome(20);
    } else {
      ::usleep(10000);
    }
  }
  r.seconds = std::chrono::duration<double>(exited - start_).count();
  pid_ = -1;
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.output = output_;
  return r;
}

RunResult run(std::vector<std::string> argv, std::chrono::milliseconds timeout,
              std::vector<std::string> extraEnv) {
  Child child(std::move(argv), std::move(extraEnv));
  return child.finish(timeout);
}

std::string describe(const RunResult& result) {
  std::ostringstream out;
  out << "status " << result.status << (result.timedOut ? " (timed out)" : "") << " after "
      << result.seconds << " s; output:\n"
      << result.output;
  return out.str();
}

}  // namespace hvd::e2e
