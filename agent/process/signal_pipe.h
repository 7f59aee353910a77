// The self-pipe that turns SIGINT and SIGTERM into readable bytes for a main loop (hvdrun and
// hvdagent): the handler only writes the signal number, the loop does the work. Installing it
// also ignores SIGPIPE, so a closed stdout or a vanished peer never kills the process. The pipe's
// write end is the one global of each program, because a signal handler can reach nothing else;
// loops may write byte 0 to it themselves to wake up for a reason other than a signal.
#pragma once

namespace hvd::agent::process {

// Installs the handlers; returns the pipe's read end (non-blocking, close-on-exec). Throws
// hvd::BackendError when the pipe cannot be made. Call once per process.
int installSignalPipe();

// The pipe's write end (-1 before installSignalPipe).
int signalPipeWriteFd();

}  // namespace hvd::agent::process
