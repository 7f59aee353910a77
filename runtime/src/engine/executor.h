// Runs the agreed responses of a cycle, identically on every rank: host buffers through a
// coll::HostCollectives (the engine's Context by default, MPI with HVD_CPU_BACKEND=mpi), device
// buffers through the engine's gpu::DeviceBackend.
//
// Adasum batches (ReduceOp::kAdasum) take the same paths, with every member reduced as its own
// vector (coll::allreduceSegments, also over the packed fusion buffer), always over the
// engine's own transports (MPI has no Adasum) and, for device tensors, through host copies
// (NCCL has none either).
//
// Tensor fusion: consecutive allreduce responses with the same data type, reduce op, scale
// factors, compression and device form one batch of at most `fusionThreshold` bytes (as sent:
// float16 when compressed); the members of a grouped allreduce always share one batch, whatever
// its size. A batch runs as ONE collective:
//  * without prescale or compression, as one segmented allreduce (allreduceSegments): the
//    ring moves every chunk straight from the members' inputs to their outputs, so fusion
//    costs no copies (MPI packs them into one buffer) (large batches on shared memory are
//    bandwidth-bound, and packing 100 MiB into a buffer and back costs more than the 160
//    collectives it saves); postscale after;
//  * otherwise packed into the fusion buffer (kept across cycles; prescale and the float16
//    cast happen while packing), reduced in place, and unpacked (cast back, average for
//    compressed ops, postscale): the MEMCPY_IN/OUT_FUSION_BUFFER phases of the timeline.
//
// Device tensors (Request::device >= 0, through the engine's gpu::DeviceBackend): a batch
// without prescale, postscale or compression runs on the device (NCCL, or host-staged where
// NCCL is missing): one member in place, several through a device fusion buffer (copied in and
// out on the default stream). hvd has no GPU kernels for scaling and casting, so batches that
// need them, and the inputs of allgather, reducescatter and alltoall (whose outputs the engine
// allocates in host memory), are copied to host memory and take the CPU path.
//
// A rank without a local op for a name (it has joined) takes part with zeros and drops the
// result. Other ops run one by one; the executor allocates their outputs into the op's state.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "collectives/host_collectives.h"
#include "engine/controller.h"
#include "engine/op_state.h"
#include "engine/request.h"
#include "gpu/device_backend.h"
#include "transport/context.h"

namespace hvd::engine {

class Timeline;

// This rank's side of one named op.
struct LocalOp {
  Request request;
  const void* input = nullptr;
  void* output = nullptr;  // allreduce; broadcast: the buffer (input == output)
  std::shared_ptr<OpState> state;
  // Negotiation bookkeeping of the engine thread.
  enum class Phase { kNew, kCached, kSent } phase = Phase::kNew;
  Clock::time_point cachedSince;
  Clock::time_point submitted;  // when the caller submitted it (with a straggler check only)
};

// Counters of what the engine did; the engine thread writes them, anyone may read.
struct EngineCounters {
  std::atomic<uint64_t> cycles{0};
  std::atomic<uint64_t> negotiations{0};  // cycles that exchanged requests (allgather)
  std::atomic<uint64_t> collectives{0};   // data collectives run (a fused batch counts once)
  std::atomic<uint64_t> fusedTensors{0};  // tensors that shared a collective with others
  std::atomic<uint64_t> cacheHits{0};     // responses that came from the response cache
  std::atomic<uint64_t> responses{0};     // ops run
  std::atomic<uint64_t> errors{0};        // error responses (mismatches, joined ranks)
  std::atomic<uint64_t> bytes{0};         // payload of the data collectives, as sent (EngineStats)
};

// Batches of consecutive responses [begin, end): pure logic (see above), for tests.
std::vector<std::pair<size_t, size_t>> planBatches(const std::vector<Response>& responses,
                                                   size_t fusionThreshold);

class Executor {
 public:
  // `collectives` null: hvd's own collectives over `context`.
  Executor(transport::Context& context, size_t fusionThreshold, EngineCounters& counters,
           Timeline* timeline, gpu::DeviceBackend* devices = nullptr,
           coll::HostCollectives* collectives = nullptr);

  // Where phases go from now on (null: nowhere); the engine thread swaps it between cycles.
  void setTimeline(Timeline* timeline) { timeline_ = timeline; }

  // Autotune's fusion threshold, set on every rank after the same cycle (plans must agree).
  void setFusionThreshold(size_t bytes) { fusionThreshold_ = bytes; }
  size_t fusionThreshold() const { return fusionThreshold_; }

  // planBatches() with this executor's fusion threshold.
  std::vector<std::pair<size_t, size_t>> plan(const std::vector<Response>& responses) const {
    return planBatches(responses, fusionThreshold_);
  }

  // Runs responses[begin, end) (one batch of plan(), all kRun). locals[i] is this rank's
  // op for responses[begin + i], or null. Throws what the collective throws.
  void run(const std::vector<Response>& responses, size_t begin, size_t end,
           const std::vector<LocalOp*>& locals);

 private:
  void allreduceBatch(const std::vector<const Response*>& batch,
                      const std::vector<LocalOp*>& locals);
  void hostAllreduceBatch(const std::vector<const Response*>& batch,
                          const std::vector<LocalOp*>& locals);
  void deviceAllreduceBatch(const std::vector<const Response*>& batch,
                            const std::vector<LocalOp*>& locals);
  gpu::DeviceBackend& devices(const Request& request);
  // What runs a host allreduce with `op`: host_, or the engine's own ring for what MPI lacks.
  coll::HostCollectives& hostFor(ReduceOp op);
  void allgather(const Response& response, LocalOp* local);
  void broadcast(const Response& response, LocalOp* local);
  void reducescatter(const Response& response, LocalOp* local);
  void alltoall(const Response& response, LocalOp* local);
  uint8_t* fusionBuffer(size_t bytes);
  // Pointers collectives accept for zero elements too (they refuse null).
  uint8_t* dataOf(std::vector<uint8_t>& v);
  // The op's input as host memory: a copy in inputShadow_ for a device tensor.
  const void* inputOf(const LocalOp* op);
  void* outputOf(LocalOp* op);
  void phaseBegin(const LocalOp* local, const char* activity);
  void phaseEnd(const LocalOp* local);

  transport::Context& context_;
  std::unique_ptr<coll::RingCollectives> ring_;  // over context_; host_ when none were given
  coll::HostCollectives& host_;
  size_t fusionThreshold_;
  EngineCounters& counters_;
  Timeline* timeline_;
  gpu::DeviceBackend* devices_;
  std::vector<uint8_t> fusion_;
  std::vector<uint8_t> inputShadow_;  // grows to the largest batch, kept across cycles
  uint8_t emptyByte_ = 0;
};

// dst[i] = src[i] / divisor * factor, converting between data types, computed in float64 (an
// integer result is truncated toward zero, as Horovod scales integers). Exposed for tests.
void convertScaled(DataType srcType, const void* src, DataType dstType, void* dst, size_t count,
                   double factor, int divisor);

}  // namespace hvd::engine
