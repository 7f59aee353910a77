#include "common/fake_nccl.h"

#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <utility>

#include "collectives/reduce.h"
#include "hvd/error.hpp"

namespace hvd::test {

using gpu::NcclComm;
using gpu::NcclResult;
using gpu::NcclUniqueId;

namespace {

enum class Kind { kAllReduce, kBroadcast, kAllGather, kReduceScatter };

const char* kindName(Kind kind) {
  switch (kind) {
    case Kind::kAllReduce:
      return "ncclAllReduce";
    case Kind::kBroadcast:
      return "ncclBroadcast";
    case Kind::kAllGather:
      return "ncclAllGather";
    case Kind::kReduceScatter:
      return "ncclReduceScatter";
  }
  return "?";
}

// One rank's part of a collective. `count` is what the rank passed (allGather: sendCount,
// reduceScatter: recvCount).
struct Part {
  Kind kind = Kind::kAllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
};

// The n-th collective of a communicator: filled by its ranks in turn, computed by the last.
struct Op {
  std::vector<std::optional<Part>> parts;
  int arrived = 0;
  int left = 0;  // ranks that returned after it was done; erased when all did
  bool done = false;
  bool abandoned = false;  // a rank left before it was done: it never completes
  NcclResult result = NcclResult::kSuccess;
  std::string error;
};

struct Message {
  std::vector<char> data;
  size_t count = 0;
  DataType type = DataType::kFloat32;
};

struct Comm;

// The ranks that called commInitRank with one id.
struct Group {
  explicit Group(int n) : nranks(n), members(static_cast<size_t>(n), nullptr) {}
  const int nranks;
  std::vector<Comm*> members;  // joined ranks
  int arrived = 0;
  bool ready = false;
  bool failed = false;  // some rank's init failed
  std::string failure;
  bool broken = false;  // an abort reached the peers
  std::string brokenWhy;
  std::map<uint64_t, Op> ops;                               // by sequence number
  std::map<std::pair<int, int>, std::deque<Message>> mail;  // (from, to) -> messages
};

// One rank's communicator: what an NcclComm handle points to.
struct Comm {
  Group* group = nullptr;
  int rank = 0;
  bool joined = false;
  bool aborted = false;
  bool destroyed = false;
  uint64_t nextSeq = 0;
  uint64_t completed = 0;
  NcclResult asyncError = NcclResult::kSuccess;
  std::string lastError;
};

struct Fault {
  NcclResult result = NcclResult::kSystemError;
  std::string lastError;
  bool immediate = false;
  uint64_t after = 0;
};

// As with the real library (gpu/dl_nccl_api.cc), int16 has no NCCL type.
bool validType(DataType type) {
  const int v = static_cast<int>(type);
  return v >= 0 && v < kNumDataTypes && type != DataType::kInt16;
}

// As with the real library, Adasum has no NCCL op.
bool validOp(ReduceOp op) {
  const int v = static_cast<int>(op);
  return v >= 0 && v < kNumReduceOps && op != ReduceOp::kAdasum;
}

}  // namespace

struct FakeNcclWorld::State {
  mutable std::mutex mutex;
  mutable std::condition_variable changed;

  // Configuration.
  std::optional<Fault> uniqueIdFault;
  std::map<int, Fault> initFaults;
  std::set<int> absent;
  std::map<int, Fault> asyncFaults;
  bool abortReachesPeers = false;
  std::chrono::milliseconds blockingInitLimit{std::chrono::seconds(10)};
  int version = 22703;

  // What exists.
  std::mt19937_64 random{std::random_device{}()};
  std::vector<NcclUniqueId> issued;
  std::set<std::string> issuedKeys;
  std::map<std::string, std::unique_ptr<Group>> groups;
  std::map<NcclComm, std::unique_ptr<Comm>> comms;
  std::map<std::thread::id, std::string> threadErrors;
  FakeNcclCounters counters;
  int blocked = 0;

  // ---- Helpers; all require `mutex`.

  Comm* find(NcclComm handle) const {
    auto it = comms.find(handle);
    return it == comms.end() ? nullptr : it->second.get();
  }

