// Renders a job's output for the user (ClientEvents of the embedded coordinator): each line of a
// rank to hvdrun's stdout or stderr, matching the rank's stream, prefixed "[rank]<stdout>: " in
// Horovod's form unless tagging is off, optionally headed by the local time the line arrived
// (--timestamp-output), and optionally to DIR/rank.<r>/stdout and stderr. Embedded and remote
// mode render through the same class, so a job's output reads the same either way.
#pragma once

#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/coordinator/job_coordinator.h"

namespace hvd::launcher {

class OutputRenderer : public agent::coordinator::ClientEvents {
 public:
  // Creates DIR/rank.<r>/ and its files for every rank when `outputDir` is non-empty; throws
  // hvd::InvalidArgumentError naming the path when that fails, before anything was started.
  OutputRenderer(int np, bool tagOutput, const std::string& outputDir,
                 bool timestampOutput = false);
  ~OutputRenderer() override;

  void onOutput(int rank, const std::string& host, agent::process::Stream stream,
                std::string_view line) override;
  void onJobEnd(const agent::coordinator::JobResult& result) override;

  // The result once onJobEnd was called.
  std::optional<agent::coordinator::JobResult> result() const;

 private:
  struct FileCloser {
    void operator()(std::FILE* f) const {
      if (f != nullptr) std::fclose(f);
    }
  };
  using File = std::unique_ptr<std::FILE, FileCloser>;

  const bool tagOutput_;
  const bool timestampOutput_;
  mutable std::mutex mutex_;  // one whole line at a time, never two interleaved
  std::vector<File> stdoutFiles_;
  std::vector<File> stderrFiles_;
  std::optional<agent::coordinator::JobResult> result_;
};

// "2024-05-01T12:34:56.789 ": local time with milliseconds, as --timestamp-output prefixes lines.
std::string formatTimestamp(std::chrono::system_clock::time_point t);

// What hvdrun prints on stderr when a job did not succeed: the result's one-line summary, the
// root-cause rank's last stderr lines indented, and how many ranks never reported their exit.
std::string formatFailure(const agent::coordinator::JobResult& result);

// What hvdrun prints on stderr where a job restarts (the attached run, logs, attach):
// "hvdrun: restarting job hvd-... (restart 1 of 3) after: <the failure's summary>\n", or without
// "after: ..." when the failure is not known. `reason` may start with "hvdrun: ".
std::string formatRestart(const std::string& jobId, int restart, int maxRestarts,
                          const std::string& reason);

}  // namespace hvd::launcher
