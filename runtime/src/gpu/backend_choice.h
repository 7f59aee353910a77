// HVD_GPU_BACKEND: which collectives device buffers take (see gpu/device_backend.h).
#pragma once

namespace hvd::gpu {

enum class GpuBackendChoice {
  kAuto,  // NCCL when it loads, else host-staged
  kNccl,  // NCCL or an error
  kHost,  // staged through pinned host memory over the CPU transports
};

// "auto", "nccl", "host".
const char* gpuBackendName(GpuBackendChoice choice);

}  // namespace hvd::gpu
