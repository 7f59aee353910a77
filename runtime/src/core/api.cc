// The C++ API (hvd.hpp and engine.hpp): free functions over the process's one Runtime instance.
// Host buffers go to the runtime's CPU collectives (hvd's transports, or MPI with
// HVD_CPU_BACKEND=mpi), device buffers to its GPU backend.
#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>

#include "collectives/host_collectives.h"
#include "contract/worker_variables.h"
#include "core/elastic_session.h"
#include "core/job_members.h"
#include "core/runtime.h"
#include "hvd/engine.hpp"
#include "hvd/hvd.hpp"
#include "hvd/process_sets.hpp"

namespace hvd {
namespace {

// The process's runtime. Collectives are not reentrant: callers serialise them (the engine of
// a later layer does this for multi-threaded programs); init/shutdown take the lock.
//
// A child forked after init has a copy of the runtime but none of its threads (the engine's, the
// transports'): an op there would wait forever for an engine that does not run, and destroying
// the copy would join threads that are not there. So the child may read its rank and size, every
// other call fails at once, and at its exit the copy is left alone.
struct Instance {
  // Held shared by an op's submit, exclusively by init and shutdown (engineOf).
  std::shared_mutex lifecycle;
  std::mutex mutex;
  std::unique_ptr<core::Runtime> runtime;
  int generation = 0;
  // Elastic mode: the worker's rounds, from its first init to the process's end.
  std::unique_ptr<core::ElasticSession> elastic;
  pid_t owner = 0;  // the process that made `runtime`

