// Exit codes of hvdrun (docs/architecture.md "Failure semantics"). A failed rank's own status comes
// first: hvdrun exits with the root-cause rank's exit code, or 128+signal when a signal killed it,
// as a shell reports $?. The constants below cover outcomes that are not a rank's status. Where a
// convention exists they follow it (sysexits.h, timeout(1), shells), so scripts that already
// understand those numbers read hvdrun's correctly.
#pragma once

namespace hvd::contract {

// Every rank exited 0.
inline constexpr int kExitSuccess = 0;
// Usage error: a malformed option, -np above the slots, more GPU ranks than GPUs. Like every
// CLI tool (and hvdrun's argument parser): nothing was started.
inline constexpr int kExitUsage = 2;
// An agent could not be reached before launch (sysexits EX_UNAVAILABLE: "service unavailable").
// Nothing was started.
inline constexpr int kExitAgentUnreachable = 69;
// An agent refused our credentials: the cluster key (or TLS certificate) differs (sysexits
// EX_NOPERM). The agent was reached, so this is not "unreachable"; nothing was started.
inline constexpr int kExitAuthenticationFailed = 77;
// An agent refused or failed to start the ranks (program not found, bad cwd, ...)
// (sysexits EX_OSERR). Other hosts' ranks were stopped.
inline constexpr int kExitLaunchFailed = 71;
// A bug in hvd: an exception escaped where none should (sysexits EX_SOFTWARE). The job's ranks
// were stopped; the message says what went wrong, for a bug report.
inline constexpr int kExitInternalError = 70;
// An agent was lost while its ranks were running (sysexits EX_TEMPFAIL: retrying may work,
// since the program itself did not fail).
inline constexpr int kExitAgentLost = 75;
// The slots or GPUs the job needs were held by other jobs and it was not to wait (--no-queue).
// EX_TEMPFAIL too: nothing failed, and the same command later may run.
inline constexpr int kExitResourcesBusy = 75;
// The leader agent could not record the job in its state directory (a full or failing disk)
// (sysexits EX_IOERR). Nothing was started; the message names the directory and the reason.
inline constexpr int kExitAgentCannotRecord = 74;
// The job (or its start) ran past a deadline, as timeout(1) reports.
inline constexpr int kExitTimeout = 124;
// Cancelled by the user (Ctrl-C): 128 + SIGINT, what a shell reports for an interrupted command.
inline constexpr int kExitCancelled = 130;

}  // namespace hvd::contract
