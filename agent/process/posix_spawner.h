// The real Spawner: fork/exec on Linux. See spawner.h for the contract; the choices that matter:
//
// * One supervisor thread per group forks the ranks and then polls their stdout/stderr pipes,
//   an eventfd that wakes it for stop requests, and a pidfd per rank. It forks because
//   PR_SET_PDEATHSIG fires when the *thread* that forked the child exits, not the process: a
//   short-lived RPC handler thread must not be the parent. The supervisor lives exactly as long
//   as the ranks do.
// * Exits are observed with waitid(WNOWAIT) and the ranks stay zombies until the group is torn
//   down. A zombie leader keeps the process group id reserved, so killpg() can never hit an
//   unrelated group that reused the number; ranks are reaped only after the last killpg.
// * pidfd_open (Linux 5.3+) makes an exit wake poll() at once; where it is missing the
//   supervisor falls back to checking every 20 ms, which is still far below any grace period.
// * Only waitid(P_PID) on our own pids: code elsewhere in the process must not reap children it
//   did not start (waitpid(-1), SIGCHLD set to SIG_IGN).
#pragma once

#include "agent/process/spawner.h"

namespace hvd::agent::process {

class PosixSpawner : public Spawner {
 public:
  SpawnResult spawn(const std::vector<SpawnSpec>& ranks, OutputSink* sink,
                    ExitCallback onExit) override;
};

}  // namespace hvd::agent::process
