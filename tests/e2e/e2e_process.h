// Child processes for the e2e tests: hvdrun, hvdagent, ip, ss and the cluster script run as
// children with their output captured and a deadline, so a hang is a test failure with the
// output so far, never a stuck test.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "common/test_support.h"

namespace hvd::e2e {

struct RunResult {
  int status = -1;        // as a shell reports $?: exit code, or 128+signal
  bool timedOut = false;  // killed at the deadline
  std::string output;     // stdout and stderr, interleaved as written
  double seconds = 0;     // wall time from start to exit
};

// One child in its own process group with stdout and stderr on one pipe and stdin from
// /dev/null (hvd::test::Process). The destructor kills the group (SIGKILL) and reaps the child if
// finish() did not.
class Child {
 public:
  // argv[0] is a path or a name looked up in PATH. `extraEnv` entries ("K=V") are added to this
  // process's environment for the child.
  explicit Child(std::vector<std::string> argv, std::vector<std::string> extraEnv = {});

  pid_t pid() const { return process_.pid(); }

  // Reads output until `done(outputSoFar)` is true (returns true) or the timeout passes or the
  // output ends (returns false).
  bool waitForOutput(const std::function<bool(const std::string&)>& done,
                     std::chrono::milliseconds timeout) {
    return process_.waitForOutput(done, timeout);
  }

  // Reads to the end of the output and reaps the child; SIGKILLs its group at `timeout` (counted
  // from now). seconds counts from the start of the child.
  RunResult finish(std::chrono::milliseconds timeout);

  const std::string& output() const { return process_.out(); }

 private:
  test::Process process_;
};

// Runs argv to completion (see Child::finish).
RunResult run(std::vector<std::string> argv, std::chrono::milliseconds timeout,
              std::vector<std::string> extraEnv = {});

// Describes a result for assertion messages: status, time and output.
std::string describe(const RunResult& result);

}  // namespace hvd::e2e
