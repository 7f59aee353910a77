// A fake NcclApi for CPU machines: the ranks of a test are threads of one process, "device"
// buffers are plain host memory, and every collective really computes its result.
//
// A FakeNcclWorld stands for the network between the ranks of one test: the test creates it,
// configures its faults before the ranks start, and hands it to one FakeNcclApi per rank (one
// shared FakeNcclApi works too: everything is thread-safe). What it models:
//  * getUniqueId returns 128 fresh random bytes and registers them; commInitRank with an id the
//    world never issued is kInvalidArgument.
//  * commInitRank is a rendezvous of `nranks` callers with the same id. Non-blocking, it returns
//    kInProgress (kSuccess for the last to arrive) and commGetAsyncError reports kInProgress
//    until all ranks arrived; blocking, it waits (at most blockingInitLimit, then kSystemError).
//  * Collectives are rendezvous of the communicator's ranks by call order: the last rank to
//    arrive computes the result into every rank's output, and each call returns once its
//    output is written (the stream is ignored; NCCL may legally behave so). Ranks that disagree
//    about a call (kind, count, type, op, root) all get kInvalidUsage. int16, which NCCL lacks,
//    is kInvalidArgument, as from the real library. send copies its data to
//    the peer's mailbox and returns; recv waits for it. Between groupStart and groupEnd calls are
//    queued per thread and run at the outermost groupEnd, sends first.
//  * commAbort makes every pending and later call on that communicator return kSystemError at
//    once (a second abort, or destroy after abort, is counted as a misuse). The aborted rank's
//    peers are not told, as when a real peer dies in a collective: they block until they abort
//    too, unless setAbortReachesPeers(true), which gives them kRemoteError.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gpu/nccl_api.h"

namespace hvd::test {

struct FakeNcclCounters {
  int uniqueIds = 0;    // ids getUniqueId handed out
  int inits = 0;        // commInitRank calls
  int aborts = 0;       // accepted commAbort calls
  int destroys = 0;     // accepted commDestroy calls
  int misuses = 0;      // second abort/destroy, destroy after abort or before the init finished
  int collectives = 0;  // completed collectives, sends and recvs, all ranks together
  int calls = 0;        // collective, send, recv and group calls made, whatever their result
};

class FakeNcclWorld {
 public:
  FakeNcclWorld();
  ~FakeNcclWorld();
  FakeNcclWorld(const FakeNcclWorld&) = delete;
  FakeNcclWorld& operator=(const FakeNcclWorld&) = delete;

  // ---- Faults, configured before the ranks start. A fault of rank R applies to every
  // communicator in which R takes part.

  // getUniqueId fails with `result`; ncclGetLastError then says `lastError`.
  void failUniqueId(gpu::NcclResult result, const std::string& lastError);
  // commInitRank of rank `rank` fails with `result` and `lastError`: reported by
  // commGetAsyncError, or returned by commInitRank itself (with no communicator) when
  // `immediate`. The communicator's other ranks then see kRemoteError ("rank R failed during
  // ncclCommInitRank"), as when a peer's bootstrap connection closes.
  void failInit(int rank, gpu::NcclResult result, const std::string& lastError,
                bool immediate = false);
  // Rank `rank` calls commInitRank but never joins: its communicator and its peers' stay
  // kInProgress until aborted.
  void neverArrive(int rank);
  // Once a communicator of rank `rank` completed its `k`-th operation, commGetAsyncError reports
  // `result` (with `lastError`) and every later call on it fails with `result`.
  void asyncErrorAfter(int rank, uint64_t k, gpu::NcclResult result, const std::string& lastError);
  // Whether an abort reaches the aborted rank's peers (kRemoteError for their pending and later
  // calls, and for their commGetAsyncError). Default false.
  void setAbortReachesPeers(bool on);
  // The longest a blocking commInitRank waits before it fails with kSystemError (default 10 s).
  void setBlockingInitLimit(std::chrono::milliseconds limit);
  void setVersion(int version);

  // ---- At any time.

  // Makes `comm` report `result` from commGetAsyncError and fail its later calls with it.
  void injectAsyncError(gpu::NcclComm comm, gpu::NcclResult result, const std::string& lastError);

  // ---- What happened.

  FakeNcclCounters counters() const;
  // Completed operations (collectives, sends, recvs) of one rank's communicator.
  uint64_t collectives(gpu::NcclComm comm) const;
  bool isAborted(gpu::NcclComm comm) const;
  bool isDestroyed(gpu::NcclComm comm) const;
  // Every id getUniqueId handed out, in order.
  std::vector<gpu::NcclUniqueId> issuedIds() const;
  // Threads blocked inside the fake right now (blocking init, collective, recv).
  int blocked() const;
  // Waits until at least `count` threads are blocked inside the fake; false after `timeout`.
  bool waitBlocked(int count, std::chrono::milliseconds timeout) const;

 private:
  friend class FakeNcclApi;
  struct State;
  std::unique_ptr<State> state_;
};

class FakeNcclApi final : public gpu::NcclApi {
 public:
  explicit FakeNcclApi(FakeNcclWorld& world);
  ~FakeNcclApi() override;

  int version() override;
  gpu::NcclResult getUniqueId(gpu::NcclUniqueId* id) override;
  gpu::NcclResult commInitRank(gpu::NcclComm* comm, int nranks, const gpu::NcclUniqueId& id,
                               int rank, bool blocking) override;
  gpu::NcclResult commGetAsyncError(gpu::NcclComm comm, gpu::NcclResult* asyncError) override;
  gpu::NcclResult commAbort(gpu::NcclComm comm) override;
  gpu::NcclResult commDestroy(gpu::NcclComm comm) override;
  gpu::NcclResult allReduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                            gpu::NcclComm comm, gpu::CudaStream stream) override;
  gpu::NcclResult broadcast(const void* send, void* recv, size_t count, DataType type, int root,
                            gpu::NcclComm comm, gpu::CudaStream stream) override;
  gpu::NcclResult allGather(const void* send, void* recv, size_t sendCount, DataType type,
                            gpu::NcclComm comm, gpu::CudaStream stream) override;
  gpu::NcclResult reduceScatter(const void* send, void* recv, size_t recvCount, DataType type,
                                ReduceOp op, gpu::NcclComm comm, gpu::CudaStream stream) override;
  gpu::NcclResult send(const void* buffer, size_t count, DataType type, int peer,
                       gpu::NcclComm comm, gpu::CudaStream stream) override;
  gpu::NcclResult recv(void* buffer, size_t count, DataType type, int peer, gpu::NcclComm comm,
                       gpu::CudaStream stream) override;
  gpu::NcclResult groupStart() override;
  gpu::NcclResult groupEnd() override;
  std::string errorString(gpu::NcclResult result) override;
  std::string lastError(gpu::NcclComm comm) override;

  // getUniqueId calls made through this object (one object per rank tells who asked).
  int uniqueIdCalls() const;

 private:
  struct Groups;
  FakeNcclWorld& world_;
  std::unique_ptr<Groups> groups_;  // per-thread groupStart/groupEnd queues
  mutable std::mutex mutex_;
  int uniqueIdCalls_ = 0;
};

}  // namespace hvd::test
