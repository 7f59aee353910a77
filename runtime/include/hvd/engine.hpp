// libhvd's engine (DESIGN.md "Engine"): named collectives submitted asynchronously from any
// thread, matched across ranks by name, checked, fused and run in the background — what a
// training loop needs when its backward pass produces hundreds of gradients in a different
// order on every rank.
//
//   hvd::init();
//   hvd::Handle h = hvd::allreduceAsync("fc1.weight.grad", grad, grad, {128, 64},
//                                       hvd::DataType::kFloat32);   // average by default
//   ...                                   // submit the others as they become ready
//   h.wait();                             // throws the op's error, if any
//
// Semantics:
// * A name identifies one op across ranks: every rank submits an op of that name, and it runs
//   once all ranks have (rank order of submission does not matter). Before it runs, type,
//   shape, op, root, scale factors, compression and device must agree on every rank; otherwise
//   every rank's handle fails with an hvd::InvalidArgumentError naming the tensor, the field and
//   the ranks that differ, e.g. "allreduce 'fc1.weight': shape [17,18] on rank 1, [17,17] on
//   ranks 0,2". The job stays usable.
// * Submitting a name that is already in flight on this rank fails at once (InvalidArgument,
//   thrown by the submit call); the job stays usable. A name is in flight from its submit until
//   a wait()/waitFor() on its handle has seen the op finish, or until every copy of the handle
//   is gone and the op has finished — however early the engine ran it — so whether a second
//   submit is refused never depends on the engine's speed.
// * Buffers passed to a submit call must stay valid and untouched until the handle is done.
//   Input and output may be the same buffer (in place).
// * A stall (some ranks submitted a name, others did not, for HVD_STALL_CHECK_TIME seconds) is
//   logged by rank 0 with the tensors and the ranks they wait on; after HVD_STALL_SHUTDOWN_TIME
//   seconds every pending handle fails with that message instead of hanging.
// * These ops run on the engine's own connections, so they may be mixed freely with the blocking
//   collectives of hvd.hpp (which run in the caller's thread, in program order).
// * If a peer dies or times out, every pending handle fails with that error (PeerError,
//   TimeoutError), and so does every later submit (it throws). After a stall shutdown, pending
//   handles fail and later submits throw an hvd::TimeoutError naming the stalled ops. After
//   hvd::shutdown() on any rank, or the end of a rank's program without it, the engine stops on
//   every rank: pending ops fail, and later submits throw, a PeerError naming the rank and what
//   it did ("rank 1 shut hvd down (called shutdown())", "rank 1 exited without shutting hvd
//   down ..."). Calling these functions before hvd::init() throws InvalidArgumentError; in a
//   process forked after init, an InternalError (its threads stayed with the parent).
// * Tuning (environment, also under the HOROVOD_* names): HVD_CYCLE_TIME (ms, default 1),
//   HVD_FUSION_THRESHOLD (bytes, default 128 MiB, 0 = no fusion), HVD_CACHE_CAPACITY (default
//   1024, 0 = no response cache), HVD_STALL_CHECK_TIME / HVD_STALL_SHUTDOWN_TIME (seconds,
//   defaults 60 / 300, 0 = off / never), HVD_TIMELINE (path of a Chrome trace written by rank 0;
//   DYNAMIC: none until startTimeline()), HVD_TIMELINE_MARK_CYCLES (1: an instant event per
//   cycle that ran ops).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hvd/types.hpp"

namespace hvd {

// Row-major dimensions; the element count is their product (an empty shape is a scalar).
using Shape = std::vector<int64_t>;

struct OpOptions {
  // allreduce and reducescatter; kAdasum: allreduce of floating-point types only, each tensor of
  // a fused batch or group its own vector (docs/allreduce_ops.md)
  ReduceOp op = ReduceOp::kAverage;
  // Inputs are multiplied by prescaleFactor before the reduction and the result by
  // postscaleFactor after it. Integers are scaled as Horovod scales them: in float64, each
  // rank's scaled input truncated toward zero, the result (an average: the sum divided by the
  // size) scaled and truncated once at the end.
  double prescaleFactor = 1.0;
  double postscaleFactor = 1.0;
  // float32/float64 allreduce sent as float16 and cast back: half the bytes on the wire (sums
  // in float16; an average divides after the cast back). A no-op for float16/bfloat16.
  bool fp16Compression = false;
  int root = 0;  // broadcast: a job rank (hvd::rank()), also within a process set
  // The process set the op runs on (hvd/process_sets.hpp): 0, the global set, is every rank.
  // Only its members may submit to it; ranks in messages are job ranks.
  int processSet = 0;
  int device = -1;  // -1: host memory; a GPU index for device buffers (refused until a GPU
                    // backend exists)
};

namespace engine {
class OpState;
}

// The result of a submitted op. Copyable; all copies refer to the same op.
class Handle {
 public:
  Handle() = default;
  explicit Handle(std::shared_ptr<engine::OpState> state) : state_(std::move(state)) {}

  bool valid() const { return state_ != nullptr; }
  const std::string& name() const;
  // True once the op finished, successfully or not. Never blocks.
  bool poll() const;
  // Blocks until the op finished; rethrows its error.
  void wait() const;
  // Like wait() but gives up after `timeout`: false if the op is still running.
  bool waitFor(std::chrono::milliseconds timeout) const;

