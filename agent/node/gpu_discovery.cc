#include "agent/node/gpu_discovery.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "hvd/error.hpp"

namespace hvd::agent::node {
namespace {

// The few NVML declarations we need, copied in layout from nvml.h so that building the agent
// needs neither the driver nor the CUDA toolkit. Versioned entry points (_v2, _v3) are the ones
// nvml.h maps the plain names to; their layouts are frozen by NVIDIA's ABI promise.
using nvmlReturn_t = int;  // an enum in nvml.h; enums have int size on every ABI we target
constexpr nvmlReturn_t kNvmlSuccess = 0;
using nvmlDevice_t = struct nvmlDevice_st*;

struct nvmlPciInfo_t {
  char busIdLegacy[16];  // NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];  // NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE
};

struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

// NVML_DEVICE_NAME_V2_BUFFER_SIZE and NVML_DEVICE_UUID_V2_BUFFER_SIZE (96) are the largest
// sizes any NVML version asks for.
constexpr unsigned int kNvmlStringBuffer = 96;

using InitFn = nvmlReturn_t (*)();
using ShutdownFn = nvmlReturn_t (*)();
using CountFn = nvmlReturn_t (*)(unsigned int*);
using HandleFn = nvmlReturn_t (*)(unsigned int, nvmlDevice_t*);
using StringFn = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned int);
using PciFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlPciInfo_t*);
using MemoryFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*);
using ErrorStringFn = const char* (*)(nvmlReturn_t);

constexpr int kMaxFakeGpus = 1024;
constexpr uint64_t kFakeGpuMemory = 16ull << 30;

// dlopen handle that is closed on every exit path.
class Library {
 public:
  explicit Library(const std::string& name) : handle_(dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) {
    if (handle_ == nullptr) {
      const char* err = dlerror();
      error_ = err != nullptr ? err : "dlopen failed";
    }
  }
  ~Library() {
    if (handle_ != nullptr) dlclose(handle_);
  }
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  bool loaded() const { return handle_ != nullptr; }
  const std::string& error() const { return error_; }

  template <typename Fn>
  Fn symbol(const char* name) const {
    return reinterpret_cast<Fn>(dlsym(handle_, name));
  }

 private:
  void* handle_;
  std::string error_;
};

struct NvmlApi {
  InitFn init = nullptr;
  ShutdownFn shutdown = nullptr;
  CountFn count = nullptr;
  HandleFn handle = nullptr;
  StringFn name = nullptr;
  StringFn uuid = nullptr;
  PciFn pci = nullptr;
  MemoryFn memory = nullptr;
  ErrorStringFn errorString = nullptr;
};

// Looks one symbol up; records the first missing name so the note can say what the driver lacks.
template <typename Fn>
void bind(const Library& lib, const char* name, Fn& out, std::string& missing) {
  out = lib.symbol<Fn>(name);
  if (out == nullptr && missing.empty()) missing = name;
}

// Resolves every symbol; returns the name of the first missing one, or "" when all are present.
std::string resolve(const Library& lib, NvmlApi& api) {
  std::string missing;
  bind(lib, "nvmlInit_v2", api.init, missing);
  bind(lib, "nvmlShutdown", api.shutdown, missing);
  bind(lib, "nvmlDeviceGetCount_v2", api.count, missing);
  bind(lib, "nvmlDeviceGetHandleByIndex_v2", api.handle, missing);
  bind(lib, "nvmlDeviceGetName", api.name, missing);
  bind(lib, "nvmlDeviceGetUUID", api.uuid, missing);
  bind(lib, "nvmlDeviceGetPciInfo_v3", api.pci, missing);
  bind(lib, "nvmlDeviceGetMemoryInfo", api.memory, missing);
  bind(lib, "nvmlErrorString", api.errorString, missing);
  return missing;
}

std::string nvmlError(const NvmlApi& api, nvmlReturn_t rc) {
  const char* text = api.errorString(rc);
  return (text != nullptr ? std::string(text) : std::string("unknown error")) + " (" +
         std::to_string(rc) + ")";
}

bool allDigits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

GpuInfo fakeGpu(int index, std::string name) {
  char bus[32];
  std::snprintf(bus, sizeof(bus), "00000000:%02X:00.0", (index + 1) & 0xFF);
  return GpuInfo{index, "GPU-fake-" + std::to_string(index), std::move(name), bus, kFakeGpuMemory};
}

}  // namespace

