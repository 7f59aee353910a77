#include "e2e_process.h"

#include <sstream>

namespace hvd::e2e {

namespace {

test::ProcessOptions childOptions(std::vector<std::string> extraEnv) {
  test::ProcessOptions options;
  options.output = test::ProcessOptions::Output::kMerged;
  options.env = std::move(extraEnv);
  options.searchPath = true;
  options.stdinDevNull = true;
  options.ownProcessGroup = true;
  return options;
}

}  // namespace

Child::Child(std::vector<std::string> argv, std::vector<std::string> extraEnv)
    : process_(std::move(argv), childOptions(std::move(extraEnv))) {}

RunResult Child::finish(std::chrono::milliseconds timeout) {
  const test::ProcessResult p = process_.finish(timeout);
  RunResult r;
  r.status = p.status;
  r.timedOut = p.timedOut;
  r.output = p.out;
  r.seconds = p.seconds;
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
