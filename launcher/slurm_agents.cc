#include "launcher/slurm_agents.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>

#include "agent/common/thread_guard.h"
#include "agent/daemon/slurm_step.h"
#include "agent/process/spawner.h"
#include "hvd/error.hpp"
#include "hvd_support/logging.h"

extern char** environ;

namespace hvd::launcher {
namespace {

std::string joinNodes(const std::vector<std::string>& nodes) {
  std::string out;
  for (const std::string& n : nodes) out += (out.empty() ? "" : ",") + n;
  return out;
}

// "exit code 3" or "signal 9 (Killed)", as the rest of hvdrun says it.
std::string describeStatus(int status) {
  agent::process::ExitStatus exit;
  if (WIFEXITED(status)) exit.exitCode = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) exit.signal = WTERMSIG(status);
  return exit.describe();
}

}  // namespace

std::vector<std::string> srunArgv(const SlurmAgentsOptions& options) {
  const std::string n = std::to_string(options.nodes.size());
  std::vector<std::string> argv = {options.srun,
                                   "--nodes=" + n,
                                   "--ntasks=" + n,
                                   "--ntasks-per-node=1",
                                   "--nodelist=" + joinNodes(options.nodes),
                                   "--overlap",
                                   "--input=all",
                                   "--kill-on-bad-exit=0",
                                   "--job-name=hvdagent",
                                   options.agentPath,
                                   "--slurm-step",
                                   "--log-level",
                                   options.logLevel};
  if (options.allowRunAsRoot) argv.push_back("--allow-run-as-root");
  return argv;
}

std::optional<std::pair<std::string, std::string>> parseReadyLine(const std::string& line) {
  if (line.rfind(agent::daemon::kReadyPrefix, 0) != 0) return std::nullopt;
  const std::string rest = line.substr(sizeof(agent::daemon::kReadyPrefix) - 1);
  const size_t space = rest.find(' ');
  if (space == 0 || space == std::string::npos || space + 1 == rest.size() ||
      rest.find(' ', space + 1) != std::string::npos) {
    return std::nullopt;
  }
  return std::make_pair(rest.substr(0, space), rest.substr(space + 1));
}

std::string defaultAgentPath() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::filesystem::path agent = self.parent_path() / "hvdagent";
    if (::access(agent.c_str(), X_OK) == 0) return agent.string();
  }
  return "hvdagent";
}

SlurmAgents::SlurmAgents(const SlurmAgentsOptions& options, const agent::auth::ClusterKey& key,
                         int cancelFd)
    : options_(options) {
  spawn(key);
  try {
    waitReady(cancelFd);
  } catch (...) {
    stop();
    throw;
  }
  // Keep srun's stdout drained (the agents write nothing else there, but a full pipe must never
  // block them), forwarding anything unexpected to stderr. It ends at the pipe's end, or once
  // stop() has reaped srun and nothing more comes: a process that kept the pipe open must not
  // hold hvdrun's exit.
  drain_ = std::thread([this, fd = stdoutFd_] {
    agent::common::runGuarded("hvdrun: srun stdout drain", [&] {
      char buffer[4096];
      for (;;) {
        pollfd pfd = {fd, POLLIN, 0};
        const int ready = ::poll(&pfd, 1, 200);
        if (ready == 0) {
          if (draining_.load()) return;
          continue;
        }
        if (ready < 0 && errno == EINTR) continue;
        const ssize_t n = ready < 0 ? -1 : ::read(fd, buffer, sizeof(buffer));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        (void)!::write(STDERR_FILENO, buffer, static_cast<size_t>(n));
      }
    });
  });
}

SlurmAgents::~SlurmAgents() { stop(); }

