#include "tools/local_job.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <thread>

#include "agent/auth/cluster_key.h"
#include "agent/node/worker_env.h"
#include "contract/placement.h"
#include "hvd/error.hpp"

extern char** environ;

namespace hvd::test {

std::string randomToken() {
  unsigned char bytes[16];
  agent::auth::fillFromKernelRandom(bytes, sizeof(bytes));
  return agent::auth::hexEncode(bytes, sizeof(bytes));
}

LocalJob::LocalJob(LocalJobSpec spec) : spec_(std::move(spec)) {
  if (spec_.np < 1)
    throw InvalidArgumentError("-np must be at least 1 (got " + std::to_string(spec_.np) + ")");
  if (spec_.argv.empty()) throw InvalidArgumentError("no program to run");
}

LocalJob::~LocalJob() {
  for (size_t r = 0; r < pids_.size(); ++r) {
    if (!exits_[r].exited && pids_[r] > 0) ::kill(pids_[r], SIGKILL);
  }
  while (reapOne(true)) {
  }
}

void LocalJob::start() {
  server_ = std::make_unique<store::TcpStoreServer>();
  server_->start();
  const std::string jobId =
      "local-" + std::to_string(::getpid()) + "-" + randomToken().substr(0, 8);
  const std::string token = randomToken();
  server_->addJob(jobId, token);

  // The worker environment contract (the same builder hvdrun and the agents use) over the
  // caller's environment; the spec's variables come last so a test can break the contract.
  std::vector<std::string> callerEnv;
  for (char** e = environ; *e != nullptr; ++e) callerEnv.emplace_back(*e);
  const contract::Placement placement =
      contract::placeRanks({{"localhost", spec_.np}}, spec_.np, false);

  pids_.assign(spec_.np, 0);
  exits_.assign(spec_.np, RankExit{});
  const pid_t parent = ::getpid();
  for (int r = 0; r < spec_.np; ++r) {
    agent::node::WorkerEnvInput input;
    input.forwarded = callerEnv;
    input.placement = placement.ranks[r];
    input.size = spec_.np;
    input.groupRank = 0;
    input.hostName = "localhost";
    input.jobId = jobId;
    input.storeAddr = server_->address();
    input.storeToken = token;
    input.masterAddr = "127.0.0.1";
    input.masterPort = 29500;
    std::map<std::string, std::string> env;
    for (const std::string& entry : agent::node::buildWorkerEnvironment(input)) {
      const size_t eq = entry.find('=');
      env[entry.substr(0, eq)] = entry.substr(eq + 1);
    }
    for (const auto& [key, value] : spec_.env) env[key] = value;  // the caller's word is last
    const std::string rank = std::to_string(r);
    std::vector<std::string> envStrings;
    for (const auto& [key, value] : env) envStrings.push_back(key + "=" + value);
    std::vector<char*> envp, argv;
    for (auto& s : envStrings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> args = spec_.argv;
    for (auto& s : args) argv.push_back(s.data());
    argv.push_back(nullptr);
    std::string outPath, errPath;
    if (!spec_.outputDir.empty()) {
      outPath = spec_.outputDir + "/rank" + rank + ".out";
      errPath = spec_.outputDir + "/rank" + rank + ".err";
    }

    const pid_t pid = ::fork();
    if (pid < 0) throw BackendError(std::string("fork: ") + std::strerror(errno));
    if (pid == 0) {
      // Child: only async-signal-safe calls from here to exec.
      ::setpgid(0, pgid_);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);  // the launcher died before prctl took effect
      if (!outPath.empty()) {
        const int out = ::open(outPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        const int err = ::open(errPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (out < 0 || err < 0) ::_exit(126);
        ::dup2(out, 1);
        ::dup2(err, 2);
      }
      ::execvpe(argv[0], argv.data(), envp.data());
      const char msg[] = "hvd-local-run: cannot execute the program\n";
      (void)!::write(2, msg, sizeof(msg) - 1);
      ::_exit(127);
    }
    if (pgid_ == 0) pgid_ = pid;
    ::setpgid(pid, pgid_);  // also from the parent, so it holds before we signal the group
    pids_[r] = pid;
  }
}

bool LocalJob::reapOne(bool block) {
  int status = 0;
  if (pgid_ == 0) return false;
  const pid_t pid = ::waitpid(-pgid_, &status, block ? 0 : WNOHANG);
  if (pid <= 0) return false;
  for (size_t r = 0; r < pids_.size(); ++r) {
    if (pids_[r] != pid) continue;
    exits_[r].exited = true;
    if (WIFSIGNALED(status)) {
      exits_[r].signal = WTERMSIG(status);
    } else {
      exits_[r].exitCode = WEXITSTATUS(status);
    }
  }
  return true;
}

bool LocalJob::waitAll(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    bool all = true;
    for (const auto& e : exits_) all = all && e.exited;
    if (all) return true;
    if (!reapOne(false)) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
}

int LocalJob::waitFirstFailure(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    bool all = true;
    for (size_t r = 0; r < exits_.size(); ++r) {
      if (exits_[r].exited && exits_[r].status() != 0) return static_cast<int>(r);
      all = all && exits_[r].exited;
    }
    if (all) return -1;
    if (!reapOne(false)) {
      if (std::chrono::steady_clock::now() >= deadline) return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
}

void LocalJob::signalAll(int sig) {
  if (pgid_ > 0) ::kill(-pgid_, sig);
}

void LocalJob::signalRank(int rank, int sig) { ::kill(pids_.at(rank), sig); }

}  // namespace hvd::test
