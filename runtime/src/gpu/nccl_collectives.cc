#include "gpu/nccl_collectives.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <thread>

#include "collectives/agreement.h"
#include "collectives/collectives.h"
#include "collectives/validate.h"
#include "gpu/hierarchical.h"
#include "hvd/error.hpp"

namespace hvd::gpu {
namespace {

std::vector<size_t> offsetsOf(const std::vector<size_t>& counts) {
  std::vector<size_t> offsets(counts.size(), 0);
  for (size_t i = 1; i < counts.size(); ++i) offsets[i] = offsets[i - 1] + counts[i - 1];
  return offsets;
}

const uint8_t* at(const void* base, size_t elements, size_t elem) {
  return static_cast<const uint8_t*>(base) + elements * elem;
}

uint8_t* at(void* base, size_t elements, size_t elem) {
  return static_cast<uint8_t*>(base) + elements * elem;
}

// Registers a call with the watchdog from before its first enqueue until it returns (so a call
// that never completes, wherever it waits, is an op in flight that the timeout catches).
class InFlight {
 public:
  InFlight(Watchdog* watchdog, NcclCommunicator& comm, const char* op)
      : watchdog_(watchdog),
        token_(watchdog != nullptr ? watchdog->opStarted(comm.comm(), op) : 0) {}
  ~InFlight() {
    if (watchdog_ != nullptr) watchdog_->opFinished(token_);
  }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  Watchdog* watchdog_;
  Watchdog::OpToken token_;
};

}  // namespace

bool ncclHasType(DataType type) { return type != DataType::kInt16; }

NcclCollectives::NcclCollectives(CudaApi& cuda, CommCache& comms, int rank, int size,
                                 NcclCollectivesOptions options)
    : cuda_(cuda), comms_(comms), rank_(rank), size_(size), options_(options), stream_(cuda) {}

NcclCollectives::~NcclCollectives() {
  if (scratch_ != nullptr) cuda_.freeDevice(scratch_);
  if (done_ != nullptr) cuda_.destroyEvent(done_);
}

int NcclCollectives::checkDevice(const char* op, std::initializer_list<const void*> ptrs) {
  const int device = buffersDevice(cuda_, op, ptrs, true);
  if (stream_.device() >= 0 && device != stream_.device()) {
    throw InvalidArgumentError(std::string(op) + ": this rank used device " +
                               std::to_string(stream_.device()) + " before and now device " +
                               std::to_string(device) +
                               "; a rank's NCCL communicators belong to one device");
  }
  return device;
}

NcclCommunicator& NcclCollectives::enter(int device) {
  stream_.enter(device);
  if (done_ == nullptr) done_ = cuda_.createEvent();
  return comms_.get("global");
}

void NcclCollectives::complete(NcclCommunicator& comm, const char* op) {
  cuda_.recordEvent(done_, stream_.stream());
  Watchdog* watchdog = options_.watchdog;
  auto pause = std::chrono::microseconds(1);
  while (!cuda_.eventDone(done_)) {
    if (comm.aborted() || (watchdog != nullptr && watchdog->failed()))
      throwAborted(comm.name(), op);
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(200));
  }
  if (comm.aborted()) throwAborted(comm.name(), op);
}

void NcclCollectives::agree(const char* op, coll::Descriptor mine, const std::string& invalid) {
  transport::Context* ctx = options_.agreeOver;
  if (ctx != nullptr && ctx->size() > 1) {
    ctx->checkUsable();
    // The ring path's round of the CPU collective: a peer in that collective (an int16 call,
    // host-staged) or in another one takes part in the same exchange and fails alike.
    if (!invalid.empty()) mine.flags = coll::kInvalid;
    coll::agree(*ctx, op, mine, invalid);
  }
  if (!invalid.empty()) throw InvalidArgumentError(invalid);
}

