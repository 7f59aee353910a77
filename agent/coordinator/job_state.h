// Where a job a leader agent runs stands, as its record keeps it (`hvdrun ps`, `status`, the
// answer to a cancel). Beside the coordinator's outcome because a job's end is one of these
// states; the leader's queue and restarts add the others. The wire's JobState is made from it
// in agent/rpc/convert.h, so the jobs and their records never name a message.
#pragma once

#include "agent/coordinator/job_coordinator.h"

namespace hvd::agent::coordinator {

enum class JobState {
  kUnspecified,
  kPending,    // accepted; hosts being described, ranks being started
  kQueued,     // waiting for slots or GPUs held by other jobs
  kRunning,    // every rank started
  kCompleted,  // every rank exited 0
  kFailed,     // a rank failed, an agent was lost or unreachable, the launch failed
  kCancelled,  // cancelled, or the agent shut down
  kTimedOut,   // stopped at its time limit
  kLost,       // its leader agent died while it ran
};

// The job's end as the record keeps it.
inline JobState stateOfOutcome(JobOutcome outcome) {
  switch (outcome) {
    case JobOutcome::kSucceeded:
      return JobState::kCompleted;
    case JobOutcome::kCancelled:
      return JobState::kCancelled;
    case JobOutcome::kTimedOut:
      return JobState::kTimedOut;
    default:
      return JobState::kFailed;
  }
}

}  // namespace hvd::agent::coordinator
