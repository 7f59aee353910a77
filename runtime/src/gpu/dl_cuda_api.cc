// CudaApi over the driver API of libcuda.so.1 loaded with dlopen. cuda.h supplies the types and
// signatures only; libhvd does not link the driver, so it starts on hosts without one.
//
// Driver entry points are versioned: cuda.h maps e.g. cuMemAlloc to cuMemAlloc_v2 with macros,
// and the unversioned symbol that dlsym would find under the plain name is the old ABI (32-bit
// sizes for cuMemAlloc). So each function is resolved under the name the header maps it to, and
// a static_assert per function checks that the mapping is still the one written here.
#include <cuda.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string_view>

#include "gpu/cuda_api.h"
#include "gpu/loader.h"
#include "hvd/error.hpp"

namespace hvd::gpu {
namespace {

// X(name in the API, symbol cuda.h maps it to)
// clang-format off
#define HVD_CUDA_FUNCTIONS(X)                                   \
  X(cuInit, cuInit)                                             \
  X(cuGetErrorName, cuGetErrorName)                             \
  X(cuGetErrorString, cuGetErrorString)                         \
  X(cuDeviceGetCount, cuDeviceGetCount)                         \
  X(cuDeviceGet, cuDeviceGet)                                   \
  X(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain)         \
  X(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2)    \
  X(cuCtxSetCurrent, cuCtxSetCurrent)                           \
  X(cuPointerGetAttribute, cuPointerGetAttribute)               \
  X(cuStreamCreate, cuStreamCreate)                             \
  X(cuStreamDestroy, cuStreamDestroy_v2)                        \
  X(cuStreamSynchronize, cuStreamSynchronize)                   \
  X(cuStreamWaitEvent, cuStreamWaitEvent)                       \
  X(cuEventCreate, cuEventCreate)                               \
  X(cuEventDestroy, cuEventDestroy_v2)                          \
  X(cuEventRecord, cuEventRecord)                               \
  X(cuEventQuery, cuEventQuery)                                 \
  X(cuMemcpyAsync, cuMemcpyAsync)                               \
  X(cuMemAlloc, cuMemAlloc_v2)                                  \
  X(cuMemFree, cuMemFree_v2)                                    \
  X(cuMemHostAlloc, cuMemHostAlloc)                             \
  X(cuMemFreeHost, cuMemFreeHost)
// clang-format on

#define HVD_CUDA_STRING_(x) #x
#define HVD_CUDA_STRING(x) HVD_CUDA_STRING_(x)
#define HVD_CUDA_CHECK_MAPPING(api, symbol)                        \
  static_assert(std::string_view(HVD_CUDA_STRING(api)) == #symbol, \
                "cuda.h no longer maps " #api " to " #symbol "; update HVD_CUDA_FUNCTIONS");
HVD_CUDA_FUNCTIONS(HVD_CUDA_CHECK_MAPPING)
#undef HVD_CUDA_CHECK_MAPPING

struct CudaFunctions {
#define HVD_CUDA_POINTER(api, symbol) decltype(&::symbol) symbol = nullptr;
  HVD_CUDA_FUNCTIONS(HVD_CUDA_POINTER)
#undef HVD_CUDA_POINTER
};

CUdeviceptr devicePtr(const void* ptr) { return static_cast<CUdeviceptr>(uintptr_t(ptr)); }
CUstream toStream(CudaStreamHandle stream) { return static_cast<CUstream>(stream); }
CUevent toEvent(CudaEventHandle event) { return static_cast<CUevent>(event); }

// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
std::string describe(const CudaFunctions& fn, CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (fn.cuGetErrorName(result, &name) != CUDA_SUCCESS || name == nullptr) {
    return "CUresult " + std::to_string(static_cast<int>(result));
  }
  if (fn.cuGetErrorString(result, &text) != CUDA_SUCCESS || text == nullptr) return name;
  return std::string(name) + " (" + text + ")";
}

class DlCudaApi final : public CudaApi {
 public:
  DlCudaApi(DlLibrary library, const CudaFunctions& fn) : library_(std::move(library)), fn_(fn) {}

  ~DlCudaApi() override {
    // Errors are ignored: at process exit the driver may already be shutting down.
    for (const auto& [ordinal, context] : contexts_)
      fn_.cuDevicePrimaryCtxRelease_v2(context.device);
  }

  int deviceCount() override {
    int count = 0;
    check(fn_.cuDeviceGetCount(&count), "cuDeviceGetCount");
    return count;
  }

  int deviceOf(const void* ptr) override {
    if (ptr == nullptr) return -1;
    CUmemorytype type{};
    const CUresult result =
        fn_.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, devicePtr(ptr));
    // Memory the driver never saw (pageable host memory) is CUDA_ERROR_INVALID_VALUE; a
    // process that never made a context (a CPU job on a GPU host) may hear INVALID_CONTEXT
    // instead. Neither can be device memory: device memory implies a context that made it.
    if (result == CUDA_ERROR_INVALID_VALUE || result == CUDA_ERROR_INVALID_CONTEXT ||
        result == CUDA_ERROR_NOT_INITIALIZED) {
      return -1;
    }
    check(result, "cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_MEMORY_TYPE)");
    if (type != CU_MEMORYTYPE_DEVICE && type != CU_MEMORYTYPE_UNIFIED) return -1;
    int ordinal = -1;
    check(fn_.cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, devicePtr(ptr)),
          "cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)");
    return ordinal;
  }