std::vector<GpuInfo> parseFakeGpus(const std::string& spec) {
  if (spec.empty()) {
    throw InvalidArgumentError("HVD_FAKE_GPUS is set but empty; give a count (\"2\") or names");
  }
  std::vector<GpuInfo> gpus;
  if (allDigits(spec)) {
    if (spec.size() > 4 || std::stoi(spec) > kMaxFakeGpus) {
      throw InvalidArgumentError("HVD_FAKE_GPUS=" + spec + " asks for more than " +
                                 std::to_string(kMaxFakeGpus) + " GPUs");
    }
    const int n = std::stoi(spec);
    for (int i = 0; i < n; ++i) gpus.push_back(fakeGpu(i, "Fake GPU " + std::to_string(i)));
    return gpus;
  }
  size_t start = 0;
  while (true) {
    const size_t comma = spec.find(',', start);
    std::string name = spec.substr(start, comma == std::string::npos ? comma : comma - start);
    if (name.empty()) {
      throw InvalidArgumentError("HVD_FAKE_GPUS=" + spec + " has an empty GPU name at position " +
                                 std::to_string(gpus.size()));
    }
    if (static_cast<int>(gpus.size()) == kMaxFakeGpus) {
      throw InvalidArgumentError("HVD_FAKE_GPUS lists more than " + std::to_string(kMaxFakeGpus) +
                                 " GPUs");
    }
    gpus.push_back(fakeGpu(static_cast<int>(gpus.size()), std::move(name)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return gpus;
}

NvmlGpuDiscovery::NvmlGpuDiscovery(std::string library, contract::EnvReader getEnv)
    : library_(std::move(library)), getEnv_(std::move(getEnv)) {
  if (!getEnv_) getEnv_ = [](const char* name) -> const char* { return std::getenv(name); };
}

std::vector<GpuInfo> NvmlGpuDiscovery::discover() {
  if (const char* fake = getEnv_(kFakeGpusEnv); fake != nullptr) {
    std::vector<GpuInfo> gpus = parseFakeGpus(fake);
    note_ = std::string(kFakeGpusEnv) + "=" + fake + ": " + std::to_string(gpus.size()) +
            " fake GPU(s); NVML not consulted (testing aid)";
    return gpus;
  }
  return discoverWithNvml();
}

std::vector<GpuInfo> NvmlGpuDiscovery::discoverWithNvml() {
  Library lib(library_);
  if (!lib.loaded()) {
    note_ = "no GPUs: NVML library " + library_ + " not loadable (" + lib.error() + ")";
    return {};
  }
  NvmlApi api;
  if (const std::string missing = resolve(lib, api); !missing.empty()) {
    note_ = "no GPUs: " + library_ + " lacks " + missing + " (driver too old?)";
    return {};
  }
  if (const nvmlReturn_t rc = api.init(); rc != kNvmlSuccess) {
    note_ = "no GPUs: nvmlInit_v2 failed: " + nvmlError(api, rc);
    return {};
  }
  // From here NVML is initialised; every path below reaches the shutdown at the end.
  std::vector<GpuInfo> gpus;
  std::string skipped;
  unsigned int count = 0;
  if (const nvmlReturn_t rc = api.count(&count); rc != kNvmlSuccess) {
    note_ = "no GPUs: nvmlDeviceGetCount_v2 failed: " + nvmlError(api, rc);
    api.shutdown();
    return {};
  }
  for (unsigned int i = 0; i < count; ++i) {
    nvmlDevice_t dev = nullptr;
    char name[kNvmlStringBuffer] = {};
    char uuid[kNvmlStringBuffer] = {};
    nvmlPciInfo_t pci{};
    nvmlMemory_t mem{};
    nvmlReturn_t rc = api.handle(i, &dev);
    if (rc == kNvmlSuccess) rc = api.name(dev, name, kNvmlStringBuffer);
    if (rc == kNvmlSuccess) rc = api.uuid(dev, uuid, kNvmlStringBuffer);
    if (rc == kNvmlSuccess) rc = api.pci(dev, &pci);
    if (rc == kNvmlSuccess) rc = api.memory(dev, &mem);
    if (rc != kNvmlSuccess) {
      // A GPU that fell off the bus must not hide the healthy ones; it is reported, not bound.
      skipped += "; GPU " + std::to_string(i) + " skipped: " + nvmlError(api, rc);
      continue;
    }
    // NVML promises NUL-terminated strings; terminate anyway so a driver bug cannot overrun.
    name[kNvmlStringBuffer - 1] = '\0';
    uuid[kNvmlStringBuffer - 1] = '\0';
    pci.busId[sizeof(pci.busId) - 1] = '\0';
    gpus.push_back(GpuInfo{static_cast<int>(i), uuid, name, pci.busId, mem.total});
  }
  api.shutdown();
  note_ = std::to_string(gpus.size()) + " GPU(s) via NVML (" + library_ + ")" + skipped;
  return gpus;
}

std::vector<GpuInfo> CachedGpuDiscovery::discover() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!known_) {
    gpus_ = inner_.discover();
    note_ = inner_.lastNote();
    known_ = true;
  }
  return gpus_;
}

std::string CachedGpuDiscovery::lastNote() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return known_ ? note_ : inner_.lastNote();
}

}  // namespace hvd::agent::node