  bool forked() const { return runtime && getpid() != owner; }
  // Static destruction: the program is ending without hvd::shutdown() (a script that ended or
  // raised); the other ranks' errors say so.
  ~Instance() {
    if (forked()) {
      (void)runtime.release();
    } else if (runtime) {
      runtime->setStopReason(engine::kStopExiting);
    }
  }
};

Instance& instance() {
  static Instance global;
  return global;
}

// For rank/size queries: also in a forked child.
core::Runtime& initialized() {
  auto& self = instance();
  if (!self.runtime) throw InvalidArgumentError("hvd is not initialised: call hvd::init() first");
  return *self.runtime;
}

InternalError forkedError(pid_t owner) {
  return InternalError(
      "hvd cannot be used in this process (pid " + std::to_string(getpid()) +
      "): it was forked from rank process " + std::to_string(owner) +
      " after hvd.init(), and hvd's background threads and connections stay with that process "
      "(use hvd in the process that called init, or start workers before init)");
}

// For everything that communicates or starts threads.
core::Runtime& runtime() {
  auto& self = instance();
  core::Runtime& r = initialized();
  if (self.forked()) throw forkedError(self.owner);
  return r;
}

coll::HostCollectives& cpu() { return runtime().collectives(); }

// The device collectives for a call whose buffers include device memory, else null.
gpu::DeviceCollectives* device(std::initializer_list<const void*> ptrs) {
  return runtime().devices().route(ptrs);
}

// The engine of an op's process set (the job's for set 0), which must include this rank, held
// for the op's submit: a shutdown() on another thread waits for the submit to finish, then
// stops the engine, which fails the op; a submit after it finds hvd not initialised. So an op
// racing shutdown fails cleanly or runs, and never waits for an engine that is gone.
struct EngineRef {
  std::shared_lock<std::shared_mutex> hold;
  std::shared_ptr<engine::Engine> engine;
  engine::Engine* operator->() const { return engine.get(); }
};

EngineRef engineOf(int processSet, const std::string& what) {
  std::shared_lock<std::shared_mutex> hold(instance().lifecycle);
  std::shared_ptr<engine::Engine> engine = runtime().processSets().engine(processSet, what);
  return {std::move(hold), std::move(engine)};
}

std::string quoted(const char* op, const std::string& name) {
  return std::string(op) + " '" + name + "'";
}

void initWith(const std::function<void(core::Config&)>& adjust) {
  auto& self = instance();
  std::unique_lock<std::shared_mutex> exclusive(self.lifecycle);
  std::lock_guard<std::mutex> lock(self.mutex);
  if (self.runtime) return;  // idempotent, like horovod.init()
  core::Config config = core::configFromEnvironment();
  adjust(config);
  // A failed init (a bad process set, say) has written this generation's keys already: the
  // next try must not meet them, so the count moves on either way (every rank fails alike).
  int generation = self.generation++;
  if (config.elastic) {
    // Each round has a namespace of its own, which every worker of it enters afresh.
    if (!self.elastic) self.elastic = std::make_unique<core::ElasticSession>(config);
    config = self.elastic->next(std::move(config));
    generation = 0;
  }
  self.runtime = std::make_unique<core::Runtime>(config, generation);
  self.owner = getpid();
}

}  // namespace

void init() {
  initWith([](core::Config&) {});
}

void init(const std::vector<std::vector<int>>& processSets, bool dynamic) {
  initWith([&](core::Config& config) {
    config.processSets = processSets;
    config.dynamicProcessSets = config.dynamicProcessSets || dynamic;
  });
}

void initMembers(const std::vector<int>& members, const std::vector<std::vector<int>>& processSets,
                 bool dynamic) {
  initWith([&](core::Config& config) {
    core::restrictToMembers(config, members);
    // With neither sets nor dynamic mode asked for, HVD_PROCESS_SETS stands (in the new job's
    // ranks), as for init(); else as for init(processSets, dynamic).
    if (!processSets.empty() || dynamic) config.processSets = processSets;
    config.dynamicProcessSets = config.dynamicProcessSets || dynamic;
  });
}

void shutdown() {
  auto& self = instance();
  std::unique_lock<std::shared_mutex> exclusive(self.lifecycle);
  std::lock_guard<std::mutex> lock(self.mutex);
  if (self.forked()) {
    (void)self.runtime.release();  // the parent's: nothing of it runs here
    return;
  }
  if (self.runtime) self.runtime->setStopReason(engine::kStopShutdown);
  self.runtime.reset();
}

bool isInitialized() {
  auto& self = instance();
  std::lock_guard<std::mutex> lock(self.mutex);
  return self.runtime != nullptr;
}

bool elasticEnabled() {
  auto& self = instance();
  std::lock_guard<std::mutex> lock(self.mutex);
  if (self.runtime) return self.runtime->config().elastic;
  const char* value = std::getenv(contract::worker::kElastic.name);
  if (value == nullptr || *value == '\0') value = std::getenv(contract::worker::kElastic.alias);
  return value != nullptr && std::string(value) == "1";
}

int elasticRound() {
  auto& self = instance();
  std::lock_guard<std::mutex> lock(self.mutex);
  return self.elastic ? self.elastic->round() : -1;
}

std::pair<int, int> elasticPending() {
  core::ElasticSession* session = nullptr;
  {
    auto& self = instance();
    std::lock_guard<std::mutex> lock(self.mutex);
    if (!self.runtime) throw InvalidArgumentError("hvd is not initialised: call hvd::init() first");
    session = self.elastic.get();
  }
  // The session lives until the process ends; its own lock serialises its store calls.
  if (session == nullptr) return {0, 0};
  const std::optional<contract::ElasticNotice> notice = session->pending();
  if (!notice) return {0, 0};
  return {notice->round, static_cast<int>(notice->change)};
}

bool elasticRemoved() {
  auto& self = instance();
  std::lock_guard<std::mutex> lock(self.mutex);
  return self.elastic && self.elastic->removed();
}

std::string cpuBackend() {
  auto& self = instance();
  std::lock_guard<std::mutex> lock(self.mutex);
  if (self.runtime) return core::cpuBackendName(self.runtime->config().cpuBackend);
  return core::requestedCpuBackend([](const char* name) { return std::getenv(name); });
}

int rank() { return initialized().config().rank; }
int size() { return initialized().config().size; }
int localRank() { return initialized().config().localRank; }
int localSize() { return initialized().config().localSize; }
int crossRank() { return initialized().config().crossRank; }
int crossSize() { return initialized().config().crossSize; }
bool isHomogeneous() { return initialized().homogeneous(); }

void allreduce(const void* input, void* output, size_t count, DataType type,
               const AllreduceOptions& options) {
  if (auto* d = device({input, output})) return d->allreduce(input, output, count, type, options);
  if (options.op == ReduceOp::kAdasum) {
    // MPI has no Adasum: it runs over hvd's own transports whatever HVD_CPU_BACKEND says.
    return coll::allreduce(runtime().context(), input, output, count, type, options);
  }
  cpu().allreduce(input, output, count, type, options);
}

void allgather(const void* input, size_t count, void* output, const std::vector<size_t>& counts,
               DataType type) {
  if (auto* d = device({input, output})) return d->allgather(input, count, output, counts, type);
  cpu().allgather(input, count, output, counts, type);
}

std::vector<size_t> allgatherCounts(size_t count) { return cpu().allgatherCounts(count); }

void broadcast(void* buffer, size_t count, DataType type, const BroadcastOptions& options) {
  if (auto* d = device({buffer})) return d->broadcast(buffer, count, type, options);
  cpu().broadcast(buffer, count, type, options);
}

void reducescatter(const void* input, void* output, size_t count, DataType type,
                   const ReducescatterOptions& options) {
  if (auto* d = device({input, output})) {
    return d->reducescatter(input, output, count, type, options);
  }
  cpu().reducescatter(input, output, count, type, options);
}

size_t reducescatterCount(size_t count, int rank, int size, size_t rowElements) {
  if (rank < 0 || rank >= size) {
    throw InvalidArgumentError("reducescatterCount: rank " + std::to_string(rank) +
                               " is not in 0.." + std::to_string(size - 1));
  }
  return coll::reducescatterCounts(count, size, rowElements)[rank];
}

void alltoall(const void* input, const std::vector<size_t>& sendCounts, void* output,
              const std::vector<size_t>& recvCounts, DataType type) {
  if (auto* d = device({input, output})) {
    return d->alltoall(input, sendCounts, output, recvCounts, type);
  }
  cpu().alltoall(input, sendCounts, output, recvCounts, type);
}

std::vector<size_t> alltoallCounts(const std::vector<size_t>& sendCounts) {
  return cpu().alltoallCounts(sendCounts);
}

void barrier() { cpu().barrier(); }

std::string transportDescription() { return cpu().describe(); }

std::string deviceBackend() { return runtime().devices().describe(); }

// --- engine (hvd/engine.hpp) ---------------------------------------------------------------

Handle allreduceAsync(const std::string& name, const void* input, void* output, const Shape& shape,
                      DataType type, const OpOptions& options) {
  return engineOf(options.processSet, quoted("allreduce", name))
      ->allreduce(name, input, output, shape, type, options);
}

Handle groupedAllreduceAsync(const std::vector<std::string>& names,
                             const std::vector<const void*>& inputs,
                             const std::vector<void*>& outputs, const std::vector<Shape>& shapes,
                             DataType type, const OpOptions& options) {
  return engineOf(options.processSet, "grouped allreduce")
      ->groupedAllreduce(names, inputs, outputs, shapes, type, options);
}

Handle allgatherAsync(const std::string& name, const void* input, const Shape& shape, DataType type,
                      int processSet) {
  return engineOf(processSet, quoted("allgather", name))->allgather(name, input, shape, type);
}

Handle broadcastAsync(const std::string& name, void* buffer, const Shape& shape, DataType type,
                      int root, int processSet) {
  const std::string what = quoted("broadcast", name);
  auto engine = engineOf(processSet, what);
  // The engine of a set counts its members 0..n-1; the caller names the root by job rank.
  const int index = processSet == core::kGlobalProcessSet
                        ? root
                        : runtime().processSets().memberIndex(processSet, root, what);
  return engine->broadcast(name, buffer, shape, type, index);
}

Handle reducescatterAsync(const std::string& name, const void* input, const Shape& shape,
                          DataType type, const OpOptions& options) {
  return engineOf(options.processSet, quoted("reducescatter", name))
      ->reducescatter(name, input, shape, type, options);
}

Handle alltoallAsync(const std::string& name, const void* input, const Shape& shape,
                     const std::vector<int64_t>& splits, DataType type, int processSet) {
  return engineOf(processSet, quoted("alltoall", name))->alltoall(name, input, shape, splits, type);
}

Handle barrierAsync(int processSet) { return engineOf(processSet, "barrier")->barrier(); }

int join() { return runtime().engine().join(); }

void orderAfterStream(int device, void* stream) {
  if (device < 0) throw InvalidArgumentError("orderAfterStream: device " + std::to_string(device));
  runtime().devices().orderAfter(device, stream);
}

void startTimeline(const std::string& path, bool markCycles) {
  runtime().startTimeline(path, markCycles);
}

void stopTimeline() { runtime().stopTimeline(); }

EngineStats engineStats() { return runtime().engineStats(); }

// --- process sets (hvd/process_sets.hpp) -------------------------------------------------------

int addProcessSet(const std::vector<int>& ranks) { return runtime().processSets().add(ranks); }

bool removeProcessSet(int id) { return runtime().processSets().remove(id); }

std::vector<int> processSetIds() { return initialized().processSets().ids(); }

std::vector<int> processSetRanks(int id) { return initialized().processSets().ranks(id); }

int processSetSize(int id) { return static_cast<int>(processSetRanks(id).size()); }

int processSetRank(int id) {
  const int index = initialized().processSets().rankIn(id);
  if (index < 0) {
    throw InvalidArgumentError("process set " + std::to_string(id) + ": rank " +
                               std::to_string(rank()) + " is not part of it");
  }
  return index;
}

bool processSetIncluded(int id) { return initialized().processSets().rankIn(id) >= 0; }

}  // namespace hvd