template <typename Validate, typename Body>
void NcclCollectives::run(const char* op, std::initializer_list<const void*> ptrs,
                          const coll::Descriptor& mine, Validate&& validate, Body&& body) {
  int device = -1;
  const std::string invalid = coll::localError([&] {
    device = checkDevice(op, ptrs);
    validate();
  });
  // After an abort every device call fails with its reason, without waiting for peers that may
  // be gone.
  if (options_.watchdog != nullptr && options_.watchdog->failed()) throwAborted("global", op);
  agree(op, mine, invalid);
  NcclCommunicator* comm = nullptr;
  try {
    comm = &enter(device);
    InFlight flight(options_.watchdog, *comm, op);
    body(*comm);
    complete(*comm, op);
  } catch (const BackendError&) {
    // A call cut short by the watchdog's abort (or refused after it) fails with its reason.
    if ((comm != nullptr && comm->aborted()) ||
        (options_.watchdog != nullptr && options_.watchdog->failed())) {
      throwAborted(comm != nullptr ? comm->name() : "global", op);
    }
    throw;
  }
}

void NcclCollectives::throwAborted(const std::string& comm, const char* op) {
  std::string why;
  if (options_.watchdog != nullptr && options_.watchdog->failed()) {
    // The watchdog writes its message once the aborts it started have returned.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while ((why = options_.watchdog->failureMessage()).empty() &&
           std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  if (why.empty()) {
    why =
        "the job's communicators were aborted (a peer failed, an operation timed out, or the "
        "job is stopping)";
  }
  throw BackendError(std::string("NCCL: ") + op + " on communicator '" + comm +
                     "' was cut short on rank " + std::to_string(rank_) + ": " + why);
}

DeviceCollectives* NcclCollectives::otherTypes(const char* op, DataType type) {
  if (ncclHasType(type)) return nullptr;
  // After an abort every device call fails with its reason, whichever path it would take.
  if (options_.watchdog != nullptr && options_.watchdog->failed()) throwAborted("global", op);
  if (options_.otherTypes == nullptr) {
    throw InvalidArgumentError(std::string(op) + ": NCCL has no " + dataTypeName(type) +
                               " type; run " + dataTypeName(type) +
                               " device buffers with HVD_GPU_BACKEND=host (host-staged), or "
                               "convert them to a type NCCL has (int32)");
  }
  return options_.otherTypes;
}

void* NcclCollectives::scratch(size_t bytes) {
  if (scratchBytes_ < bytes) {
    if (scratch_ != nullptr) cuda_.freeDevice(scratch_);
    scratch_ = nullptr;
    scratchBytes_ = 0;
    scratch_ = cuda_.allocDevice(bytes);
    scratchBytes_ = bytes;
  }
  return scratch_;
}

void NcclCollectives::allreduce(const void* input, void* output, size_t count, DataType type,
                                const AllreduceOptions& options) {
  if (DeviceCollectives* other = otherTypes("allreduce", type)) {
    return other->allreduce(input, output, count, type, options);
  }
  if (options.op == ReduceOp::kAdasum) {
    // NCCL has no Adasum: staged through host memory, where hvd's transports run it.
    if (options_.watchdog != nullptr && options_.watchdog->failed()) {
      throwAborted("global", "allreduce");
    }
    if (options_.otherTypes == nullptr) {
      throw InvalidArgumentError(
          "allreduce: NCCL has no adasum op; run Adasum on device buffers with "
          "HVD_GPU_BACKEND=host (host-staged)");
    }
    return options_.otherTypes->allreduce(input, output, count, type, options);
  }
  coll::Descriptor mine = coll::describe(coll::CollectiveKind::kAllreduce, type, count);
  mine.op = static_cast<uint8_t>(options.op);
  mine.algorithm = coll::kAlgorithmRing;
  auto validate = [&] {
    coll::validateBuffers("allreduce", input, output, count, type);
    coll::validateAllreduceOp("allreduce", options.op, type);
  };
  run("allreduce", {input, output}, mine, validate, [&](NcclCommunicator& comm) {
    if (options_.hierarchical != nullptr && count > 0) {
      hierarchicalAllreduce(comm, input, output, count, type, options.op);
    } else if (count > 0) {
      comm.check(comm.api().allReduce(input, output, count, type, options.op, comm.comm(),
                                      stream_.stream()),
                 "ncclAllReduce");
    }
  });
}

// Steps 1-3 of gpu/hierarchical.h, all on hvd's stream (so in order), plus the leftover's
// allreduce over the global communicator. Reduce-scatter and allgather use NCCL's in-place
// offsets: the owned shard lives at output + ownedOffset throughout.
void NcclCollectives::hierarchicalAllreduce(NcclCommunicator& global, const void* input,
                                            void* output, size_t count, DataType type,
                                            ReduceOp op) {
  const HierarchicalLayout& layout = *options_.hierarchical;
  const HierarchicalPlan plan = hierarchicalPlan(count, layout.localRank, layout.localSize);
  const size_t elem = dataTypeSize(type);
  if (plan.even > 0) {
    void* owned = at(output, plan.ownedOffset, elem);
    if (layout.localSize > 1) {
      NcclCommunicator& local = comms_.get("local/" + std::to_string(layout.node));
      local.check(local.api().reduceScatter(input, owned, plan.shard, type, op, local.comm(),
                                            stream_.stream()),
                  "ncclReduceScatter");
    } else if (input != output) {
      cuda_.copyAsync(output, input, plan.even * elem, stream_.stream());
    }
    if (layout.crossSize > 1) {
      NcclCommunicator& cross = comms_.get("cross/" + std::to_string(layout.localRank));
      cross.check(
          cross.api().allReduce(owned, owned, plan.shard, type, op, cross.comm(), stream_.stream()),
          "ncclAllReduce");
    }
    if (layout.localSize > 1) {
      NcclCommunicator& local = comms_.get("local/" + std::to_string(layout.node));
      local.check(
          local.api().allGather(owned, output, plan.shard, type, local.comm(), stream_.stream()),
          "ncclAllGather");
    }
  }
  if (plan.leftover > 0) {
    global.check(global.api().allReduce(at(input, plan.even, elem), at(output, plan.even, elem),
                                        plan.leftover, type, op, global.comm(), stream_.stream()),
                 "ncclAllReduce");
  }
}

void NcclCollectives::broadcast(void* buffer, size_t count, DataType type,
                                const BroadcastOptions& options) {
  if (DeviceCollectives* other = otherTypes("broadcast", type)) {
    return other->broadcast(buffer, count, type, options);
  }
  coll::Descriptor mine = coll::describe(coll::CollectiveKind::kBroadcast, type, count);
  mine.root = options.root;
  mine.algorithm = coll::kAlgorithmRing;
  auto validate = [&] {
    coll::validateBuffers("broadcast", buffer, buffer, count, type);
    coll::validateRank("broadcast", "root", options.root, size_);
  };
  run("broadcast", {buffer}, mine, validate, [&](NcclCommunicator& comm) {
    if (count > 0) {
      comm.check(comm.api().broadcast(buffer, buffer, count, type, options.root, comm.comm(),
                                      stream_.stream()),
                 "ncclBroadcast");
    }
  });
}

void NcclCollectives::allgather(const void* input, size_t count, void* output,
                                const std::vector<size_t>& counts, DataType type) {
  if (DeviceCollectives* other = otherTypes("allgather", type)) {
    return other->allgather(input, count, output, counts, type);
  }
  coll::Descriptor mine = coll::describe(coll::CollectiveKind::kAllgather, type, count);
  mine.extra = coll::countsChecksum(counts);
  mine.algorithm = coll::kAlgorithmRing;
  auto validate = [&] {
    coll::validateAllgather(input, count, output, counts, type, rank_, size_);
  };
  run("allgather", {input, output}, mine, validate, [&](NcclCommunicator& comm) {
    NcclApi& api = comm.api();
    const size_t elem = dataTypeSize(type);
    const bool even =
        std::all_of(counts.begin(), counts.end(), [&](size_t c) { return c == count; });
    if (even) {
      if (count > 0) {
        comm.check(api.allGather(input, output, count, type, comm.comm(), stream_.stream()),
                   "ncclAllGather");
      }
    } else {
      const auto offsets = offsetsOf(counts);
      comm.check(api.groupStart(), "ncclGroupStart");
      for (int r = 0; r < size_; ++r) {
        if (counts[r] == 0) continue;
        void* part = at(output, offsets[r], elem);
        comm.check(api.broadcast(r == rank_ ? input : part, part, counts[r], type, r, comm.comm(),
                                 stream_.stream()),
                   "ncclBroadcast");
      }
      comm.check(api.groupEnd(), "ncclGroupEnd");
    }
  });
}

void NcclCollectives::reducescatter(const void* input, void* output, size_t count, DataType type,
                                    const ReducescatterOptions& options) {
  if (DeviceCollectives* other = otherTypes("reducescatter", type)) {
    return other->reducescatter(input, output, count, type, options);
  }
  coll::Descriptor descriptor = coll::describe(coll::CollectiveKind::kReducescatter, type, count);
  descriptor.op = static_cast<uint8_t>(options.op);
  descriptor.extra = options.rowElements;
  descriptor.algorithm = coll::kAlgorithmRing;
  std::vector<size_t> counts;
  auto validate = [&] {
    coll::validateBuffers("reducescatter", input, output, count, type);
    coll::validateOp("reducescatter", options.op);
    counts = coll::reducescatterCounts(count, size_, options.rowElements);
  };
  run("reducescatter", {input, output}, descriptor, validate, [&](NcclCommunicator& comm) {
    const size_t mine = counts[rank_];
    NcclApi& api = comm.api();
    const size_t elem = dataTypeSize(type);
    const bool even =
        std::all_of(counts.begin(), counts.end(), [&](size_t c) { return c == counts[0]; });
    if (even && count > 0) {
      comm.check(
          api.reduceScatter(input, output, mine, type, options.op, comm.comm(), stream_.stream()),
          "ncclReduceScatter");
    } else if (count > 0) {
      void* all = scratch(count * elem);
      comm.check(api.allReduce(input, all, count, type, options.op, comm.comm(), stream_.stream()),
                 "ncclAllReduce");
      const auto offsets = offsetsOf(counts);
      if (mine > 0)
        cuda_.copyAsync(output, at(all, offsets[rank_], elem), mine * elem, stream_.stream());
    }
  });
}

void NcclCollectives::alltoall(const void* input, const std::vector<size_t>& sendCounts,
                               void* output, const std::vector<size_t>& recvCounts, DataType type) {
  if (DeviceCollectives* other = otherTypes("alltoall", type)) {
    return other->alltoall(input, sendCounts, output, recvCounts, type);
  }
  // As the CPU alltoall's descriptor: its total, and the checksums of what it sends each rank
  // and expects from each (only for valid counts, as there). validate() fills them in; run()
  // reads `mine` only after it.
  coll::Descriptor mine = coll::describe(coll::CollectiveKind::kAlltoall, type, 0);
  mine.algorithm = coll::kAlgorithmDirect;
  auto validate = [&] {
    mine.count =
        coll::validateAlltoall(input, sendCounts, output, recvCounts, type, rank_, size_).first;
    for (int p = 0; p < size_; ++p) {
      mine.extra += sendCounts[p] * coll::countWeight(rank_, p);
      mine.extra2 += recvCounts[p] * coll::countWeight(p, rank_);
    }
  };
  run("alltoall", {input, output}, mine, validate, [&](NcclCommunicator& comm) {
    NcclApi& api = comm.api();
    const size_t elem = dataTypeSize(type);
    const auto sendOffsets = offsetsOf(sendCounts);
    const auto recvOffsets = offsetsOf(recvCounts);
    comm.check(api.groupStart(), "ncclGroupStart");
    for (int p = 0; p < size_; ++p) {
      if (sendCounts[p] > 0) {
        comm.check(api.send(at(input, sendOffsets[p], elem), sendCounts[p], type, p, comm.comm(),
                            stream_.stream()),
                   "ncclSend");
      }
      if (recvCounts[p] > 0) {
        comm.check(api.recv(at(output, recvOffsets[p], elem), recvCounts[p], type, p, comm.comm(),
                            stream_.stream()),
                   "ncclRecv");
      }
    }
    comm.check(api.groupEnd(), "ncclGroupEnd");
  });
}

}  // namespace hvd::gpu
