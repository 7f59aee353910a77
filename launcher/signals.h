// Ctrl-C for hvdrun: SIGINT and SIGTERM go through a self-pipe (the handler only writes the
// signal number), and one main loop serves both modes. The job's end wakes the loop too: a
// byte 0 on the same pipe (WakingClientEvents), so hvdrun exits the moment the job is over.
#pragma once

#include <poll.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <string>
#include <string_view>

#include "agent/coordinator/job_coordinator.h"
#include "agent/process/signal_pipe.h"

namespace hvd::launcher {

// The self-pipe itself is shared with hvdagent (agent/process/signal_pipe.h).
using agent::process::installSignalPipe;
using agent::process::signalPipeWriteFd;

// Forwards the job's events to `inner` and writes byte 0 to `wakeFd` once the job ended.
class WakingClientEvents final : public agent::coordinator::ClientEvents {
 public:
  WakingClientEvents(agent::coordinator::ClientEvents& inner, int wakeFd)
      : inner_(inner), wakeFd_(wakeFd) {}
  void onOutput(int rank, const std::string& host, agent::process::Stream stream,
                std::string_view line) override {
    inner_.onOutput(rank, host, stream, line);
  }
  void onJobEnd(const agent::coordinator::JobResult& result) override {
    inner_.onJobEnd(result);
    const unsigned char wake = 0;
    (void)!::write(wakeFd_, &wake, 1);
  }

 private:
  agent::coordinator::ClientEvents& inner_;
  int wakeFd_;
};

// Waits up to `timeoutMs` (200) for a signal on `signalPipe`: each SIGINT/SIGTERM read calls
// job.cancel() (the job escalates a second one within 2 s). `Job` is JobCoordinator (embedded) or
// RemoteJobClient (remote).
template <typename Job>
void waitForSignal(int signalPipe, Job& job, int timeoutMs = 200) {
  pollfd pfd = {signalPipe, POLLIN, 0};
  if (::poll(&pfd, 1, timeoutMs) <= 0) return;
  unsigned char signo = 0;
  while (::read(signalPipe, &signo, 1) == 1) {
    if (signo == 0) continue;  // the job ended: the caller's loop sees it
    std::fprintf(stderr, "hvdrun: got %s, stopping the job (again within 2 s to kill it)\n",
                 signo == SIGINT ? "SIGINT" : "SIGTERM");
    job.cancel();
  }
}

// Waits until job.finished(), with waitForSignal() between calls to job.tick().
template <typename Job>
void waitForJob(int signalPipe, Job& job) {
  while (!job.finished()) {
    waitForSignal(signalPipe, job);
    job.tick();
  }
}

}  // namespace hvd::launcher