  // Records `text` as the last error of the calling thread (and of `c`).
  NcclResult fail(Comm* c, NcclResult result, const std::string& text) {
    threadErrors[std::this_thread::get_id()] = text;
    if (c != nullptr) c->lastError = text;
    return result;
  }

  // Waits on `changed` until `done`, counted in `blocked`; false if `limit` passed first.
  template <class Pred>
  bool block(std::unique_lock<std::mutex>& lock, Pred done,
             std::chrono::milliseconds limit = std::chrono::milliseconds::max()) {
    ++blocked;
    changed.notify_all();
    bool ok = true;
    if (limit == std::chrono::milliseconds::max()) {
      changed.wait(lock, done);
    } else {
      ok = changed.wait_for(lock, limit, done);
    }
    --blocked;
    changed.notify_all();
    return ok;
  }

  // The state commGetAsyncError reports for `c`.
  NcclResult status(Comm* c) {
    if (c->aborted) return NcclResult::kSystemError;
    if (c->asyncError != NcclResult::kSuccess) return c->asyncError;
    Group& g = *c->group;
    if (g.broken) return fail(c, NcclResult::kRemoteError, g.brokenWhy);
    if (c->joined && g.ready) return NcclResult::kSuccess;
    if (g.failed) return fail(c, NcclResult::kRemoteError, g.failure);
    return NcclResult::kInProgress;
  }

  // kSuccess when `c` may run an operation, else why not.
  NcclResult usable(Comm* c) {
    if (c == nullptr) return fail(c, NcclResult::kInvalidArgument, "fake NCCL: unknown comm");
    if (c->destroyed) return fail(c, NcclResult::kInvalidUsage, "fake NCCL: comm destroyed");
    if (c->aborted) return fail(c, NcclResult::kSystemError, "fake NCCL: comm aborted");
    const NcclResult state = status(c);
    if (state == NcclResult::kInProgress) {
      return fail(c, NcclResult::kInvalidUsage, "fake NCCL: comm init not finished");
    }
    return state;
  }

  // Why a blocked call on `c` stopped waiting without its result.
  NcclResult interrupted(Comm* c) {
    if (c->aborted) return fail(c, NcclResult::kSystemError, "fake NCCL: comm aborted");
    return fail(c, NcclResult::kRemoteError, c->group->brokenWhy);
  }

  void called() {
    std::lock_guard<std::mutex> lock(mutex);
    ++counters.calls;
  }

  void complete(Comm* c) {
    ++c->completed;
    ++counters.collectives;
    auto fault = asyncFaults.find(c->rank);
    if (fault != asyncFaults.end() && c->completed == fault->second.after) {
      c->asyncError = fault->second.result;
      c->lastError = fault->second.lastError;
    }
  }

  // ---- Operations.

  NcclResult getUniqueId(NcclUniqueId* id) {
    std::lock_guard<std::mutex> lock(mutex);
    if (id == nullptr) return fail(nullptr, NcclResult::kInvalidArgument, "fake NCCL: null id");
    if (uniqueIdFault) return fail(nullptr, uniqueIdFault->result, uniqueIdFault->lastError);
    for (size_t i = 0; i < id->bytes.size(); i += sizeof(uint64_t)) {
      const uint64_t word = random();
      std::memcpy(id->bytes.data() + i, &word, sizeof(word));
    }
    issued.push_back(*id);
    issuedKeys.insert(std::string(id->bytes.data(), id->bytes.size()));
    ++counters.uniqueIds;
    return NcclResult::kSuccess;
  }

