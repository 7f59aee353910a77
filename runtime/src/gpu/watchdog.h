// The NCCL watchdog: one background thread per process that makes sure a GPU never spins on a
// dead job. NCCL kernels wait for their peers forever; only ncclCommAbort stops them. So every
// poll interval the watchdog asks each watched communicator for its asynchronous error and
// looks at the age of the operations in flight, and on
//   * an error other than success / in-progress on any communicator (a peer died, the network
//     failed, NCCL hit a CUDA or internal error),
//   * an operation older than the op timeout (a peer stopped without an error), or
//   * a job stop (requestStop, e.g. the engine's stall shutdown or a failed CPU-side step),
// it aborts every watched communicator (all of them: a collective of the global communicator
// and one of the local communicator wait on the same dead peer), then calls onFailure once with
// a message that says what happened, where, and what NCCL said. The runtime fails every pending
// handle with that message.
//
// The second level: ncclCommAbort itself can hang (a wedged driver, a kernel that never yields).
// The aborts run on a thread of their own; if one has not returned within the abort timeout the
// watchdog calls die(), whose default logs the message and ends the process with exit code 70
// (the agent reports it and stops the job), which releases the GPU. The stuck thread is left
// alone. An injected die() that returns (tests) makes the watchdog wait for the aborts and then
// report as usual.
//
// After a failure the watched communicators have been aborted, which frees them: their owners
// must not destroy them (failed() tells; with options.abortAll the owners know by themselves).
// The watchdog calls ncclCommGetAsyncError on the raw handles until unwatch(comm) returns, so
// an owner unwatches before it destroys or aborts a communicator on its own (or asks the
// watchdog to abort everything with requestStop). After unwatch(comm) returns the watchdog no
// longer touches comm, unless a failure is already being handled, which aborts it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gpu/nccl_api.h"

namespace hvd::gpu {

// The exit code of a process that the watchdog ends because ncclCommAbort hung (EX_SOFTWARE).
inline constexpr int kWatchdogExitCode = 70;

struct WatchdogOptions {
  std::chrono::milliseconds pollInterval{100};
  // An in-flight op older than this fails the job; the runtime passes its HVD_TIMEOUT. Zero
  // turns the check off.
  std::chrono::milliseconds opTimeout{300000};
  // How long one ncclCommAbort may take before the process is ended.
  std::chrono::milliseconds abortTimeout{10000};
  // Called once, on the watchdog thread, after the aborts. May be empty.
  std::function<void(const std::string& message)> onFailure;
  // Called when an abort hangs. Empty: log the message and std::_Exit(kWatchdogExitCode).
  std::function<void(const std::string& message)> die;
  // How to abort. Empty: ncclCommAbort on each watched communicator. When the communicators
  // are owned by objects that must know they were aborted (CommCache::abortAll, which aborts
  // each NcclCommunicator once and cancels creations in progress), pass that here; it runs on
  // the abort thread, and the abort timeout covers the whole call.
  std::function<void()> abortAll;
};

class Watchdog {
 public:
  using OpToken = uint64_t;

  // Starts the thread.
  Watchdog(NcclApi& nccl, WatchdogOptions options);
  // Stops the thread without waiting for the next poll. Aborts nothing unless a failure was
  // detected or a stop requested before, in which case that is handled first (see the class
  // comment for a hung abort).
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Watches `comm`. `name` ("global", "local", "cross"), this process's hvd `rank` and `host`
  // are for messages. Watching a communicator again updates its names.
  void watch(NcclComm comm, const std::string& name, int rank, const std::string& host);
  // Stops watching `comm` and forgets its ops; waits for a poll that is using it to finish.
  void unwatch(NcclComm comm);

  // Marks an op enqueued on `comm` ("allreduce 'grad/w1'"); opFinished with the token once it
  // completed. Throws hvd::InternalError for a communicator that is not watched.
  OpToken opStarted(NcclComm comm, const std::string& opName);
  void opFinished(OpToken token);

  // Fails the job: aborts every watched communicator and reports `reason` (ignored once a
  // failure is being handled).
  void requestStop(const std::string& reason);

  // True once a failure was detected (the communicators are, or are being, aborted).
  bool failed() const;
  // The message given to onFailure ("" until then).
  std::string failureMessage() const;

 private:
  struct Watched {
    NcclComm comm = nullptr;
    std::string name;
    int rank = 0;
    std::string host;
  };
  struct InFlight {
    NcclComm comm = nullptr;
    std::string opName;
    std::chrono::steady_clock::time_point started;
  };
  using Lock = std::unique_lock<std::mutex>;

  void run();
  // One poll; returns the cause of a failure, "" when all is well.
  std::string poll(Lock& lock);
  std::string checkAsyncErrors(Lock& lock);
  std::string checkOpAges() const;
  // Aborts every watched communicator, handles a hung abort, reports `cause`.
  void fail(Lock& lock, const std::string& cause);
  void abortAll(const std::vector<Watched>& comms);
  const Watched* find(NcclComm comm) const;

  NcclApi& nccl_;
  const WatchdogOptions options_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;     // the watchdog thread: poll now, stop, or a stop request
  std::condition_variable changed_;  // everyone else: a poll or an abort moved on
  std::vector<Watched> watched_;     // in watch order, so reports are deterministic
  std::map<OpToken, InFlight> inFlight_;
  OpToken nextToken_ = 1;
  bool stopping_ = false;   // the destructor runs
  std::string stopReason_;  // requestStop's reason, "" when none
  bool polling_ = false;    // the watchdog thread is calling NCCL outside the mutex
  bool failed_ = false;     // a failure is being handled (or was)
  std::string failureMessage_;
  // The abort thread's progress: which communicator it is aborting (its index in the watched
  // list at the failure; unused with options.abortAll) and since when.
  size_t aborting_ = 0;
  std::chrono::steady_clock::time_point abortStarted_;
  bool abortsDone_ = false;
  std::vector<std::string> abortErrors_;  // "'local': ncclSystemError" for aborts that failed

  std::thread aborter_;
  std::thread thread_;  // last: started once everything above is initialised
};

}  // namespace hvd::gpu
