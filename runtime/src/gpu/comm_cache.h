// The job's NCCL communicators ("global", "local", "cross"), created lazily on first use and
// cached: a job that only ever allreduces over "global" never bootstraps the others.
//
// Creation runs outside the cache's lock (a slow "local" does not hold up "global"), once per
// name even when several threads ask at the same time: the others wait for the first one's
// result. A creation that fails is not retried: ranks that retried on their own would disagree
// about which attempt they are in, so the failure is kept and rethrown to every later get() of
// that name.
//
// abortAll() (the watchdog on a peer failure or timeout, or a job stop) aborts every
// communicator once and cancels creations in progress; afterwards get() throws a BackendError
// saying the job's communicators were aborted, instead of bootstrapping new ones behind the
// caller's back. Communicators stay owned by the cache until it is destroyed, so references
// handed out by get() remain valid after abortAll().
#pragma once

#include <atomic>
#include <condition_variable>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gpu/nccl_comm.h"

namespace hvd::gpu {

class CommCache {
 public:
  // Builds the communicator called `name`; in production bootstrapComm over the job's store
  // with the CommSpec of that name (passing `cancel` as CommSpec::cancel), in tests the same
  // over a fake NCCL. It may throw; it is never called twice for one name.
  using Factory = std::function<std::unique_ptr<NcclCommunicator>(const std::string& name,
                                                                  const std::atomic<bool>& cancel)>;

  explicit CommCache(Factory factory);
  // Destroys the communicators (ncclCommDestroy, or nothing for aborted ones). No get() may
  // be running.
  ~CommCache();
  CommCache(const CommCache&) = delete;
  CommCache& operator=(const CommCache&) = delete;

  // The communicator `name`, created by this call if it is the first to ask. Throws what the
  // factory threw (then, and on every later call for this name), or BackendError after
  // abortAll().
  NcclCommunicator& get(const std::string& name);

  // Names of the communicators created so far (successfully), in name order.
  std::vector<std::string> created() const;

  // Aborts every communicator (each once, however often this is called) and makes creations in
  // progress and every later get() fail. `reason` goes into the later errors ("rank 3 failed").
  // Thread-safe; returns after the aborts ran.
  void abortAll(const std::string& reason = "");
  bool aborted() const { return cancel_.load(); }

 private:
  struct Entry {
    bool done = false;
    std::unique_ptr<NcclCommunicator> comm;
    std::exception_ptr error;
  };

  [[noreturn]] void throwAborted(const std::string& name) const;

  const Factory factory_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, Entry> entries_;
  std::atomic<bool> cancel_{false};
  std::string reason_;  // guarded by mutex_
};

}  // namespace hvd::gpu