  NcclResult initRank(NcclComm* out, int nranks, const NcclUniqueId& id, int rank, bool blocking) {
    std::unique_lock<std::mutex> lock(mutex);
    ++counters.inits;
    if (out == nullptr) return fail(nullptr, NcclResult::kInvalidArgument, "fake NCCL: null comm");
    *out = nullptr;
    if (nranks < 1 || rank < 0 || rank >= nranks) {
      return fail(nullptr, NcclResult::kInvalidArgument,
                  "fake NCCL: rank " + std::to_string(rank) + " of " + std::to_string(nranks));
    }
    const std::string key(id.bytes.data(), id.bytes.size());
    if (issuedKeys.count(key) == 0) {
      return fail(nullptr, NcclResult::kInvalidArgument,
                  "fake NCCL: unique id not issued by ncclGetUniqueId");
    }
    std::unique_ptr<Group>& slot = groups[key];
    if (slot == nullptr) slot = std::make_unique<Group>(nranks);
    Group& g = *slot;
    if (g.nranks != nranks) {
      return fail(nullptr, NcclResult::kInvalidUsage,
                  "fake NCCL: nranks " + std::to_string(nranks) + " but the communicator has " +
                      std::to_string(g.nranks));
    }
    if (g.members[static_cast<size_t>(rank)] != nullptr) {
      return fail(nullptr, NcclResult::kInvalidUsage,
                  "fake NCCL: rank " + std::to_string(rank) + " joined twice");
    }

    const auto fault = initFaults.find(rank);
    if (fault != initFaults.end()) {
      g.failed = true;
      g.failure = "fake NCCL: rank " + std::to_string(rank) + " failed during ncclCommInitRank";
      changed.notify_all();
      if (fault->second.immediate)
        return fail(nullptr, fault->second.result, fault->second.lastError);
    }
    auto owned = std::make_unique<Comm>();
    Comm* c = owned.get();
    c->group = &g;
    c->rank = rank;
    comms.emplace(c, std::move(owned));
    *out = c;
    if (fault != initFaults.end()) {
      c->asyncError = fault->second.result;
      fail(c, fault->second.result, fault->second.lastError);
      return blocking ? fault->second.result : NcclResult::kInProgress;
    }
    if (absent.count(rank) == 0) {
      g.members[static_cast<size_t>(rank)] = c;
      c->joined = true;
      if (++g.arrived == g.nranks) g.ready = true;
      changed.notify_all();
    }
    if (!blocking) return g.ready ? NcclResult::kSuccess : NcclResult::kInProgress;

    const bool settled = block(
        lock, [&] { return status(c) != NcclResult::kInProgress; }, blockingInitLimit);
    if (!settled) {
      return fail(c, NcclResult::kSystemError,
                  "fake NCCL: blocking ncclCommInitRank gave up after " +
                      std::to_string(blockingInitLimit.count()) + " ms: not every rank joined");
    }
    return status(c);
  }

  NcclResult asyncError(NcclComm handle, NcclResult* out) {
    std::lock_guard<std::mutex> lock(mutex);
    Comm* c = find(handle);
    if (c == nullptr || out == nullptr) {
      return fail(c, NcclResult::kInvalidArgument, "fake NCCL: unknown comm");
    }
    if (c->destroyed) return fail(c, NcclResult::kInvalidUsage, "fake NCCL: comm destroyed");
    *out = status(c);
    return NcclResult::kSuccess;
  }

  NcclResult abort(NcclComm handle) {
    std::lock_guard<std::mutex> lock(mutex);
    if (handle == nullptr) return NcclResult::kSuccess;  // as NCCL: aborting nothing is fine
    Comm* c = find(handle);
    if (c == nullptr) return fail(c, NcclResult::kInvalidArgument, "fake NCCL: unknown comm");
    if (c->aborted || c->destroyed) {
      ++counters.misuses;
      return fail(c, NcclResult::kInvalidUsage, "fake NCCL: comm already aborted or destroyed");
    }
    c->aborted = true;
    ++counters.aborts;
    if (abortReachesPeers && !c->group->broken) {
      c->group->broken = true;
      c->group->brokenWhy = "fake NCCL: rank " + std::to_string(c->rank) + " aborted";
    }
    changed.notify_all();
    return NcclResult::kSuccess;
  }