  // Results the engine allocates, valid after a successful wait():
  //   allgather: the ranks' inputs concatenated along dimension 0;
  //   reducescatter: this rank's rows of the reduction;
  //   alltoall: the rows received, in rank order.
  const std::vector<uint8_t>& output() const;
  const Shape& outputShape() const;
  // alltoall: rows received from each rank.
  const std::vector<int64_t>& receivedSplits() const;

 private:
  std::shared_ptr<engine::OpState> state_;
};

Handle allreduceAsync(const std::string& name, const void* input, void* output, const Shape& shape,
                      DataType type, const OpOptions& options = {});

// Negotiated and fused as one: runs once every member has been submitted on every rank, as one
// collective whatever HVD_FUSION_THRESHOLD says. All members share type and options; `names`,
// `inputs`, `outputs` and `shapes` are parallel. The handle fails if any member fails.
Handle groupedAllreduceAsync(const std::vector<std::string>& names,
                             const std::vector<const void*>& inputs,
                             const std::vector<void*>& outputs, const std::vector<Shape>& shapes,
                             DataType type, const OpOptions& options = {});

// Dimension 0 may differ across ranks; the other dimensions must agree. `processSet`, here and
// below: as OpOptions::processSet.
Handle allgatherAsync(const std::string& name, const void* input, const Shape& shape, DataType type,
                      int processSet = 0);

// `root` is a job rank, also within a process set (as in Horovod).
Handle broadcastAsync(const std::string& name, void* buffer, const Shape& shape, DataType type,
                      int root, int processSet = 0);

// Reduces, then leaves this rank its share of dimension 0's rows (the first rows % size ranks
// get one extra row).
Handle reducescatterAsync(const std::string& name, const void* input, const Shape& shape,
                          DataType type, const OpOptions& options = {});

// Sends splits[p] rows of dimension 0 (consecutive, in rank order) to each rank p; empty
// `splits`: an equal split, which must be exact.
Handle alltoallAsync(const std::string& name, const void* input, const Shape& shape,
                     const std::vector<int64_t>& splits, DataType type, int processSet = 0);

// Completes when every rank (of the process set) has submitted its n-th barrierAsync().
Handle barrierAsync(int processSet = 0);

// This rank has no more data: until every rank has joined, it takes part in the others'
// allreduces with zeros (an average still divides by size()); allgather, broadcast,
// reducescatter and alltoall submitted by the others meanwhile fail with an error naming the
// joined ranks. Blocks until every rank has joined; returns the rank that joined last (the
// highest of those that joined in the same negotiation cycle), the same on every rank. Then
// every rank takes part again: join() may be called again for the next epoch.
int join();

// CUDA buffers: submit calls order the op after the work queued on the legacy default stream.
// A program that computes on a stream of its own (torch's current stream) calls this before
// submitting: the device's later copies and collectives wait, on the device, for what `stream`
// (a cudaStream_t) holds now. The caller's thread does not block. No-op without a CUDA driver.
void orderAfterStream(int device, void* stream);
// The timeline (a Chrome trace of every op's phases, for Perfetto or chrome://tracing), started
// and stopped by the program, as Horovod's hvd.start_timeline() / hvd.stop_timeline(); usually
// with HVD_TIMELINE=DYNAMIC, which records nothing until then (hvd needs no such setting: a
// timeline started by HVD_TIMELINE=path is replaced or stopped the same way). Rank 0 writes the
// file; the calls are not collective, and on other ranks they only check their argument.
//
// Starts writing the timeline to `path` (rank 0 writes; other ranks record nothing), replacing
// one that is being written. markCycles: an instant event per negotiation cycle that did work.
// Starting again with the path being written keeps appending to it (only markCycles changes).
// Returns once the engine records into the new file. Ops already in flight appear from their
// negotiation on. Throws InvalidArgumentError for an empty path and BackendError (naming the
// path) when rank 0 cannot create the file; the previous timeline, if any, then goes on.
void startTimeline(const std::string& path, bool markCycles = false);
// Stops the timeline and returns once its file is complete, valid JSON. No-op when none runs.
void stopTimeline();

// What this rank's engine did so far: monotonic counters, for tests, benchmarks and monitoring.
struct EngineStats {
  uint64_t cycles = 0;        // negotiation cycles (one bit-vector allreduce each)
  uint64_t negotiations = 0;  // cycles that also exchanged uncached requests
  uint64_t collectives = 0;   // data collectives run (one per fused batch)
  uint64_t fusedTensors = 0;  // tensors that shared their collective with others
  uint64_t cacheHits = 0;     // ops negotiated through the response cache alone
  uint64_t responses = 0;     // ops run successfully
  uint64_t errors = 0;        // ops failed by negotiation (mismatch, joined ranks)
  // Payload bytes of those data collectives, in the type they travel in (an fp16-compressed
  // float32 allreduce of N elements counts 2N, uncompressed 4N; a fused batch counts its fused
  // buffer): the tensor for allreduce, broadcast and reducescatter, the gathered result for
  // allgather, what this rank sends for alltoall. Negotiation traffic is not counted.
  uint64_t bytes = 0;
};

// This rank's engine counters; all zero while the engine has not started (it starts with the
// first async op). Never starts it.
EngineStats engineStats();

}  // namespace hvd
