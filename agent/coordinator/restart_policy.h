// When a failed attempt of a job starts again (hvdrun --max-restarts, --restart-min-uptime,
// --no-restart-on-exit; docs/architecture.md "Resources, queue and restarts").
//
// One budget for the whole job, kept by its leader and spent once per failure, however many
// ranks or hosts the failure took with it: torchrun's per-agent budget let agents that left and
// rejoined quickly restart more often than asked. What may restart is a failure the program may
// survive (a rank that died, an agent lost with its node); a job that was cancelled, timed out,
// could not launch or was refused is over. An attempt that fails sooner than the minimum
// uptime is a start-up failure, which restarting would only repeat.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace hvd::agent::coordinator {

struct JobResult;

struct RestartPolicy {
  int maxRestarts = 0;
  std::chrono::milliseconds minUptime{0};  // 0: none
  std::vector<int> noRestartOnExit;        // exit codes (a shell's status: 128+N for signal N)
};

struct RestartDecision {
  bool restart = false;
  // Why not, when a restart was possible in principle (the policy allows restarts and the
  // failure was of a kind that restarts): appended to the job's summary. Empty otherwise.
  std::string why;
};

// `result`: how the attempt ended; `restartsDone`: restarts before this attempt.
RestartDecision decideRestart(const RestartPolicy& policy, const JobResult& result,
                              int restartsDone);

// "1.5 s", "2 min 5 s": durations in the summaries.
std::string describeDuration(std::chrono::milliseconds d);

}  // namespace hvd::agent::coordinator
