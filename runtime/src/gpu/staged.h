// Device buffers over the CPU transports: the path GPU jobs take without NCCL (or with
// HVD_GPU_BACKEND=host). Each device buffer of a collective is copied into page-locked host
// memory on hvd's own stream, the CPU collective runs on the host copies, and results are
// copied back; host buffers are used as they are, so a call may mix the two.
//
// Ordering against the caller: before reading a device input, hvd's stream waits for an event
// recorded on the legacy default stream (where work of programs that use no streams of their
// own runs), and every call returns only after its results are on the device (blocking
// semantics, as the CPU collectives have). Pinned buffers grow to the largest call and are
// kept. Not thread-safe: one caller at a time, as for the transport Context it uses.
#pragma once

#include <cstddef>
#include <vector>

#include "gpu/cuda_api.h"
#include "gpu/device_collectives.h"
#include "gpu/device_stream.h"
#include "hvd/hvd.hpp"
#include "transport/context.h"

namespace hvd::gpu {

class StagedCollectives final : public DeviceCollectives {
 public:
  StagedCollectives(CudaApi& cuda, transport::Context& context);
  ~StagedCollectives() override;
  StagedCollectives(const StagedCollectives&) = delete;
  StagedCollectives& operator=(const StagedCollectives&) = delete;

  void allreduce(const void* input, void* output, size_t count, DataType type,
                 const AllreduceOptions& options) override;
  void allgather(const void* input, size_t count, void* output, const std::vector<size_t>& counts,
                 DataType type) override;
  void broadcast(void* buffer, size_t count, DataType type,
                 const BroadcastOptions& options) override;
  void reducescatter(const void* input, void* output, size_t count, DataType type,
                     const ReducescatterOptions& options) override;
  void alltoall(const void* input, const std::vector<size_t>& sendCounts, void* output,
                const std::vector<size_t>& recvCounts, DataType type) override;

  const char* name() const override { return "host-staged"; }

 private:
  struct Pinned {
    void* data = nullptr;
    size_t bytes = 0;
  };
  // A host view of `bytes` at `user`: `user` itself for host memory, else pinned buffer
  // `slot`, filled from the device when `copyIn`.
  void* hostView(const void* user, size_t bytes, int slot, bool copyIn);
  // Copies a host view back to the device buffer it stands for (no-op for host memory).
  void copyOut(void* user, const void* view, size_t bytes);
  // Enters the device of the device pointers among `ptrs`; returns false if none is one.
  bool enter(const char* op, std::initializer_list<const void*> ptrs);
  void finish();
  void* pinned(int slot, size_t bytes);

  CudaApi& cuda_;
  transport::Context& context_;
  DeviceStream stream_;
  Pinned pinned_[2];
};

}  // namespace hvd::gpu