  NcclResult destroy(NcclComm handle) {
    std::lock_guard<std::mutex> lock(mutex);
    Comm* c = find(handle);
    if (c == nullptr) return fail(c, NcclResult::kInvalidArgument, "fake NCCL: unknown comm");
    if (c->aborted || c->destroyed || !(c->joined && c->group->ready)) {
      ++counters.misuses;
      return fail(c, NcclResult::kInvalidUsage,
                  "fake NCCL: destroy of an aborted, destroyed or unfinished comm");
    }
    c->destroyed = true;
    ++counters.destroys;
    return NcclResult::kSuccess;
  }

  // Checks what one rank passed, before it takes part.
  static std::string badPart(const Part& p, int nranks) {
    if (!validType(p.type)) return "invalid data type";
    if ((p.kind == Kind::kAllReduce || p.kind == Kind::kReduceScatter) && !validOp(p.op)) {
      return "invalid reduction op";
    }
    if (p.kind == Kind::kBroadcast && (p.root < 0 || p.root >= nranks)) return "invalid root";
    if (p.count > 0 && (p.send == nullptr || p.recv == nullptr)) return "null buffer";
    return "";
  }

  // Why the ranks' parts of one collective do not fit together ("" when they do).
  static std::string mismatch(const Op& op) {
    const Part& first = *op.parts[0];
    for (size_t r = 1; r < op.parts.size(); ++r) {
      const Part& p = *op.parts[r];
      const bool reduces = first.kind == Kind::kAllReduce || first.kind == Kind::kReduceScatter;
      if (p.kind != first.kind || p.count != first.count || p.type != first.type ||
          (reduces && p.op != first.op) ||
          (first.kind == Kind::kBroadcast && p.root != first.root)) {
        return std::string("fake NCCL: rank 0 called ") + kindName(first.kind) + " (count " +
               std::to_string(first.count) + ") but rank " + std::to_string(r) + " called " +
               kindName(p.kind) + " (count " + std::to_string(p.count) + ") or other arguments";
      }
    }
    return "";
  }

  // Reduces `blocks` elements per rank of every rank's send buffer into `out`.
  static void reduceAll(const Op& op, std::vector<char>& out, size_t elements) {
    const Part& first = *op.parts[0];
    const size_t bytes = elements * dataTypeSize(first.type);
    out.assign(static_cast<const char*>(first.send), static_cast<const char*>(first.send) + bytes);
    for (size_t r = 1; r < op.parts.size(); ++r) {
      coll::reduceInto(first.op, first.type, out.data(), op.parts[r]->send, elements);
    }
    if (first.op == ReduceOp::kAverage) {
      coll::finishAverage(first.type, out.data(), elements, static_cast<int>(op.parts.size()));
    }
  }

  // The last rank to arrive computes everybody's output.
  static void compute(Op& op) {
    op.error = mismatch(op);
    if (!op.error.empty()) {
      op.result = NcclResult::kInvalidUsage;
      return;
    }
    const Part& first = *op.parts[0];
    const size_t n = op.parts.size();
    const size_t bytes = first.count * dataTypeSize(first.type);
    std::vector<char> result;
    switch (first.kind) {
      case Kind::kAllReduce:
        reduceAll(op, result, first.count);
        for (auto& p : op.parts) std::memcpy(p->recv, result.data(), bytes);
        break;
      case Kind::kBroadcast: {
        const char* src = static_cast<const char*>(op.parts[static_cast<size_t>(first.root)]->send);
        result.assign(src, src + bytes);
        for (auto& p : op.parts) std::memcpy(p->recv, result.data(), bytes);
        break;
      }
      case Kind::kAllGather:
        result.resize(n * bytes);
        for (size_t r = 0; r < n; ++r)
          std::memcpy(result.data() + r * bytes, op.parts[r]->send, bytes);
        for (auto& p : op.parts) std::memcpy(p->recv, result.data(), n * bytes);
        break;
      case Kind::kReduceScatter:
        reduceAll(op, result, n * first.count);
        for (size_t r = 0; r < n; ++r) {
          std::memcpy(op.parts[r]->recv, result.data() + r * bytes, bytes);
        }
        break;
    }
  }

