// The GPU side of one Runtime (and, separately, of its engine): decides for every collective
// whether its buffers are device memory and, when they are, runs it on the backend that
// HVD_GPU_BACKEND picks.
//
//  * The CUDA driver is loaded on the first question (libcuda.so.1 through dlopen, see
//    cuda_api.h). A host without a driver has no device memory: every later call costs one
//    flag check, and CPU jobs never touch NCCL or CUDA.
//  * auto (the default): NCCL when libnccl.so.2 loads, else device buffers are staged through
//    pinned host memory over the CPU transports; the choice is logged once.
//    nccl: NCCL or an error naming why it cannot be loaded. host: always staged. Under NCCL,
//    the types NCCL lacks (int16) are staged too.
//  * NCCL communicators are bootstrapped through `store` (the job's, under this Runtime's
//    prefix) on first use and cached; a watchdog polls them (gpu/watchdog.h) and aborts them
//    all on a peer failure, an op older than the timeout, or stop(), after which every pending
//    and later device call fails with the watchdog's message.
//  * Hierarchical allreduce (HVD_HIERARCHICAL_ALLREDUCE): on the first NCCL call, every rank's
//    (local rank, local size, cross rank) is allgathered over `context`, which gives the hosts'
//    ranks (gpu/hierarchical.h). Hosts with different numbers of ranks cannot use it: rank 0
//    logs why, and allreduces run over the global communicator.
//
// route() and deviceOf() are thread-safe; the collectives it returns are for one caller at a
// time, as `context` is.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gpu/backend_choice.h"
#include "gpu/cuda_api.h"
#include "gpu/device_collectives.h"
#include "gpu/nccl_api.h"
#include "gpu/nccl_comm.h"
#include "store/store.h"
#include "transport/context.h"

namespace hvd::gpu {

class CommCache;
class NcclCollectives;
class Watchdog;
struct HierarchicalLayout;

struct DeviceBackendOptions {
  GpuBackendChoice choice = GpuBackendChoice::kAuto;
  bool hierarchical = false;
  // Autotune may turn hierarchical allreduce on and off (setHierarchical): the hosts' layout is
  // learnt on the first NCCL call even while it is off.
  bool hierarchicalTunable = false;
  int rank = 0;
  int size = 1;
  int localRank = 0;
  int localSize = 1;
  int crossRank = 0;
  std::string host;  // for messages
  // An NCCL op in flight longer than this fails the job (HVD_TIMEOUT); zero: never.
  std::chrono::milliseconds opTimeout{60000};
  // Deadline of one communicator's bootstrap (HVD_START_TIMEOUT).
  std::chrono::milliseconds startTimeout{60000};
  std::chrono::milliseconds watchdogPoll{100};
  // Whether every NCCL call first agrees with its peers over `context` (NcclCollectivesOptions::
  // agreeOver): set for the blocking API's backend, never for the engine's, whose ops the engine
  // negotiated already and whose thread must not use the blocking API's context.
  bool agreeOverContext = false;
};

class DeviceBackend {
 public:
  // Each returns null and sets *why when it cannot load. Tests pass fakes.
  using CudaLoader = std::function<std::unique_ptr<CudaApi>(std::string* why)>;
  using NcclLoader = std::function<std::unique_ptr<NcclApi>(std::string* why)>;
  static CudaLoader defaultCudaLoader();
  static NcclLoader defaultNcclLoader();

  // `store` carries the NCCL unique ids; null for a job of one rank (a private one is used).
  DeviceBackend(DeviceBackendOptions options, transport::Context& context, store::Store* store,
                CudaLoader cuda = defaultCudaLoader(), NcclLoader nccl = defaultNcclLoader());
  ~DeviceBackend();
  DeviceBackend(const DeviceBackend&) = delete;
  DeviceBackend& operator=(const DeviceBackend&) = delete;

  // The device `ptr` lives on, or -1 for host memory (always -1 without a driver).
  int deviceOf(const void* ptr);

  // The collectives for a call on `ptrs`: null when none is device memory. Creates the backend
  // on the first device call (loading NCCL may throw BackendError for HVD_GPU_BACKEND=nccl).
  DeviceCollectives* route(std::initializer_list<const void*> ptrs);

  // For the engine's fusion of device tensors. Each makes `device` current on the calling
  // thread. copy() is enqueued on the legacy default stream (so it runs after what the caller
  // queued there, and the collectives order themselves after it); synchronize() waits for it.
  // scratch() is device memory of `device` that grows to the largest request and is kept.
  void copy(int device, void* dst, const void* src, size_t bytes);
  void synchronize(int device);
  void* scratch(int device, size_t bytes);
  // Makes the legacy default stream of `device` wait (on the device, not the calling thread)
  // for what is queued on `stream` now: a caller computing on a stream of its own (torch's
  // current stream) gets every later copy and collective ordered after that work. No-op for a
  // null stream (the legacy default stream itself) or without a driver.
  void orderAfter(int device, CudaStreamHandle stream);

  // Hierarchical allreduce as it is now (HVD_HIERARCHICAL_ALLREDUCE, then autotune's choice).
  bool hierarchical() const { return hierarchicalOn_; }
  // Whether it can run at all: NCCL runs, the layout was learnt and the hosts allow it. False
  // before the first device call.
  bool hierarchicalAvailable() const;
  // Autotune: from the next allreduce on, hierarchical or over the global communicator. The
  // caller's thread is the one that runs the collectives (the engine's), so no call is in flight.
  void setHierarchical(bool on);

  // Aborts the NCCL communicators (a job stop) and returns once they are; later device calls
  // fail with `reason`. No-op before the first NCCL call.
  void stop(const std::string& reason);

  // "none" until the first device call, then "nccl 2.27.3", "nccl 2.27.3, hierarchical" or
  // "host-staged (<why NCCL is not used>)".
  std::string describe() const;

 private:
  CudaApi* cuda();
  void createCollectives();
  std::unique_ptr<NcclCommunicator> makeComm(const std::string& name,
                                             const std::atomic<bool>& cancel);
  void exchangeLayout();
  void describeNccl();  // description_ under NCCL; under mutex_

  const DeviceBackendOptions options_;
  transport::Context& context_;
  store::Store* store_;
  CudaLoader cudaLoader_;
  NcclLoader ncclLoader_;

  std::once_flag cudaOnce_;
  std::unique_ptr<CudaApi> cuda_;  // null: no driver, so no device memory
  std::string cudaWhy_;
  void* scratch_ = nullptr;  // engine's device fusion buffer
  size_t scratchBytes_ = 0;
  int scratchDevice_ = -1;

  mutable std::mutex mutex_;  // guards creation and describe()
  std::unique_ptr<store::Store> ownStore_;
  std::unique_ptr<NcclApi> nccl_;
  std::vector<std::vector<int>> hosts_;  // ranks by host, for hierarchical communicators
  std::unique_ptr<HierarchicalLayout> layout_;
  std::unique_ptr<CommCache> comms_;
  std::unique_ptr<Watchdog> watchdog_;
  std::unique_ptr<DeviceCollectives> staged_;       // under NCCL, for the types NCCL lacks
  std::unique_ptr<DeviceCollectives> collectives_;  // uses all of the above: destroyed first
  NcclCollectives* ncclCollectives_ = nullptr;      // collectives_ when it is NCCL's
  std::atomic<bool> hierarchicalOn_;
  std::string description_ = "none";
};

}  // namespace hvd::gpu
