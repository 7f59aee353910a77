// A job of N ranks on this machine with an embedded store: the test and demo launcher that
// stands in until hvdrun exists. Each rank gets the worker environment of docs/architecture.md; all
// ranks share one new process group and die with the launcher (PR_SET_PDEATHSIG).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hvd_support/tcp_store_server.h"

namespace hvd::test {

struct LocalJobSpec {
  int np = 1;
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> env;  // set last: overrides ours
  // When set, rank r's stdout and stderr go to <outputDir>/rank<r>.out and .err.
  std::string outputDir;
};

struct RankExit {
  bool exited = false;  // false: still running (or never started)
  int exitCode = 0;     // valid when exited by exit()
  int signal = 0;       // non-zero when killed by a signal
  // Shell-style status: exit code, or 128 + signal.
  int status() const { return signal != 0 ? 128 + signal : exitCode; }
};

class LocalJob {
 public:
  explicit LocalJob(LocalJobSpec spec);
  ~LocalJob();  // SIGKILLs whatever still runs and reaps it

  void start();
  pid_t pid(int rank) const { return pids_.at(rank); }
  pid_t processGroup() const { return pgid_; }
  int size() const { return spec_.np; }

  // Reaps ranks until all have exited or the timeout passes; returns whether all exited.
  bool waitAll(std::chrono::milliseconds timeout);
  // Reaps ranks until one exits unsuccessfully, all exit, or the timeout passes. Returns the
  // failing rank, or -1.
  int waitFirstFailure(std::chrono::milliseconds timeout);
  const std::vector<RankExit>& exits() const { return exits_; }
  void signalAll(int sig);
  void signalRank(int rank, int sig);

 private:
  bool reapOne(bool block);

  LocalJobSpec spec_;
  std::unique_ptr<store::TcpStoreServer> server_;
  std::vector<pid_t> pids_;
  std::vector<RankExit> exits_;
  pid_t pgid_ = 0;
};

// 32 random hex characters from the kernel's CSPRNG.
std::string randomToken();

}  // namespace hvd::test