  NcclResult collective(NcclComm handle, const Part& part) {
    std::unique_lock<std::mutex> lock(mutex);
    Comm* c = find(handle);
    const NcclResult ok = usable(c);
    if (ok != NcclResult::kSuccess) return ok;
    Group& g = *c->group;
    const std::string bad = badPart(part, g.nranks);
    if (!bad.empty()) return fail(c, NcclResult::kInvalidArgument, "fake NCCL: " + bad);

    const uint64_t seq = c->nextSeq++;
    Op& op = g.ops[seq];  // std::map: the reference stays valid while others come and go
    if (op.parts.empty()) op.parts.resize(static_cast<size_t>(g.nranks));
    op.parts[static_cast<size_t>(c->rank)] = part;
    if (++op.arrived == g.nranks && !op.abandoned) {
      compute(op);
      op.done = true;
      for (Comm* member : g.members) complete(member);
      changed.notify_all();
    } else {
      block(lock, [&] { return op.done || c->aborted || g.broken; });
    }
    if (!op.done) {
      // Leaving early: nobody may write into this rank's buffers any more.
      op.abandoned = true;
      op.parts[static_cast<size_t>(c->rank)].reset();
      return interrupted(c);
    }
    const NcclResult result = op.result;
    if (result != NcclResult::kSuccess) fail(c, result, op.error);
    if (++op.left == g.nranks) g.ops.erase(seq);
    return result;
  }

  NcclResult send(const void* buffer, size_t count, DataType type, int peer, NcclComm handle) {
    std::lock_guard<std::mutex> lock(mutex);
    Comm* c = find(handle);
    const NcclResult ok = usable(c);
    if (ok != NcclResult::kSuccess) return ok;
    Group& g = *c->group;
    if (!validType(type) || peer < 0 || peer >= g.nranks || (count > 0 && buffer == nullptr)) {
      return fail(c, NcclResult::kInvalidArgument, "fake NCCL: invalid send arguments");
    }
    Message message;
    const char* src = static_cast<const char*>(buffer);
    message.data.assign(src, src + count * dataTypeSize(type));
    message.count = count;
    message.type = type;
    g.mail[{c->rank, peer}].push_back(std::move(message));
    complete(c);
    changed.notify_all();
    return NcclResult::kSuccess;
  }

  NcclResult recv(void* buffer, size_t count, DataType type, int peer, NcclComm handle) {
    std::unique_lock<std::mutex> lock(mutex);
    Comm* c = find(handle);
    const NcclResult ok = usable(c);
    if (ok != NcclResult::kSuccess) return ok;
    Group& g = *c->group;
    if (!validType(type) || peer < 0 || peer >= g.nranks || (count > 0 && buffer == nullptr)) {
      return fail(c, NcclResult::kInvalidArgument, "fake NCCL: invalid recv arguments");
    }
    std::deque<Message>& box = g.mail[{peer, c->rank}];
    block(lock, [&] { return !box.empty() || c->aborted || g.broken; });
    if (box.empty() || c->aborted) return interrupted(c);
    Message message = std::move(box.front());
    box.pop_front();
    if (message.count != count || message.type != type) {
      return fail(c, NcclResult::kInvalidUsage,
                  "fake NCCL: rank " + std::to_string(peer) + " sent " +
                      std::to_string(message.count) + " elements, rank " + std::to_string(c->rank) +
                      " expected " + std::to_string(count));
    }
    std::memcpy(buffer, message.data.data(), message.data.size());
    complete(c);
    return NcclResult::kSuccess;
  }

  std::string lastError(NcclComm handle) {
    std::lock_guard<std::mutex> lock(mutex);
    Comm* c = find(handle);
    if (c != nullptr && !c->lastError.empty()) return c->lastError;
    auto it = threadErrors.find(std::this_thread::get_id());
    return it == threadErrors.end() ? std::string() : it->second;
  }
};

// ---- FakeNcclWorld

FakeNcclWorld::FakeNcclWorld() : state_(std::make_unique<State>()) {}
FakeNcclWorld::~FakeNcclWorld() = default;

void FakeNcclWorld::failUniqueId(NcclResult result, const std::string& lastError) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->uniqueIdFault = Fault{result, lastError, true, 0};
}

