// A fake CudaApi for CPU machines: "device memory" is host memory the fake allocated with
// allocDevice (deviceOf finds it by address range), streams run every operation at once, and
// each call is logged ("record default", "wait", "copy D2H 64", "sync", ...) so tests can check
// the order in which hvd issues them. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gpu/cuda_api.h"

namespace hvd::test {

class FakeCuda final : public gpu::CudaApi {
 public:
  explicit FakeCuda(int devices = 1) : devices_(devices) {}
  ~FakeCuda() override;

  int deviceCount() override { return devices_; }
  int deviceOf(const void* ptr) override;
  void setDevice(int device) override;
  gpu::CudaStreamHandle createStream() override;
  void destroyStream(gpu::CudaStreamHandle stream) override;
  gpu::CudaEventHandle createEvent() override;
  void destroyEvent(gpu::CudaEventHandle event) override;
  void recordEvent(gpu::CudaEventHandle event, gpu::CudaStreamHandle stream) override;
  void streamWaitEvent(gpu::CudaStreamHandle stream, gpu::CudaEventHandle event) override;
  bool eventDone(gpu::CudaEventHandle event) override;
  void synchronizeStream(gpu::CudaStreamHandle stream) override;
  void copyAsync(void* dst, const void* src, size_t bytes, gpu::CudaStreamHandle stream) override;
  void* allocDevice(size_t bytes) override;
  void freeDevice(void* ptr) override;
  void* allocPinnedHost(size_t bytes) override;
  void freePinnedHost(void* ptr) override;

  // Device memory on `device` (allocDevice uses the calling thread's current device).
  void* allocOn(int device, size_t bytes);

  // What happened, in order, on the calling thread (each thread keeps its own log).
  std::vector<std::string> log();
  void clearLog();
  // Live objects, for leak checks.
  int liveStreams();
  int liveEvents();
  int livePinned();
  int pinnedAllocations();  // ever made

 private:
  void note(const std::string& entry);
  int currentDevice();

  const int devices_;
  std::mutex mutex_;
  std::map<uintptr_t, std::pair<size_t, int>> device_;  // base -> (bytes, device)
  std::map<void*, size_t> pinned_;
  std::map<std::thread::id, int> current_;
  std::map<std::thread::id, std::vector<std::string>> logs_;
  int streams_ = 0;
  int events_ = 0;
  int pinnedEver_ = 0;
  uintptr_t nextHandle_ = 0x1000;
};

// A CudaApi that forwards every call to a FakeCuda the test keeps, for code that takes
// ownership of its CudaApi (DeviceBackend's loader) while the test allocates "device" memory
// through the same fake.
std::unique_ptr<gpu::CudaApi> sharedFakeCuda(FakeCuda& cuda);

}  // namespace hvd::test