void SlurmAgents::spawn(const agent::auth::ClusterKey& key) {
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0) throw BackendError(std::string("pipe: ") + strerror(errno));
  if (::pipe2(out, O_CLOEXEC) != 0) {
    ::close(in[0]);
    ::close(in[1]);
    throw BackendError(std::string("pipe: ") + strerror(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Its own process group (Ctrl-C is hvdrun's), default signal dispositions (hvdrun ignores
  // SIGPIPE) and an empty mask.
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t defaults, empty;
  sigemptyset(&defaults);
  for (int s : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&defaults, s);
  sigemptyset(&empty);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  const std::vector<std::string> args = srunArgv(options_);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const int rc = ::posix_spawnp(&pid_, argv[0], &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(in[0]);
  ::close(out[1]);
  stdinFd_ = in[1];
  stdoutFd_ = out[0];
  if (rc != 0) {
    pid_ = -1;
    ::close(stdinFd_);
    ::close(stdoutFd_);
    stdinFd_ = stdoutFd_ = -1;
    throw BackendError("cannot run " + options_.srun + " to start the agents of the Slurm job: " +
                       strerror(rc) + " (is Slurm's srun on the PATH?)");
  }
  hvd::logging::program("slurm")->debug("started the agents' step (srun pid {}) on {}", pid_,
                                        joinNodes(options_.nodes));
  try {
    key.handOver(stdinFd_);  // a pipe: 65 bytes never block
  } catch (const BackendError& e) {
    // A step that fails at once (no nodes, a refused allocation) closes its stdin before the
    // key is written: the broken pipe is a symptom. waitReady() sees srun end and reports its
    // exit status, the cause; the agents cannot start without the key either way.
    hvd::logging::program("slurm")->debug("{} (srun pid {})", e.what(), pid_);
  }
}

void SlurmAgents::waitReady(int cancelFd) {
  const auto deadline = std::chrono::steady_clock::now() + options_.readyTimeout;
  char buffer[4096];
  while (ready_.size() < options_.nodes.size()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      throw BackendError("the hvdagent of " + missingNodes() + " did not report ready within " +
                         std::to_string(options_.readyTimeout.count() / 1000) +
                         " s (started with srun; its messages are above)");
    }
    pollfd fds[2] = {{stdoutFd_, POLLIN, 0}, {cancelFd, POLLIN, 0}};
    const int n = ::poll(fds, cancelFd >= 0 ? 2 : 1,
                         static_cast<int>(std::min<long long>(left.count(), 200)));
    if (n < 0 && errno != EINTR) throw BackendError(std::string("poll: ") + strerror(errno));
    if (cancelFd >= 0 && (fds[1].revents & POLLIN)) {
      throw SlurmStartInterrupted("interrupted while the agents of the Slurm job were starting");
    }
    if (n <= 0 || !(fds[0].revents & (POLLIN | POLLHUP))) continue;
    const ssize_t got = ::read(stdoutFd_, buffer, sizeof(buffer));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      const std::optional<int> status = reap(true);
      throw BackendError("srun, which starts the agents of the Slurm job, ended (" +
                         (status ? describeStatus(*status) : std::string("unknown status")) +
                         ") before the hvdagent of " + missingNodes() +
                         " was ready; srun's and the agents' messages are above");
    }
    pending_.append(buffer, static_cast<size_t>(got));
    for (size_t newline; (newline = pending_.find('\n')) != std::string::npos;) {
      const std::string line = pending_.substr(0, newline);
      pending_.erase(0, newline + 1);
      if (const auto ready = parseReadyLine(line)) {
        hvd::logging::program("slurm")->debug("agent of {} ready at {}", ready->first,
                                              ready->second);
        ready_[ready->first] = ready->second;
      } else {
        std::fprintf(stderr, "%s\n", line.c_str());
      }
    }
  }
  if (ready_.size() != options_.nodes.size() || !missingNodes().empty()) {
    std::vector<std::string> reported;
    for (const auto& entry : ready_) reported.push_back(entry.first);
    throw BackendError("the agents reported the nodes " + joinNodes(reported) +
                       " but the allocation's are " + joinNodes(options_.nodes) +
                       " (SLURMD_NODENAME against SLURM_JOB_NODELIST)");
  }
}

std::vector<std::string> SlurmAgents::addresses() const {
  std::vector<std::string> out;
  for (const std::string& node : options_.nodes) out.push_back(ready_.at(node));
  return out;
}

std::string SlurmAgents::missingNodes() const {
  std::vector<std::string> missing;
  for (const std::string& node : options_.nodes) {
    if (ready_.count(node) == 0) missing.push_back(node);
  }
  if (missing.empty()) return {};
  return (missing.size() == 1 ? "node " : "nodes ") + joinNodes(missing);
}

std::optional<int> SlurmAgents::reap(bool block) {
  if (status_ || pid_ < 0) return status_;
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status, block ? 0 : WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == pid_) status_ = status;
  return status_;
}

void SlurmAgents::stop() {
  if (stdinFd_ >= 0) {
    ::close(stdinFd_);  // the agents' stdin ends: they stop
    stdinFd_ = -1;
  }
  if (pid_ >= 0) {
    // The agents stop their (by now finished) jobs and exit; srun follows them.
    const auto wait = [this](std::chrono::milliseconds limit) {
      const auto until = std::chrono::steady_clock::now() + limit;
      while (!reap(false) && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      return status_.has_value();
    };
    if (!wait(std::chrono::seconds(15))) {
      hvd::logging::program("slurm")->warn(
          "the agents' step did not end after its stdin closed; cancelling it");
      ::kill(pid_, SIGTERM);  // srun cancels the step
      if (!wait(std::chrono::seconds(10))) {
        ::kill(-pid_, SIGKILL);
        reap(true);
      }
    }
    pid_ = -1;
  }
  draining_ = true;
  if (drain_.joinable()) drain_.join();  // srun is gone: what it wrote is read
  if (stdoutFd_ >= 0) {
    ::close(stdoutFd_);
    stdoutFd_ = -1;
  }
}

}  // namespace hvd::launcher
