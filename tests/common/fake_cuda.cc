#include "common/fake_cuda.h"

#include <cstdlib>
#include <cstring>

#include "hvd/error.hpp"

namespace hvd::test {

FakeCuda::~FakeCuda() {
  for (auto& [base, info] : device_) std::free(reinterpret_cast<void*>(base));
  for (auto& [ptr, bytes] : pinned_) std::free(ptr);
}

void FakeCuda::note(const std::string& entry) {
  logs_[std::this_thread::get_id()].push_back(entry);
}

int FakeCuda::currentDevice() {
  auto it = current_.find(std::this_thread::get_id());
  return it == current_.end() ? 0 : it->second;
}

int FakeCuda::deviceOf(const void* ptr) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  auto it = device_.upper_bound(p);
  if (it == device_.begin()) return -1;
  --it;
  return p < it->first + it->second.first ? it->second.second : -1;
}

void FakeCuda::setDevice(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (device < 0 || device >= devices_) {
    throw BackendError("cuCtxSetCurrent failed: CUDA_ERROR_INVALID_DEVICE (fake)");
  }
  current_[std::this_thread::get_id()] = device;
  note("device " + std::to_string(device));
}

gpu::CudaStreamHandle FakeCuda::createStream() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++streams_;
  note("create stream");
  return reinterpret_cast<void*>(nextHandle_++);
}

void FakeCuda::destroyStream(gpu::CudaStreamHandle) {
  std::lock_guard<std::mutex> lock(mutex_);
  --streams_;
}

gpu::CudaEventHandle FakeCuda::createEvent() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++events_;
  return reinterpret_cast<void*>(nextHandle_++);
}

void FakeCuda::destroyEvent(gpu::CudaEventHandle) {
  std::lock_guard<std::mutex> lock(mutex_);
  --events_;
}

void FakeCuda::recordEvent(gpu::CudaEventHandle, gpu::CudaStreamHandle stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  note(stream == nullptr ? "record default" : "record");
}

void FakeCuda::streamWaitEvent(gpu::CudaStreamHandle stream, gpu::CudaEventHandle) {
  std::lock_guard<std::mutex> lock(mutex_);
  note(stream == nullptr ? "default waits" : "wait");
}

bool FakeCuda::eventDone(gpu::CudaEventHandle) { return true; }

void FakeCuda::synchronizeStream(gpu::CudaStreamHandle) {
  std::lock_guard<std::mutex> lock(mutex_);
  note("sync");
}

void FakeCuda::copyAsync(void* dst, const void* src, size_t bytes, gpu::CudaStreamHandle) {
  const bool fromDevice = deviceOf(src) >= 0;
  const bool toDevice = deviceOf(dst) >= 0;
  std::memcpy(dst, src, bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  note(std::string("copy ") + (fromDevice ? "D" : "H") + "2" + (toDevice ? "D" : "H") + " " +
       std::to_string(bytes));
}

void* FakeCuda::allocOn(int device, size_t bytes) {
  void* p = std::malloc(bytes > 0 ? bytes : 1);
  std::lock_guard<std::mutex> lock(mutex_);
  device_[reinterpret_cast<uintptr_t>(p)] = {bytes > 0 ? bytes : 1, device};
  return p;
}

void* FakeCuda::allocDevice(size_t bytes) {
  int device;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    device = currentDevice();
  }
  return allocOn(device, bytes);
}

void FakeCuda::freeDevice(void* ptr) {
  std::lock_guard<std::mutex> lock(mutex_);
  device_.erase(reinterpret_cast<uintptr_t>(ptr));
  std::free(ptr);
}

void* FakeCuda::allocPinnedHost(size_t bytes) {
  void* p = std::malloc(bytes > 0 ? bytes : 1);
  std::lock_guard<std::mutex> lock(mutex_);
  pinned_[p] = bytes;
  ++pinnedEver_;
  note("pin " + std::to_string(bytes));
  return p;
}

void FakeCuda::freePinnedHost(void* ptr) {
  std::lock_guard<std::mutex> lock(mutex_);
  pinned_.erase(ptr);
  std::free(ptr);
}

std::vector<std::string> FakeCuda::log() {
  std::lock_guard<std::mutex> lock(mutex_);
  return logs_[std::this_thread::get_id()];
}

void FakeCuda::clearLog() {
  std::lock_guard<std::mutex> lock(mutex_);
  logs_[std::this_thread::get_id()].clear();
}

int FakeCuda::liveStreams() {
  std::lock_guard<std::mutex> lock(mutex_);
  return streams_;
}

int FakeCuda::liveEvents() {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_;
}

int FakeCuda::livePinned() {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int>(pinned_.size());
}

int FakeCuda::pinnedAllocations() {
  std::lock_guard<std::mutex> lock(mutex_);
  return pinnedEver_;
}

namespace {

class ForwardingCuda final : public gpu::CudaApi {
 public:
  explicit ForwardingCuda(FakeCuda& inner) : inner_(inner) {}
  int deviceCount() override { return inner_.deviceCount(); }
  int deviceOf(const void* ptr) override { return inner_.deviceOf(ptr); }
  void setDevice(int device) override { inner_.setDevice(device); }
  gpu::CudaStreamHandle createStream() override { return inner_.createStream(); }
  void destroyStream(gpu::CudaStreamHandle s) override { inner_.destroyStream(s); }
  gpu::CudaEventHandle createEvent() override { return inner_.createEvent(); }
  void destroyEvent(gpu::CudaEventHandle e) override { inner_.destroyEvent(e); }
  void recordEvent(gpu::CudaEventHandle e, gpu::CudaStreamHandle s) override {
    inner_.recordEvent(e, s);
  }
  void streamWaitEvent(gpu::CudaStreamHandle s, gpu::CudaEventHandle e) override {
    inner_.streamWaitEvent(s, e);
  }
  bool eventDone(gpu::CudaEventHandle e) override { return inner_.eventDone(e); }
  void synchronizeStream(gpu::CudaStreamHandle s) override { inner_.synchronizeStream(s); }
  void copyAsync(void* dst, const void* src, size_t bytes, gpu::CudaStreamHandle s) override {
    inner_.copyAsync(dst, src, bytes, s);
  }
  void* allocDevice(size_t bytes) override { return inner_.allocDevice(bytes); }
  void freeDevice(void* ptr) override { inner_.freeDevice(ptr); }
  void* allocPinnedHost(size_t bytes) override { return inner_.allocPinnedHost(bytes); }
  void freePinnedHost(void* ptr) override { inner_.freePinnedHost(ptr); }

 private:
  FakeCuda& inner_;
};

}  // namespace

std::unique_ptr<gpu::CudaApi> sharedFakeCuda(FakeCuda& cuda) {
  return std::make_unique<ForwardingCuda>(cuda);
}

}  // namespace hvd::test
