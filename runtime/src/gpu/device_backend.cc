#include "gpu/device_backend.h"

#include <algorithm>
#include <thread>

#include "collectives/collectives.h"
#include "gpu/comm_cache.h"
#include "gpu/hierarchical.h"
#include "gpu/loader.h"
#include "gpu/nccl_collectives.h"
#include "gpu/staged.h"
#include "gpu/watchdog.h"
#include "hvd/error.hpp"
#include "hvd_support/logging.h"
#include "store/memory_store.h"

namespace hvd::gpu {
namespace {

std::shared_ptr<spdlog::logger> log() { return logging::get("gpu"); }

// Longer than the watchdog's abort timeout (10 s), after which a hung abort ends the process.
constexpr std::chrono::seconds kStopWait{30};

// "local/3" -> 3 (the part after the slash of a communicator name).
int indexOf(const std::string& name) {
  const auto slash = name.find('/');
  if (slash == std::string::npos) throw InternalError("communicator name without index: " + name);
  return std::stoi(name.substr(slash + 1));
}

}  // namespace

const char* gpuBackendName(GpuBackendChoice choice) {
  switch (choice) {
    case GpuBackendChoice::kAuto:
      return "auto";
    case GpuBackendChoice::kNccl:
      return "nccl";
    case GpuBackendChoice::kHost:
      return "host";
  }
  return "?";
}

DeviceBackend::CudaLoader DeviceBackend::defaultCudaLoader() {
  return [](std::string* why) { return loadCuda(kDefaultCudaLibrary, why); };
}

DeviceBackend::NcclLoader DeviceBackend::defaultNcclLoader() {
  return [](std::string* why) { return loadNccl(ncclLibraryFromEnv(), why); };
}

DeviceBackend::DeviceBackend(DeviceBackendOptions options, transport::Context& context,
                             store::Store* store, CudaLoader cuda, NcclLoader nccl)
    : options_(std::move(options)),
      context_(context),
      store_(store),
      cudaLoader_(std::move(cuda)),
      ncclLoader_(std::move(nccl)),
      hierarchicalOn_(options_.hierarchical) {}

DeviceBackend::~DeviceBackend() {
  // Dependency order: the collectives use the communicators, the watchdog polls them.
  collectives_.reset();
  ncclCollectives_ = nullptr;
  staged_.reset();
  watchdog_.reset();
  comms_.reset();
  nccl_.reset();
  if (scratch_ != nullptr) {
    cuda_->setDevice(scratchDevice_);
    cuda_->freeDevice(scratch_);
  }
}

CudaApi* DeviceBackend::cuda() {
  std::call_once(cudaOnce_, [this] {
    cuda_ = cudaLoader_ ? cudaLoader_(&cudaWhy_) : nullptr;
    if (cuda_ == nullptr) {
      log()->debug("no CUDA driver ({}): every buffer is host memory", cudaWhy_);
    }
  });
  return cuda_.get();
}

int DeviceBackend::deviceOf(const void* ptr) {
  CudaApi* api = cuda();
  return api != nullptr && ptr != nullptr ? api->deviceOf(ptr) : -1;
}

DeviceCollectives* DeviceBackend::route(std::initializer_list<const void*> ptrs) {
  CudaApi* api = cuda();
  if (api == nullptr) return nullptr;
  if (std::none_of(ptrs.begin(), ptrs.end(),
                   [&](const void* p) { return p != nullptr && api->deviceOf(p) >= 0; })) {
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (collectives_ == nullptr) createCollectives();
  return collectives_.get();
}

void DeviceBackend::createCollectives() {
  std::string ncclWhy = "HVD_GPU_BACKEND=host";
  if (options_.choice != GpuBackendChoice::kHost) {
    nccl_ = ncclLoader_ ? ncclLoader_(&ncclWhy) : nullptr;
    if (nccl_ == nullptr && options_.choice == GpuBackendChoice::kNccl) {
      throw BackendError("HVD_GPU_BACKEND=nccl, but NCCL cannot be used on rank " +
                         std::to_string(options_.rank) + " (host " + options_.host +
                         "): " + ncclWhy);
    }
  }
  if (nccl_ == nullptr) {
    collectives_ = std::make_unique<StagedCollectives>(*cuda_, context_);
    description_ = "host-staged (" + ncclWhy + ")";
    if (options_.rank == 0) {
      log()->info("device buffers are staged through host memory over the CPU transports: {}",
                  ncclWhy);
    }
    return;
  }
  if (store_ == nullptr) {
    ownStore_ = std::make_unique<store::MemoryStore>();
    store_ = ownStore_.get();
  }
  if (options_.hierarchical || options_.hierarchicalTunable) exchangeLayout();

  WatchdogOptions w;
  w.pollInterval = options_.watchdogPoll;
  w.opTimeout = options_.opTimeout;
  w.abortAll = [this] { comms_->abortAll("the NCCL watchdog failed the job"); };
  w.onFailure = [rank = options_.rank](const std::string& message) {
    log()->error("rank {}: {}", rank, message);
  };
  comms_ =
      std::make_unique<CommCache>([this](const std::string& name, const std::atomic<bool>& cancel) {
        return makeComm(name, cancel);
      });
  watchdog_ = std::make_unique<Watchdog>(*nccl_, std::move(w));

  // The types NCCL lacks (int16) are staged through host memory, as without NCCL.
  staged_ = std::make_unique<StagedCollectives>(*cuda_, context_);
  NcclCollectivesOptions o;
  o.hierarchical = hierarchicalOn_ ? layout_.get() : nullptr;
  o.watchdog = watchdog_.get();
  o.otherTypes = staged_.get();
  o.agreeOver = options_.agreeOverContext ? &context_ : nullptr;
  auto nccl = std::make_unique<NcclCollectives>(*cuda_, *comms_, options_.rank, options_.size, o);
  ncclCollectives_ = nccl.get();
  collectives_ = std::move(nccl);
  describeNccl();
  if (options_.rank == 0) {
    log()->info("device buffers run over {} (int16, which NCCL lacks, host-staged)", description_);
  }
}

void DeviceBackend::exchangeLayout() {
  const int32_t mine[3] = {options_.localRank, options_.localSize, options_.crossRank};
  std::vector<int32_t> all(3 * static_cast<size_t>(options_.size));
  coll::allgather(context_, mine, 3, all.data(), std::vector<size_t>(options_.size, 3),
                  DataType::kInt32);
  std::vector<RankPlace> places(options_.size);
  for (int r = 0; r < options_.size; ++r) {
    places[r] = RankPlace{all[3 * r], all[3 * r + 1], all[3 * r + 2]};
  }
  hosts_ = ranksByHost(places);
  std::string why;
  if (!hierarchicalPossible(localSizes(hosts_), &why)) {
    if (options_.rank == 0 && options_.hierarchical) {
      log()->warn(
          "HVD_HIERARCHICAL_ALLREDUCE is set, but {}: allreduces run over the global "
          "communicator",
          why);
    }
    return;
  }
  auto layout = std::make_unique<HierarchicalLayout>();
  for (size_t k = 0; k < hosts_.size(); ++k) {
    const auto& host = hosts_[k];
    const auto it = std::find(host.begin(), host.end(), options_.rank);
    if (it == host.end()) continue;
    layout->node = static_cast<int>(k);
    layout->localRank = static_cast<int>(it - host.begin());
    layout->localSize = static_cast<int>(host.size());
  }
  const auto cross = crossCommMembers(hosts_, layout->localRank);
  layout->crossSize = static_cast<int>(cross.size());
  layout->crossRank =
      static_cast<int>(std::find(cross.begin(), cross.end(), options_.rank) - cross.begin());
  layout_ = std::move(layout);
}

std::unique_ptr<NcclCommunicator> DeviceBackend::makeComm(const std::string& name,
                                                          const std::atomic<bool>& cancel) {
  CommSpec spec;
  spec.name = name;
  spec.host = options_.host;
  spec.timeout = options_.startTimeout;
  spec.cancel = &cancel;
  if (name == "global") {
    spec.rank = options_.rank;
    spec.size = options_.size;
  } else {
    const std::vector<int> members = name.rfind("local/", 0) == 0
                                         ? localCommMembers(hosts_, indexOf(name))
                                         : crossCommMembers(hosts_, indexOf(name));
    const auto it = std::find(members.begin(), members.end(), options_.rank);
    if (it == members.end()) {
      throw InternalError("rank " + std::to_string(options_.rank) + " is not a member of '" + name +
                          "'");
    }
    spec.rank = static_cast<int>(it - members.begin());
    spec.size = static_cast<int>(members.size());
  }
  auto comm = bootstrapComm(*nccl_, *store_, spec);
  watchdog_->watch(comm->comm(), name, options_.rank, options_.host);
  return comm;
}

void DeviceBackend::copy(int device, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  CudaApi* api = cuda();
  if (api == nullptr) throw InternalError("device copy without a CUDA driver");
  api->setDevice(device);
  api->copyAsync(dst, src, bytes, nullptr);
}

void DeviceBackend::synchronize(int device) {
  CudaApi* api = cuda();
  if (api == nullptr) return;
  api->setDevice(device);
  api->synchronizeStream(nullptr);
}

void DeviceBackend::orderAfter(int device, CudaStreamHandle stream) {
  CudaApi* api = cuda();
  if (api == nullptr || stream == nullptr) return;
  api->setDevice(device);
  // An event destroyed after it was waited on is released once the wait is satisfied (CUDA's
  // rule), so one event per call costs no bookkeeping here.
  CudaEventHandle event = api->createEvent();
  api->recordEvent(event, stream);
  api->streamWaitEvent(nullptr, event);
  api->destroyEvent(event);
}

void* DeviceBackend::scratch(int device, size_t bytes) {
  CudaApi* api = cuda();
  if (api == nullptr) throw InternalError("device scratch without a CUDA driver");
  api->setDevice(device);
  if (scratch_ != nullptr && (scratchBytes_ < bytes || scratchDevice_ != device)) {
    api->setDevice(scratchDevice_);
    api->synchronizeStream(nullptr);
    api->freeDevice(scratch_);
    api->setDevice(device);
    scratch_ = nullptr;
    scratchBytes_ = 0;
  }
  if (scratch_ == nullptr) {
    scratch_ = api->allocDevice(std::max<size_t>(bytes, 1));
    scratchBytes_ = std::max<size_t>(bytes, 1);
    scratchDevice_ = device;
  }
  return scratch_;
}

void DeviceBackend::stop(const std::string& reason) {
  Watchdog* watchdog = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    watchdog = watchdog_.get();
  }
  if (watchdog == nullptr) return;
  watchdog->requestStop(reason);
  // Returns once the communicators are aborted, so the caller's next device call fails instead
  // of entering NCCL. An abort that hangs ends the process (the watchdog's second level) after
  // its abort timeout; the deadline here only keeps a stop from waiting forever if it did not.
  const auto deadline = std::chrono::steady_clock::now() + kStopWait;
  while (watchdog->failureMessage().empty()) {
    if (std::chrono::steady_clock::now() > deadline) {
      log()->warn("rank {}: the NCCL communicators were not aborted within {} s of a stop ({})",
                  options_.rank, kStopWait.count(), reason);
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

void DeviceBackend::describeNccl() {
  description_ = "nccl " + ncclVersionText(nccl_->version()) +
                 (hierarchicalOn_ && layout_ != nullptr ? ", hierarchical" : "");
}

bool DeviceBackend::hierarchicalAvailable() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return layout_ != nullptr;
}

void DeviceBackend::setHierarchical(bool on) {
  std::lock_guard<std::mutex> lock(mutex_);
  hierarchicalOn_ = on;
  if (ncclCollectives_ == nullptr) return;  // taken when the collectives are made
  ncclCollectives_->setHierarchical(on ? layout_.get() : nullptr);
  describeNccl();
}

std::string DeviceBackend::describe() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return description_;
}

}  // namespace hvd::gpu