void FakeNcclWorld::failInit(int rank, NcclResult result, const std::string& lastError,
                             bool immediate) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->initFaults[rank] = Fault{result, lastError, immediate, 0};
}

void FakeNcclWorld::neverArrive(int rank) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->absent.insert(rank);
}

void FakeNcclWorld::asyncErrorAfter(int rank, uint64_t k, NcclResult result,
                                    const std::string& lastError) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->asyncFaults[rank] = Fault{result, lastError, false, k};
}

void FakeNcclWorld::setAbortReachesPeers(bool on) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->abortReachesPeers = on;
}

void FakeNcclWorld::setBlockingInitLimit(std::chrono::milliseconds limit) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->blockingInitLimit = limit;
}

void FakeNcclWorld::setVersion(int version) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->version = version;
}

void FakeNcclWorld::injectAsyncError(NcclComm comm, NcclResult result,
                                     const std::string& lastError) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  Comm* c = state_->find(comm);
  if (c == nullptr) throw InvalidArgumentError("FakeNcclWorld: unknown comm");
  c->asyncError = result;
  c->lastError = lastError;
  state_->changed.notify_all();
}

FakeNcclCounters FakeNcclWorld::counters() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->counters;
}

uint64_t FakeNcclWorld::collectives(NcclComm comm) const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  Comm* c = state_->find(comm);
  return c == nullptr ? 0 : c->completed;
}

bool FakeNcclWorld::isAborted(NcclComm comm) const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  Comm* c = state_->find(comm);
  return c != nullptr && c->aborted;
}

bool FakeNcclWorld::isDestroyed(NcclComm comm) const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  Comm* c = state_->find(comm);
  return c != nullptr && c->destroyed;
}

std::vector<NcclUniqueId> FakeNcclWorld::issuedIds() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->issued;
}

int FakeNcclWorld::blocked() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->blocked;
}

bool FakeNcclWorld::waitBlocked(int count, std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(state_->mutex);
  return state_->changed.wait_for(lock, timeout, [&] { return state_->blocked >= count; });
}

// ---- FakeNcclApi

// groupStart/groupEnd nest per thread, as NCCL's group state is thread-local.
struct FakeNcclApi::Groups {
  struct Queue {
    int depth = 0;
    std::vector<std::pair<bool, std::function<NcclResult()>>> calls;  // (is a send, call)
  };
  std::map<std::thread::id, Queue> byThread;

  // Queues `call` when the calling thread is inside a group; else runs it.
  NcclResult run(std::mutex& mutex, bool isSend, std::function<NcclResult()> call) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      auto it = byThread.find(std::this_thread::get_id());
      if (it != byThread.end() && it->second.depth > 0) {
        it->second.calls.emplace_back(isSend, std::move(call));
        return NcclResult::kSuccess;
      }
    }
    return call();
  }
};

FakeNcclApi::FakeNcclApi(FakeNcclWorld& world)
    : world_(world), groups_(std::make_unique<Groups>()) {}

FakeNcclApi::~FakeNcclApi() = default;

int FakeNcclApi::version() {
  std::lock_guard<std::mutex> lock(world_.state_->mutex);
  return world_.state_->version;
}

NcclResult FakeNcclApi::getUniqueId(NcclUniqueId* id) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++uniqueIdCalls_;
  }
  return world_.state_->getUniqueId(id);
}

NcclResult FakeNcclApi::commInitRank(NcclComm* comm, int nranks, const NcclUniqueId& id, int rank,
                                     bool blocking) {
  return world_.state_->initRank(comm, nranks, id, rank, blocking);
}

NcclResult FakeNcclApi::commGetAsyncError(NcclComm comm, NcclResult* asyncError) {
  return world_.state_->asyncError(comm, asyncError);
}

NcclResult FakeNcclApi::commAbort(NcclComm comm) { return world_.state_->abort(comm); }

NcclResult FakeNcclApi::commDestroy(NcclComm comm) { return world_.state_->destroy(comm); }

