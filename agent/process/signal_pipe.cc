#include "agent/process/signal_pipe.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

#include "hvd/error.hpp"

namespace hvd::agent::process {
namespace {

int gSignalPipeWrite = -1;

void onSignal(int signo) {
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(signo);
  (void)!::write(gSignalPipeWrite, &byte, 1);
  errno = saved;
}

}  // namespace

int installSignalPipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw BackendError("cannot create the signal pipe");
  }
  gSignalPipeWrite = fds[1];
  struct sigaction sa = {};
  sa.sa_handler = onSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  return fds[0];
}

int signalPipeWriteFd() { return gSignalPipeWrite; }

}  // namespace hvd::agent::process
