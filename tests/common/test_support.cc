#include "common/test_support.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>
#include <system_error>
#include <thread>

extern char** environ;

namespace hvd::test {

using Clock = std::chrono::steady_clock;

// --- TempDir -------------------------------------------------------------------------------

TempDir::TempDir(const std::string& prefix) {
  std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw std::system_error(errno, std::generic_category(), "mkdtemp " + pattern);
  }
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string TempDir::file(const std::string& name) const { return (path_ / name).string(); }

// --- ports ---------------------------------------------------------------------------------

int closedLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "socket");
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int error = errno;
    ::close(fd);
    throw std::system_error(error, std::generic_category(), "binding a loopback port");
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::string loopbackAddress(int port) { return "127.0.0.1:" + std::to_string(port); }

// --- Process -------------------------------------------------------------------------------

int shellStatus(int waitStatus) {
  return WIFEXITED(waitStatus) ? WEXITSTATUS(waitStatus) : 128 + WTERMSIG(waitStatus);
}

namespace {

// `base` with each of `entries` ("K=V") replacing the entry of the same name or added.
std::vector<std::string> mergedEnvironment(std::vector<std::string> base,
                                           const std::vector<std::string>& entries) {
  for (const std::string& entry : entries) {
    const std::string name = entry.substr(0, entry.find('=') + 1);
    bool replaced = false;
    for (std::string& existing : base) {
      if (existing.compare(0, name.size(), name) == 0) {
        existing = entry;
        replaced = true;
        break;
      }
    }
    if (!replaced) base.push_back(entry);
  }
  return base;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> result;
  for (std::string& s : strings) result.push_back(s.data());
  result.push_back(nullptr);
  return result;
}

}  // namespace