NcclResult FakeNcclApi::allReduce(const void* send, void* recv, size_t count, DataType type,
                                  ReduceOp op, NcclComm comm, gpu::CudaStream) {
  world_.state_->called();
  const Part part{Kind::kAllReduce, send, recv, count, type, op, 0};
  return groups_->run(mutex_, false, [=] { return world_.state_->collective(comm, part); });
}

NcclResult FakeNcclApi::broadcast(const void* send, void* recv, size_t count, DataType type,
                                  int root, NcclComm comm, gpu::CudaStream) {
  world_.state_->called();
  const Part part{Kind::kBroadcast, send, recv, count, type, ReduceOp::kSum, root};
  return groups_->run(mutex_, false, [=] { return world_.state_->collective(comm, part); });
}

NcclResult FakeNcclApi::allGather(const void* send, void* recv, size_t sendCount, DataType type,
                                  NcclComm comm, gpu::CudaStream) {
  world_.state_->called();
  const Part part{Kind::kAllGather, send, recv, sendCount, type, ReduceOp::kSum, 0};
  return groups_->run(mutex_, false, [=] { return world_.state_->collective(comm, part); });
}

NcclResult FakeNcclApi::reduceScatter(const void* send, void* recv, size_t recvCount, DataType type,
                                      ReduceOp op, NcclComm comm, gpu::CudaStream) {
  world_.state_->called();
  const Part part{Kind::kReduceScatter, send, recv, recvCount, type, op, 0};
  return groups_->run(mutex_, false, [=] { return world_.state_->collective(comm, part); });
}

NcclResult FakeNcclApi::send(const void* buffer, size_t count, DataType type, int peer,
                             NcclComm comm, gpu::CudaStream) {
  world_.state_->called();
  return groups_->run(mutex_, true,
                      [=] { return world_.state_->send(buffer, count, type, peer, comm); });
}

NcclResult FakeNcclApi::recv(void* buffer, size_t count, DataType type, int peer, NcclComm comm,
                             gpu::CudaStream) {
  world_.state_->called();
  return groups_->run(mutex_, false,
                      [=] { return world_.state_->recv(buffer, count, type, peer, comm); });
}

NcclResult FakeNcclApi::groupStart() {
  world_.state_->called();
  std::lock_guard<std::mutex> lock(mutex_);
  ++groups_->byThread[std::this_thread::get_id()].depth;
  return NcclResult::kSuccess;
}

NcclResult FakeNcclApi::groupEnd() {
  world_.state_->called();
  std::vector<std::pair<bool, std::function<NcclResult()>>> calls;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = groups_->byThread.find(std::this_thread::get_id());
    if (it == groups_->byThread.end() || it->second.depth == 0) {
      return NcclResult::kInvalidUsage;
    }
    if (--it->second.depth > 0) return NcclResult::kSuccess;
    calls = std::move(it->second.calls);
    groups_->byThread.erase(it);
  }
  // Sends first: they only deposit data, so every recv of the group finds its message whatever
  // order the ranks queued their calls in.
  NcclResult result = NcclResult::kSuccess;
  for (bool sends : {true, false}) {
    for (auto& [isSend, call] : calls) {
      if (isSend != sends) continue;
      const NcclResult r = call();
      if (result == NcclResult::kSuccess) result = r;
    }
  }
  return result;
}

std::string FakeNcclApi::errorString(NcclResult result) {
  // NCCL's own texts (ncclGetErrorString).
  switch (result) {
    case NcclResult::kSuccess:
      return "no error";
    case NcclResult::kUnhandledCudaError:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case NcclResult::kSystemError:
      return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case NcclResult::kInternalError:
      return "internal error - please report this issue to the NCCL developers";
    case NcclResult::kInvalidArgument:
      return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case NcclResult::kInvalidUsage:
      return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case NcclResult::kRemoteError:
      return "remote process exited or there was a network error";
    case NcclResult::kInProgress:
      return "NCCL operation in progress";
  }
  return "unknown result code";
}

std::string FakeNcclApi::lastError(NcclComm comm) { return world_.state_->lastError(comm); }

int FakeNcclApi::uniqueIdCalls() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return uniqueIdCalls_;
}

}  // namespace hvd::test
