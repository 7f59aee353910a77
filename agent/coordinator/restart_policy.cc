#include "agent/coordinator/restart_policy.h"

#include <algorithm>
#include <cstdio>

#include "agent/coordinator/job_coordinator.h"

namespace hvd::agent::coordinator {

std::string describeDuration(std::chrono::milliseconds d) {
  const long long ms = d.count();
  char buf[64];
  if (ms < 60000) {
    if (ms % 1000 == 0) {
      std::snprintf(buf, sizeof(buf), "%lld s", ms / 1000);
    } else {
      std::snprintf(buf, sizeof(buf), "%.1f s", static_cast<double>(ms) / 1000.0);
    }
  } else {
    std::snprintf(buf, sizeof(buf), "%lld min %lld s", ms / 60000, (ms % 60000) / 1000);
  }
  return buf;
}

RestartDecision decideRestart(const RestartPolicy& policy, const JobResult& result,
                              int restartsDone) {
  RestartDecision d;
  if (policy.maxRestarts <= 0) return d;
  if (result.outcome != JobOutcome::kRankFailed && result.outcome != JobOutcome::kAgentLost) {
    return d;
  }
  if (result.outcome == JobOutcome::kRankFailed && result.status) {
    const int code = result.status->shellStatus();
    const auto& listed = policy.noRestartOnExit;
    if (std::find(listed.begin(), listed.end(), code) != listed.end()) {
      d.why = "exit code " + std::to_string(code) + " is listed in --no-restart-on-exit";
      return d;
    }
  }
  if (policy.minUptime.count() > 0 && result.uptime < policy.minUptime) {
    d.why = "attempt " + std::to_string(restartsDone) + " failed after " +
            describeDuration(result.uptime) + ", sooner than --restart-min-uptime " +
            describeDuration(policy.minUptime) + ": a start-up failure, not restarted";
    return d;
  }
  if (restartsDone >= policy.maxRestarts) {
    d.why = "no restarts left (--max-restarts " + std::to_string(policy.maxRestarts) + ")";
    return d;
  }
  d.restart = true;
  return d;
}

}  // namespace hvd::agent::coordinator
