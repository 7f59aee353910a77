#include "core/process_set_engines.h"

#include <algorithm>

#include "core/runtime.h"
#include "gpu/device_backend.h"
#include "hvd/error.hpp"
#include "hvd_support/logging.h"
#include "store/prefixed_store.h"

namespace hvd::core {
namespace {

constexpr int32_t kAddRequest = 0;
constexpr int32_t kRemoveRequest = 1;

// "add [0,1]" / "remove 2", for a disagreement's message.
std::string describeRequest(const std::vector<int32_t>& request) {
  if (request.empty()) return "nothing";
  std::vector<int> values(request.begin() + 1, request.end());
  if (request[0] == kAddRequest) return "add [" + rankList(values) + "]";
  return "remove " + rankList(values);
}

}  // namespace

struct ProcessSetEngines::Slot {
  int id = 0;
  std::vector<int> members;
  int index = 0;  // this rank's place in the set
  std::string scope;
  std::mutex start;    // taken while the engine starts
  std::string failed;  // why starting it failed: later ops get the same error
  ErrorKind failedKind = ErrorKind::kBackend;
  // Destroyed bottom-up: the engine first, then what it uses.
  std::unique_ptr<store::Store> store;
  std::unique_ptr<transport::Context> context;
  std::unique_ptr<gpu::DeviceBackend> devices;
  std::unique_ptr<engine::Engine> engine;
  ~Slot() {
    engine.reset();
    devices.reset();
    context.reset();
  }
};

ProcessSetEngines::ProcessSetEngines(Setup setup)
    : setup_(std::move(setup)), rank_(setup_.config->rank), table_(setup_.config->size) {}

ProcessSetEngines::~ProcessSetEngines() = default;

std::vector<int> ProcessSetEngines::registerStatic(const std::vector<std::vector<int>>& sets) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<int> ids;
  for (const auto& ranks : sets) {
    const std::vector<int> normalized = table_.normalize(ranks, "process sets at init");
    int id = table_.find(normalized);
    if (id < 0) id = table_.add(normalized, "process sets at init");
    ids.push_back(id);
  }
  return ids;
}

std::shared_ptr<ProcessSetEngines::Slot> ProcessSetEngines::slotFor(int id,
                                                                    const std::string& what) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!table_.contains(id)) {
    throw InvalidArgumentError(what + ": there is no process set " + std::to_string(id) +
                               " (removed, or never added; sets: " + rankList(table_.ids()) + ")");
  }
  const std::vector<int>& members = table_.ranks(id);
  const auto self = std::find(members.begin(), members.end(), rank_);
  if (self == members.end()) {
    throw InvalidArgumentError(what + ": rank " + std::to_string(rank_) + " is not in " +
                               table_.describe(id) + ": only its members may submit ops to it");
  }
  auto& slot = slots_[id];
  if (!slot) {
    slot = std::make_shared<Slot>();
    slot->id = id;
    slot->members = members;
    slot->index = static_cast<int>(self - members.begin());
    slot->scope = table_.describe(id);
  }
  return slot;
}

std::shared_ptr<engine::Engine> ProcessSetEngines::engine(int id, const std::string& what) {
  if (id == kGlobalProcessSet) {
    // The runtime owns the job's engine for as long as this object lives: no owner to share.
    return std::shared_ptr<engine::Engine>(std::shared_ptr<void>(), &setup_.jobEngine());
  }
  std::shared_ptr<Slot> slot = slotFor(id, what);
  ensureStarted(*slot);
  return std::shared_ptr<engine::Engine>(slot, slot->engine.get());
}

void ProcessSetEngines::ensureStarted(Slot& slot) {
  std::lock_guard<std::mutex> starting(slot.start);
  if (!slot.failed.empty()) throwError(slot.failedKind, slot.failed);
  if (slot.engine) return;
  try {
    start(slot);
  } catch (const Error& e) {
    slot.failed = slot.scope + ": could not start: " + e.what();
    slot.failedKind = e.kind();
    throwError(slot.failedKind, slot.failed);
  }
}

void ProcessSetEngines::startOwn(std::vector<int> ids) {
  // In increasing id order on every rank, so that no two members wait on each other in
  // different sets: the lowest set not yet connected always has all its members at hand.
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  for (int id : ids) {
    if (id == kGlobalProcessSet || rankIn(id) < 0) continue;
    ensureStarted(*slotFor(id, "process set " + std::to_string(id)));
  }
}

void ProcessSetEngines::start(Slot& slot) {
  const int size = static_cast<int>(slot.members.size());
  if (size == 1 || setup_.mesh == nullptr) {
    slot.context = std::make_unique<transport::Context>(
        0, 1, std::vector<std::unique_ptr<transport::Link>>(1), setup_.options);
  } else {
    slot.store =
        std::make_unique<store::PrefixedStore>(*setup_.store, "ps" + std::to_string(slot.id) + "/");
    slot.context = setup_.mesh->connectMembers(kFirstProcessSetChannel + slot.id, slot.members,
                                               setup_.options, setup_.connectTimeout);
  }
  gpu::DeviceBackendOptions device = deviceOptions(*setup_.config, false);
  device.rank = slot.index;
  device.size = size;
  // The hosts' layout of a subset is not the job's: a set's device collectives stay flat.
  device.hierarchical = false;
  slot.devices = std::make_unique<gpu::DeviceBackend>(device, *slot.context, slot.store.get());
  engine::EngineOptions options = engineOptions(*setup_.config);
  options.devices = slot.devices.get();
  // One timeline per job, written by the job's engine (rank 0): a set's ops are not in it.
  options.timelinePath.clear();
  options.timelineMarkCycles = false;
  // Autotune tunes the job's engine; a set's keeps the configured knobs.
  options.autotune.enabled = false;
  options.jobRanks = slot.members;
  options.scope = slot.scope;
  slot.engine = std::make_unique<engine::Engine>(*slot.context, options);
  logging::get("engine")->debug("{}: engine started as its rank {} of {}", slot.scope, slot.index,
                                size);
}

