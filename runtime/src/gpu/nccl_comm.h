// One NCCL communicator, bootstrapped through the job's store.
//
// Bootstrap (bootstrapComm): rank 0 of the communicator calls ncclGetUniqueId and publishes the
// id under commIdKey(spec); every other rank reads it from the store; then all call
// ncclCommInitRank in non-blocking mode and poll ncclCommGetAsyncError until the init is done,
// fails, or the deadline passes (then the communicator is aborted, so no rank is left inside
// NCCL). One deadline, spec.timeout from the call, covers both the store wait and the init.
//
// The unique id lets any process that holds it join the communicator: it travels only through
// the job's (token-protected) store, appears in no log or error message, and rank 0 erases its
// key once the init succeeded (by then every rank has read it: NCCL's init completes only after
// all ranks joined with the id).
//
// Stale ids: the key holds spec.generation, which every rank of the communicator passes with
// the same value and bumps together whenever the communicators are re-created (for example after
// an abort and an elastic reset). A re-created communicator therefore never reads the id of an
// earlier, aborted one, even when that one's rank 0 died before it could erase its key.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "gpu/nccl_api.h"
#include "store/store.h"

namespace hvd::gpu {

struct CommSpec {
  // "global", "local", "cross", or a name that tells apart the several communicators of one
  // kind in a job ("local/1": the ranks of node 1). Part of the store key and of every message.
  std::string name = "global";
  int rank = 0;
  int size = 1;
  // Prepended to every store key ("" in a job's own namespace).
  std::string keyPrefix;
  // Same on every rank of the communicator; bumped together on every re-creation.
  uint64_t generation = 0;
  // For the whole bootstrap: waiting for rank 0's id and ncclCommInitRank together.
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  // This host's name, for messages ("rank 1 (host h1)").
  std::string host;
  // Pause between two polls of ncclCommGetAsyncError during the init.
  std::chrono::milliseconds pollInterval{2};
  // When set and it becomes true, the bootstrap stops at its next poll: the communicator is
  // aborted and a BackendError says the bootstrap was cancelled (CommCache::abortAll).
  const std::atomic<bool>* cancel = nullptr;
};

// The store key of a communicator's unique id: "<prefix>nccl/<generation>/<name>/id". The
// generation comes first so that no name can make two keys collide.
std::string commIdKey(const CommSpec& spec);

class NcclCommunicator {
 public:
  // Takes ownership of `comm`, an initialised communicator of `api`.
  NcclCommunicator(NcclApi& api, NcclComm comm, CommSpec spec);
  // ncclCommDestroy, or ncclCommAbort when a call on it failed (NCCL requires an abort after
  // an error); nothing when abort() already ran.
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  // ncclCommAbort, once: later calls do nothing. Thread-safe, and safe while another thread is
  // inside a collective on comm() (that is what ncclCommAbort is for: the call returns).
  void abort();
  bool aborted() const { return aborted_.load(); }

  // The handle for NcclApi calls. Not to be used after abort().
  NcclComm comm() const { return comm_; }
  NcclApi& api() const { return api_; }
  int rank() const { return spec_.rank; }
  int size() const { return spec_.size; }
  const std::string& name() const { return spec_.name; }
  const CommSpec& spec() const { return spec_; }

  // Turns the result of an NCCL call on this communicator into an exception: nothing for
  // kSuccess (and kInProgress), else a BackendError "NCCL: ncclAllReduce on communicator
  // 'global' failed on rank 1 (host h1): ncclSystemError: <error string> (<last error>)".
  // `call` is NCCL's function name. A failure marks the communicator broken.
  void check(NcclResult result, const char* call);

  // ncclCommGetAsyncError: kSuccess while healthy; kSystemError once aborted (without asking
  // NCCL: the handle is gone). For the watchdog.
  NcclResult asyncError();

 private:
  NcclApi& api_;
  const NcclComm comm_;
  const CommSpec spec_;
  std::mutex abortMutex_;  // serialises abort() with itself and the destructor
  std::atomic<bool> aborted_{false};
  std::atomic<bool> broken_{false};
};

// Creates the communicator `spec` describes (see the top of this file). Throws
//  * BackendError when NCCL reports an error ("NCCL: ncclCommInitRank of communicator 'global'
//    failed on rank 1 (host h1): ncclSystemError: <error string> (<last error>)"), or when
//    spec.cancel became true;
//  * TimeoutError when rank 0's id did not appear in the store in time, or not every rank joined
//    before the deadline; both name the communicator, the rank, its host and the timeout.
// No NCCL communicator is left behind when it throws.
std::unique_ptr<NcclCommunicator> bootstrapComm(NcclApi& api, store::Store& store,
                                                const CommSpec& spec);

}  // namespace hvd::gpu
