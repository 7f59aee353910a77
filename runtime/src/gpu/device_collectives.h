// The blocking collectives on device buffers, as one interface with two implementations:
// NcclCollectives (NCCL on hvd's own stream) and StagedCollectives (pinned host copies over the
// CPU transports). DeviceBackend (device_backend.h) picks one per Runtime and routes every call
// whose buffers are device memory to it. Semantics are the public API's (hvd/hvd.hpp):
// blocking, results on the device when the call returns, one caller at a time.
#pragma once

#include <cstddef>
#include <vector>

#include "hvd/hvd.hpp"

namespace hvd::gpu {

class DeviceCollectives {
 public:
  virtual ~DeviceCollectives() = default;

  virtual void allreduce(const void* input, void* output, size_t count, DataType type,
                         const AllreduceOptions& options) = 0;
  virtual void allgather(const void* input, size_t count, void* output,
                         const std::vector<size_t>& counts, DataType type) = 0;
  virtual void broadcast(void* buffer, size_t count, DataType type,
                         const BroadcastOptions& options) = 0;
  virtual void reducescatter(const void* input, void* output, size_t count, DataType type,
                             const ReducescatterOptions& options) = 0;
  virtual void alltoall(const void* input, const std::vector<size_t>& sendCounts, void* output,
                        const std::vector<size_t>& recvCounts, DataType type) = 0;

  // "nccl" or "host-staged", for logs and tests.
  virtual const char* name() const = 0;
};

}  // namespace hvd::gpu
