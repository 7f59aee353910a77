// Device buffers over NCCL: the blocking collectives of the public API when the buffers are on
// a GPU and NCCL is available (HVD_GPU_BACKEND=auto or nccl).
//
//  * Every call runs on hvd's own non-blocking stream of the buffers' device. Before it reads
//    its inputs, that stream waits for an event recorded on the legacy default stream (where
//    programs without streams of their own queue their work); the call returns once its
//    results are on the device (blocking semantics, like the CPU collectives).
//  * While waiting it polls the completion event, not cudaStreamSynchronize, so a communicator
//    aborted by the watchdog (a peer died, a timeout, a job stop) ends the wait with the reason
//    instead of leaving the caller inside a dead collective.
//  * allreduce: ncclAllReduce (average is ncclAvg); with a hierarchical layout (HVD_HIERARCHICAL_
//    ALLREDUCE) a reduce-scatter over the node's "local/<node>" communicator, an allreduce of
//    the owned shard over "cross/<local rank>", and an allgather over "local/<node>"; the
//    leftover elements (fewer than the local size) take one allreduce over "global"
//    (gpu/hierarchical.h has the arithmetic). broadcast: ncclBroadcast. allgather: one
//    ncclAllGather for equal counts, a group of ncclBroadcasts (one per rank's part) for uneven
//    ones. reducescatter: ncclReduceScatter when every rank receives the same number of
//    elements; otherwise an allreduce into a device scratch buffer and a copy of this rank's
//    rows. alltoall: a group of ncclSend/ncclRecv pairs.
//  * Agreement (with `agreeOver`, the blocking API's backend): before any NCCL work, every call
//    exchanges the CPU collective's descriptor (collectives/agreement.h) over that host
//    context, so ranks that disagree (collective, type, op, root, counts) all fail with the
//    same InvalidArgumentError the CPU path gives, and no rank hands NCCL a call its peers do
//    not make (a hang or garbage). A rank whose own arguments are invalid still takes part.
//  * NCCL has no int16: a call of a type it lacks runs on `otherTypes` (DeviceBackend passes its
//    host-staged collectives), or, without one, is an InvalidArgumentError naming the type
//    before any NCCL call, never a call with a wrong NCCL type.
//  * With a watchdog, every call is registered as an op in flight on its first communicator from
//    before its first enqueue until it returns,
//    so one that outlives the op timeout aborts the job's communicators; an aborted call's
//    error carries the watchdog's message (what failed, where, what NCCL said).
// Not thread-safe: one caller at a time, as for the CPU collectives.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "gpu/comm_cache.h"
#include "gpu/cuda_api.h"
#include "gpu/device_collectives.h"
#include "gpu/device_stream.h"
#include "gpu/watchdog.h"
#include "hvd/hvd.hpp"
#include "transport/context.h"

namespace hvd::coll {
struct Descriptor;
}

namespace hvd::gpu {

// Where this rank sits for hierarchical allreduce: its host's index among the job's hosts, and
// its ranks in the local and cross communicators (NCCL rank = local rank / cross rank).
struct HierarchicalLayout {
  int node = 0;
  int localRank = 0;
  int localSize = 1;
  int crossRank = 0;
  int crossSize = 1;
};

// Whether NCCL has an element type for `type` (every hvd type but int16).
bool ncclHasType(DataType type);

struct NcclCollectivesOptions {
  // Null: every allreduce runs over "global".
  const HierarchicalLayout* hierarchical = nullptr;
  // Null: no op tracking (tests of the collectives alone).
  Watchdog* watchdog = nullptr;
  // Runs the calls whose type NCCL lacks (ncclHasType); null: they are refused.
  DeviceCollectives* otherTypes = nullptr;
  // The host context over which every call first agrees with its peers (the blocking API's);
  // null: no agreement (the engine's backend, whose ops the engine negotiated and checked, and
  // whose thread must not use the blocking API's context).
  transport::Context* agreeOver = nullptr;
};

class NcclCollectives final : public DeviceCollectives {
 public:
  // `comms` provides "global" (`rank` of `size`, the job's) and, for a hierarchical layout,
  // "local/<node>" and "cross/<local rank>".
  NcclCollectives(CudaApi& cuda, CommCache& comms, int rank, int size,
                  NcclCollectivesOptions options = {});
  ~NcclCollectives() override;
  NcclCollectives(const NcclCollectives&) = delete;
  NcclCollectives& operator=(const NcclCollectives&) = delete;

  void allreduce(const void* input, void* output, size_t count, DataType type,
                 const AllreduceOptions& options) override;
  // Autotune turns hierarchical allreduce on (a layout) or off (null) between calls, on every
  // rank at the same point of the engine's sequence.
  void setHierarchical(const HierarchicalLayout* layout) { options_.hierarchical = layout; }
  void allgather(const void* input, size_t count, void* output, const std::vector<size_t>& counts,
                 DataType type) override;
  void broadcast(void* buffer, size_t count, DataType type,
                 const BroadcastOptions& options) override;
  void reducescatter(const void* input, void* output, size_t count, DataType type,
                     const ReducescatterOptions& options) override;
  void alltoall(const void* input, const std::vector<size_t>& sendCounts, void* output,
                const std::vector<size_t>& recvCounts, DataType type) override;

  const char* name() const override { return "nccl"; }

 private:
  // The device of the buffers; throws unless they are all device memory of one device, the one
  // this rank used before.
  int checkDevice(const char* op, std::initializer_list<const void*> ptrs);
  // Enters `device`, makes the stream wait for the default stream, and returns the global
  // communicator.
  NcclCommunicator& enter(int device);
  // Checks the buffers and validate() on this rank, agrees on `mine` with the peers (with
  // agreeOver), then enter(), body(communicator) enqueues the call's work, and complete();
  // registered with the watchdog from enter() on.
  template <typename Validate, typename Body>
  void run(const char* op, std::initializer_list<const void*> ptrs, const coll::Descriptor& mine,
           Validate&& validate, Body&& body);
  // Throws this rank's `invalid` (if any), after the agreement round with agreeOver, which
  // throws alike on every rank when the ranks' descriptors differ.
  void agree(const char* op, coll::Descriptor mine, const std::string& invalid);
  // Waits for everything queued on the stream, or throws if the communicator was aborted.
  void complete(NcclCommunicator& comm, const char* op);
  [[noreturn]] void throwAborted(const std::string& comm, const char* op);
  // Null when NCCL runs `type`; else options_.otherTypes, or throws if there is none.
  DeviceCollectives* otherTypes(const char* op, DataType type);
  void hierarchicalAllreduce(NcclCommunicator& global, const void* input, void* output,
                             size_t count, DataType type, ReduceOp op);
  void* scratch(size_t bytes);

  CudaApi& cuda_;
  CommCache& comms_;
  const int rank_;
  const int size_;
  NcclCollectivesOptions options_;  // `hierarchical` changes through setHierarchical() only
  DeviceStream stream_;
  CudaEventHandle done_ = nullptr;  // completion of a call, on stream_
  void* scratch_ = nullptr;
  size_t scratchBytes_ = 0;
};

}  // namespace hvd::gpu