  void setDevice(int device) override {
    CUcontext context = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = contexts_.find(device);
      if (it == contexts_.end()) {
        // Retained once per device and kept until the destructor: the primary context lives as
        // long as this object, whatever the framework does with its own reference.
        Context c;
        check(fn_.cuDeviceGet(&c.device, device), "cuDeviceGet(" + std::to_string(device) + ")");
        check(fn_.cuDevicePrimaryCtxRetain(&c.context, c.device),
              "cuDevicePrimaryCtxRetain(" + std::to_string(device) + ")");
        it = contexts_.emplace(device, c).first;
      }
      context = it->second.context;
    }
    check(fn_.cuCtxSetCurrent(context), "cuCtxSetCurrent");
  }

  CudaStreamHandle createStream() override {
    CUstream stream = nullptr;
    check(fn_.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    return stream;
  }

  void destroyStream(CudaStreamHandle stream) override {
    check(fn_.cuStreamDestroy_v2(toStream(stream)), "cuStreamDestroy");
  }

  CudaEventHandle createEvent() override {
    CUevent event = nullptr;
    check(fn_.cuEventCreate(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    return event;
  }

  void destroyEvent(CudaEventHandle event) override {
    check(fn_.cuEventDestroy_v2(toEvent(event)), "cuEventDestroy");
  }

  void recordEvent(CudaEventHandle event, CudaStreamHandle stream) override {
    check(fn_.cuEventRecord(toEvent(event), toStream(stream)), "cuEventRecord");
  }

  void streamWaitEvent(CudaStreamHandle stream, CudaEventHandle event) override {
    check(fn_.cuStreamWaitEvent(toStream(stream), toEvent(event), 0), "cuStreamWaitEvent");
  }

  bool eventDone(CudaEventHandle event) override {
    const CUresult result = fn_.cuEventQuery(toEvent(event));
    if (result == CUDA_ERROR_NOT_READY) return false;
    check(result, "cuEventQuery");
    return true;
  }

  void synchronizeStream(CudaStreamHandle stream) override {
    check(fn_.cuStreamSynchronize(toStream(stream)), "cuStreamSynchronize");
  }

  void copyAsync(void* dst, const void* src, size_t bytes, CudaStreamHandle stream) override {
    if (bytes == 0) return;
    check(fn_.cuMemcpyAsync(devicePtr(dst), devicePtr(src), bytes, toStream(stream)),
          "cuMemcpyAsync(" + std::to_string(bytes) + " bytes)");
  }

  void* allocDevice(size_t bytes) override {
    if (bytes == 0) return nullptr;
    CUdeviceptr ptr = 0;
    check(fn_.cuMemAlloc_v2(&ptr, bytes), "cuMemAlloc(" + std::to_string(bytes) + " bytes)");
    return reinterpret_cast<void*>(static_cast<uintptr_t>(ptr));
  }

  void freeDevice(void* ptr) override {
    if (ptr != nullptr) check(fn_.cuMemFree_v2(devicePtr(ptr)), "cuMemFree");
  }

  void* allocPinnedHost(size_t bytes) override {
    if (bytes == 0) return nullptr;
    void* ptr = nullptr;
    // Portable: pinned for every context, so one buffer serves whichever device is current.
    check(fn_.cuMemHostAlloc(&ptr, bytes, CU_MEMHOSTALLOC_PORTABLE),
          "cuMemHostAlloc(" + std::to_string(bytes) + " bytes)");
    return ptr;
  }

  void freePinnedHost(void* ptr) override {
    if (ptr != nullptr) check(fn_.cuMemFreeHost(ptr), "cuMemFreeHost");
  }

 private:
  struct Context {
    CUdevice device = 0;
    CUcontext context = nullptr;
  };

  void check(CUresult result, const std::string& call) const {
    if (result != CUDA_SUCCESS) throw BackendError(call + " failed: " + describe(fn_, result));
  }

  DlLibrary library_;
  const CudaFunctions fn_;
  std::mutex mutex_;
  std::map<int, Context> contexts_;  // device ordinal -> its retained primary context
};

}  // namespace

std::unique_ptr<CudaApi> loadCuda(const std::string& library, std::string* why) {
  std::string ignored;
  if (why == nullptr) why = &ignored;
  // RTLD_NODELETE: the driver starts threads of its own (cuInit, contexts) that run its code
  // until the process ends; unmapping it under them would crash, so dlclose only drops a
  // reference.
  DlLibrary lib;
  if (!lib.open({library}, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE, why)) return nullptr;
  CudaFunctions fn;
#define HVD_CUDA_RESOLVE(api, symbol)      \
  if (!lib.resolve(#symbol, &fn.symbol)) { \
    *why = library + " lacks " #symbol;    \
    return nullptr;                        \
  }
  HVD_CUDA_FUNCTIONS(HVD_CUDA_RESOLVE)
#undef HVD_CUDA_RESOLVE
  const CUresult result = fn.cuInit(0);
  if (result != CUDA_SUCCESS) {
    *why = "cuInit failed: " + describe(fn, result);
    return nullptr;
  }
  return std::make_unique<DlCudaApi>(std::move(lib), fn);
}

}  // namespace hvd::gpu
