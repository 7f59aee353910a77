// The CUDA driver calls hvd needs, behind an interface: the real implementation
// (dl_cuda_api.cc) loads libcuda.so.1 with dlopen on first use, so libhvd has no link-time
// dependency on the driver and starts on hosts without one; tests use a fake in which
// "device memory" is host memory the fake registered as such.
//
// Driver API semantics: the calling thread works in the device's primary context (the one the
// CUDA runtime, PyTorch and NCCL use), so streams and pointers interoperate with theirs.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace hvd::gpu {

using CudaStreamHandle = void*;  // CUstream == cudaStream_t
using CudaEventHandle = void*;   // CUevent == cudaEvent_t

class CudaApi {
 public:
  virtual ~CudaApi() = default;

  // Number of visible devices (0 when the driver finds none).
  virtual int deviceCount() = 0;
  // The device ordinal `ptr` lives on, or -1 for host memory (pageable, pinned or unknown).
  // Managed memory counts as device memory of its device.
  virtual int deviceOf(const void* ptr) = 0;
  // Makes `device`'s primary context current on the calling thread.
  virtual void setDevice(int device) = 0;

  // Streams and events of the current device. Non-blocking streams (they do not synchronise
  // with the legacy default stream).
  virtual CudaStreamHandle createStream() = 0;
  virtual void destroyStream(CudaStreamHandle stream) = 0;
  virtual CudaEventHandle createEvent() = 0;  // timing disabled
  virtual void destroyEvent(CudaEventHandle event) = 0;
  virtual void recordEvent(CudaEventHandle event, CudaStreamHandle stream) = 0;
  // Work enqueued on `stream` after this waits for `event`.
  virtual void streamWaitEvent(CudaStreamHandle stream, CudaEventHandle event) = 0;
  // True once everything recorded before `event` finished; false while it is pending.
  virtual bool eventDone(CudaEventHandle event) = 0;
  virtual void synchronizeStream(CudaStreamHandle stream) = 0;

  // Any direction (unified addressing); enqueued on `stream`.
  virtual void copyAsync(void* dst, const void* src, size_t bytes, CudaStreamHandle stream) = 0;
  // Device memory of the current device, and page-locked host memory.
  virtual void* allocDevice(size_t bytes) = 0;
  virtual void freeDevice(void* ptr) = 0;
  virtual void* allocPinnedHost(size_t bytes) = 0;
  virtual void freePinnedHost(void* ptr) = 0;
};

// Every method of the real implementation throws hvd::BackendError naming the call and the
// driver's error name and string ("cuStreamCreate failed: CUDA_ERROR_OUT_OF_MEMORY (out of
// memory)").

// Loads libcuda.so.1 and initialises the driver (cuInit). Returns null and sets *why when there
// is no driver ("libcuda.so.1: cannot open shared object file ...") or cuInit fails
// ("cuInit failed: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)"), or when this
// libhvd was built without CUDA.
inline constexpr const char* kDefaultCudaLibrary = "libcuda.so.1";
std::unique_ptr<CudaApi> loadCuda(const std::string& library, std::string* why);

}  // namespace hvd::gpu
