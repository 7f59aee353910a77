// The engines of a job's process sets (core/process_sets.h): each set this rank belongs to gets
// an engine of its own — its own negotiation, response cache, fusion buffer and stall
// detection, whose messages name job ranks and the set — on a context of its own: a channel of
// the job's mesh between the set's members only (transport/mesh.h connectMembers), so a set
// opens only the links it needs, and on GPUs its own NCCL communicator (its device backend's
// unique ids travel under "ps<id>/" in the job's store). A set's engine starts when the set is
// made — at init for the sets fixed then, in add() for a dynamic one — while every rank is in
// that collective call, as Horovod's sets are ready when init or add_process_set returns: a
// member that never arrives fails the call after HVD_START_TIMEOUT, naming the set and the rank.
//
// Adding and removing a set at run time (HVD_DYNAMIC_PROCESS_SETS=1) is collective over the
// whole job, in the same order on every rank: the ranks first agree on the request through the
// job's engine (an allgather of what each rank asked for; a disagreement is an error on every
// rank, naming the ranks and what they asked), then every rank updates its table alike, so
// ids agree without a coordinator. Removing a set stops its engine on its members (ops still
// pending there fail, saying the set was removed).
//
// Threads: every call may come from any thread. A set's engine starts under that set's own lock,
// so a set whose members are still connecting holds up no other set. Engines are handed out as
// shared pointers: one removed while another thread submits to it lives until that submit is
// done.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/process_sets.h"
#include "engine/engine.h"
#include "store/store.h"
#include "transport/context.h"
#include "transport/mesh.h"

namespace hvd::core {

// The first mesh channel of the process sets (0 is the runtime's, 1 the job's engine's).
constexpr int kFirstProcessSetChannel = 2;

class ProcessSetEngines {
 public:
  struct Setup {
    const Config* config = nullptr;
    transport::Mesh* mesh = nullptr;  // null for a job of one rank
    store::Store* store = nullptr;    // this init cycle's keys; null for a job of one rank
    transport::ContextOptions options;
    std::chrono::milliseconds connectTimeout{60000};
    // The job's engine (set 0), started on first use by the runtime.
    std::function<engine::Engine&()> jobEngine;
  };
  explicit ProcessSetEngines(Setup setup);
  ~ProcessSetEngines();
  ProcessSetEngines(const ProcessSetEngines&) = delete;
  ProcessSetEngines& operator=(const ProcessSetEngines&) = delete;

  // Registers the sets fixed at init (every rank the same list) and returns their ids in the
  // list's order; a set equal to one registered before (the global set included) gets that id.
  std::vector<int> registerStatic(const std::vector<std::vector<int>>& sets);
  // Starts the engines of those of `ids` this rank is a member of (connecting their members),
  // in increasing id order; collective over each set's members. Throws what starting failed
  // with, naming the set.
  void startOwn(std::vector<int> ids);

  // The engine of set `id` for an op this rank submits (starting it if startOwn did not). Throws
  // InvalidArgumentError for a set that does not exist or that this rank is not a member of;
  // `what` starts the message ("allreduce 'x'").
  std::shared_ptr<engine::Engine> engine(int id, const std::string& what);
  // `jobRank`'s index in set `id`, for a broadcast's root; throws InvalidArgumentError when it
  // is not a member.
  int memberIndex(int id, int jobRank, const std::string& what) const;

  // Collective over the job (HVD_DYNAMIC_PROCESS_SETS=1): see above.
  int add(const std::vector<int>& ranks);
  bool remove(int id);

  // Runtime::setStopReason for every set's engine that runs.
  void setStopReason(const std::string& reason);

  std::vector<int> ranks(int id) const;
  std::vector<int> ids() const;
  // This rank's index in set `id`, -1 when it is not a member.
  int rankIn(int id) const;

 private:
  struct Slot;
  // Agrees on a membership change with every rank through the job's engine; returns once every
  // rank asked for the same (`request`: kind, then the kind's values).
  void agree(const std::vector<int32_t>& request, const std::string& what);
  std::shared_ptr<Slot> slotFor(int id, const std::string& what);
  void ensureStarted(Slot& slot);  // under the slot's own lock; a failure sticks
  void start(Slot& slot);

  Setup setup_;
  const int rank_;
  mutable std::mutex mutex_;  // the table, the slots and the change counter
  ProcessSetTable table_;
  std::map<int, std::shared_ptr<Slot>> slots_;  // sets this rank is a member of, but 0
  uint64_t changes_ = 0;                        // membership changes agreed so far
  std::mutex changeMutex_;                      // one change at a time on this rank
};

}  // namespace hvd::core