int ProcessSetEngines::memberIndex(int id, int jobRank, const std::string& what) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::vector<int>& members = table_.ranks(id);
  const auto found = std::find(members.begin(), members.end(), jobRank);
  if (found == members.end()) {
    throw InvalidArgumentError(what + ": root rank " + std::to_string(jobRank) + " is not in " +
                               table_.describe(id));
  }
  return static_cast<int>(found - members.begin());
}

void ProcessSetEngines::agree(const std::vector<int32_t>& request, const std::string& what) {
  std::vector<int32_t> payload;
  payload.push_back(static_cast<int32_t>(request.size()));
  payload.insert(payload.end(), request.begin(), request.end());
  const std::string name = "hvd.process_sets." + std::to_string(++changes_);
  Handle handle = setup_.jobEngine().allgather(
      name, payload.data(), Shape{static_cast<int64_t>(payload.size())}, DataType::kInt32);
  handle.wait();
  const std::vector<uint8_t>& bytes = handle.output();
  std::vector<int32_t> all(bytes.size() / sizeof(int32_t));
  std::copy(bytes.begin(), bytes.end(), reinterpret_cast<uint8_t*>(all.data()));
  // Every rank's request, grouped: all equal is the common case.
  std::vector<std::pair<std::vector<int32_t>, std::vector<int>>> groups;
  size_t at = 0;
  for (int r = 0; r < table_.jobSize(); ++r) {
    if (at >= all.size() || all[at] < 0 || at + 1 + size_t(all[at]) > all.size()) {
      throw InternalError(what + ": malformed agreement from rank " + std::to_string(r));
    }
    std::vector<int32_t> theirs(all.begin() + at + 1, all.begin() + at + 1 + all[at]);
    at += 1 + all[at];
    auto group = std::find_if(groups.begin(), groups.end(),
                              [&](const auto& g) { return g.first == theirs; });
    if (group == groups.end()) {
      groups.push_back({std::move(theirs), {r}});
    } else {
      group->second.push_back(r);
    }
  }
  if (groups.size() == 1) return;
  std::string message = what +
                        ": every rank must make the same process-set changes in the same "
                        "order, but ranks asked for ";
  for (size_t i = 0; i < groups.size(); ++i) {
    message += (i ? ", " : "") + describeRequest(groups[i].first) + " on rank" +
               (groups[i].second.size() > 1 ? "s " : " ") + rankList(groups[i].second);
  }
  throw InvalidArgumentError(message);
}

int ProcessSetEngines::add(const std::vector<int>& ranks) {
  const std::string what = "add_process_set";
  if (!setup_.config->dynamicProcessSets) {
    throw InvalidArgumentError(
        what +
        ": process sets can be added after init only in dynamic mode: set "
        "HVD_DYNAMIC_PROCESS_SETS=1 (or HOROVOD_DYNAMIC_PROCESS_SETS=1), or call "
        "hvd.init(process_sets=\"dynamic\")");
  }
  std::lock_guard<std::mutex> change(changeMutex_);
  std::vector<int32_t> request{kAddRequest};
  request.insert(request.end(), ranks.begin(), ranks.end());
  agree(request, what);
  int id = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    id = table_.add(table_.normalize(ranks, what), what);
  }
  // Like Horovod, the set is ready when the call returns: its members connect now, while every
  // rank is in this call, not on its first op (which members may reach far apart).
  startOwn({id});
  return id;
}

bool ProcessSetEngines::remove(int id) {
  const std::string what = "remove_process_set";
  if (!setup_.config->dynamicProcessSets) {
    throw InvalidArgumentError(
        what +
        ": process sets can be removed only in dynamic mode: set HVD_DYNAMIC_PROCESS_SETS=1 (or "
        "HOROVOD_DYNAMIC_PROCESS_SETS=1), or call hvd.init(process_sets=\"dynamic\")");
  }
  if (id == kGlobalProcessSet) return false;
  std::lock_guard<std::mutex> change(changeMutex_);
  agree({kRemoveRequest, id}, what);
  std::shared_ptr<Slot> slot;
  bool removed = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    removed = table_.remove(id);
    auto found = slots_.find(id);
    if (found != slots_.end()) {
      slot = std::move(found->second);
      slots_.erase(found);
    }
  }
  // Outside the lock: the last owner's reset stops the set's engine in step with its members.
  if (slot) {
    std::lock_guard<std::mutex> started(slot->start);
    if (slot->engine) slot->engine->setStopReason(engine::kStopRemoved);
  }
  slot.reset();
  return removed;
}

void ProcessSetEngines::setStopReason(const std::string& reason) {
  std::vector<std::shared_ptr<Slot>> slots;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [id, slot] : slots_) slots.push_back(slot);
  }
  for (const auto& slot : slots) {
    std::lock_guard<std::mutex> started(slot->start);
    if (slot->engine) slot->engine->setStopReason(reason);
  }
}

std::vector<int> ProcessSetEngines::ranks(int id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return table_.ranks(id);
}

std::vector<int> ProcessSetEngines::ids() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return table_.ids();
}

int ProcessSetEngines::rankIn(int id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::vector<int>& members = table_.ranks(id);
  const auto found = std::find(members.begin(), members.end(), rank_);
  return found == members.end() ? -1 : static_cast<int>(found - members.begin());
}

}  // namespace hvd::core