Process::Process(std::vector<std::string> argv, ProcessOptions options)
    : start_(Clock::now()), ownGroup_(options.ownProcessGroup) {
  using Output = ProcessOptions::Output;
  if (argv.empty()) throw std::invalid_argument("Process: empty argv");
  // Everything the child needs is made before fork(): a test process has threads (gRPC), so the
  // child must not allocate.
  std::vector<std::string> env;
  if (options.inheritEnv) {
    for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
    env = mergedEnvironment(std::move(env), options.env);
  } else {
    env = options.env;
  }
  std::vector<char*> args = pointers(argv);
  std::vector<char*> envp = pointers(env);
  const std::string failure = "cannot execute " + argv[0] + "\n";

  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  if (options.output == Output::kSeparate || options.output == Output::kMerged) {
    if (::pipe2(out, O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category());
  }
  if (options.output == Output::kSeparate && ::pipe2(err, O_CLOEXEC) != 0) {
    throw std::system_error(errno, std::generic_category());
  }
  pid_ = ::fork();
  if (pid_ < 0) throw std::system_error(errno, std::generic_category(), "fork");
  if (pid_ == 0) {
    if (options.ownProcessGroup) ::setpgid(0, 0);
    switch (options.output) {
      case Output::kSeparate:
        ::dup2(out[1], 1);
        ::dup2(err[1], 2);
        break;
      case Output::kMerged:
        ::dup2(out[1], 1);
        ::dup2(out[1], 2);
        break;
      case Output::kFile: {
        const int fd = ::open(options.outputFile.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        ::dup2(fd, 1);
        ::dup2(fd, 2);
        if (fd > 2) ::close(fd);
        break;
      }
      case Output::kInherit:
        break;
    }
    if (options.stdinDevNull) {
      const int devNull = ::open("/dev/null", O_RDONLY);
      if (devNull >= 0) ::dup2(devNull, 0);
    }
    if (options.searchPath) {
      ::execvpe(args[0], args.data(), envp.data());
    } else {
      ::execve(args[0], args.data(), envp.data());
    }
    (void)!::write(2, failure.data(), failure.size());
    ::_exit(127);
  }
  if (options.ownProcessGroup) ::setpgid(pid_, pid_);  // no race with a kill of the group
  if (out[1] >= 0) ::close(out[1]);
  if (err[1] >= 0) ::close(err[1]);
  fds_[0] = out[0];
  fds_[1] = err[0];
}

Process::~Process() {
  if (pid_ > 0 && !reaped_) {
    kill(SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  for (int fd : fds_) {
    if (fd >= 0) ::close(fd);
  }
}

void Process::kill(int signal) {
  if (pid_ <= 0 || reaped_) return;
  if (ownGroup_) {
    ::kill(-pid_, signal);
    if (signal == SIGKILL) ::kill(pid_, signal);  // also if it left the group
  } else {
    ::kill(pid_, signal);
  }
}

bool Process::reap(int flags) {
  if (reaped_) return true;
  if (::waitpid(pid_, &waitStatus_, flags) == pid_) {
    reaped_ = true;
    exited_ = Clock::now();
  }
  return reaped_;
}

bool Process::readSome(int ms) {
  pollfd p[2];
  std::string* into[2];
  int* fds[2];
  nfds_t n = 0;
  for (int i = 0; i < 2; ++i) {
    if (fds_[i] < 0) continue;
    p[n] = {fds_[i], POLLIN, 0};
    into[n] = i == 0 ? &out_ : &err_;
    fds[n] = &fds_[i];
    ++n;
  }
  if (n == 0) return false;
  if (::poll(p, n, ms) <= 0) return true;
  for (nfds_t i = 0; i < n; ++i) {
    if (p[i].revents == 0) continue;
    char buf[8192];
    const ssize_t got = ::read(*fds[i], buf, sizeof(buf));
    if (got > 0) {
      into[i]->append(buf, static_cast<size_t>(got));
    } else {
      ::close(*fds[i]);
      *fds[i] = -1;
    }
  }
  return fds_[0] >= 0 || fds_[1] >= 0;
}

bool Process::waitForOutput(const std::function<bool(const std::string&)>& done,
                            std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!done(out_)) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    if (!readSome(static_cast<int>(std::min<long long>(left.count(), 100)))) return done(out_);
  }
  return true;
}

std::optional<int> Process::waitExit(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    if (reap(WNOHANG)) return shellStatus(waitStatus_);
    if (Clock::now() >= deadline) return std::nullopt;
    if (!readSome(10)) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

ProcessResult Process::finish(std::chrono::milliseconds timeout) {
  ProcessResult r;
  const auto deadline = Clock::now() + timeout;
  // The pipes may stay open after the child exits (a grandchild holding them), so watch both.
  for (;;) {
    if (reap(WNOHANG)) {
      const auto stop = Clock::now() + std::chrono::milliseconds(500);
      while ((fds_[0] >= 0 || fds_[1] >= 0) && Clock::now() < stop) readSome(50);
      break;
    }
    if (Clock::now() >= deadline && !r.timedOut) {
      r.timedOut = true;
      kill(SIGKILL);
    }
    if (!readSome(20)) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  r.status = shellStatus(waitStatus_);
  r.seconds = std::chrono::duration<double>(exited_ - start_).count();
  r.out = out_;
  r.err = err_;
  return r;
}

ProcessResult runProcess(std::vector<std::string> argv, std::chrono::milliseconds timeout,
                         ProcessOptions options) {
  Process process(std::move(argv), std::move(options));
  return process.finish(timeout);
}

void setSingleRankEnvironment(const std::string& jobId) {
  setenv("HVD_RANK", "0", 1);
  setenv("HVD_SIZE", "1", 1);
  setenv("HVD_LOCAL_RANK", "0", 1);
  setenv("HVD_LOCAL_SIZE", "1", 1);
  setenv("HVD_CROSS_RANK", "0", 1);
  setenv("HVD_CROSS_SIZE", "1", 1);
  setenv("HVD_JOB_ID", jobId.c_str(), 1);
}

}  // namespace hvd::test
