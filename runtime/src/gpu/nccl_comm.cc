#include "gpu/nccl_comm.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "hvd/error.hpp"
#include "hvd_support/logging.h"

namespace hvd::gpu {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// How long one store wait may block before the bootstrap looks at spec.cancel again.
constexpr milliseconds kCancelSlice{50};

std::shared_ptr<spdlog::logger> log() { return logging::get("gpu"); }

// "rank 1 (host h1)": who failed, in every message.
std::string where(const CommSpec& spec) {
  return "rank " + std::to_string(spec.rank) + " (host " + (spec.host.empty() ? "?" : spec.host) +
         ")";
}

// "ncclSystemError: <error string> (<last error>)": what NCCL says about a failure. The last
// error is NCCL's own text and cannot contain the unique id (NCCL never prints it).
std::string describe(NcclApi& api, NcclResult result, NcclComm comm) {
  std::string text = std::string(ncclResultName(result)) + ": " + api.errorString(result);
  const std::string last = api.lastError(comm);
  if (!last.empty()) text += " (" + last + ")";
  return text;
}

std::string failure(NcclApi& api, const CommSpec& spec, const char* call, NcclResult result,
                    NcclComm comm) {
  return std::string("NCCL: ") + call + " of communicator '" + spec.name + "' failed on " +
         where(spec) + ": " + describe(api, result, comm);
}

[[noreturn]] void throwCancelled(const CommSpec& spec) {
  throw BackendError("NCCL: creation of communicator '" + spec.name + "' on " + where(spec) +
                     " was cancelled: the job's NCCL communicators were aborted");
}

bool cancelled(const CommSpec& spec) { return spec.cancel != nullptr && spec.cancel->load(); }

void validate(const CommSpec& spec) {
  if (spec.name.empty()) throw InvalidArgumentError("NCCL communicator without a name");
  if (spec.size < 1 || spec.rank < 0 || spec.rank >= spec.size) {
    throw InvalidArgumentError("NCCL communicator '" + spec.name + "': rank " +
                               std::to_string(spec.rank) + " is not in [0, " +
                               std::to_string(spec.size) + ")");
  }
  if (spec.timeout.count() <= 0) {
    throw InvalidArgumentError("NCCL communicator '" + spec.name + "': timeout must be positive");
  }
}

// Rank 0's side of the id exchange: a fresh id, published under `key`.
NcclUniqueId publishId(NcclApi& api, store::Store& store, const CommSpec& spec,
                       const std::string& key) {
  NcclUniqueId id;
  const NcclResult result = api.getUniqueId(&id);
  if (result != NcclResult::kSuccess) {
    throw BackendError(failure(api, spec, "ncclGetUniqueId", result, nullptr));
  }
  store.set(key, store::Bytes(id.bytes.data(), id.bytes.size()));
  return id;
}

// The other ranks' side: waits for rank 0's id until `deadline` (in slices, so that a
// cancellation is seen within kCancelSlice).
NcclUniqueId readId(store::Store& store, const CommSpec& spec, const std::string& key,
                    Clock::time_point deadline) {
  store::Bytes value;
  for (;;) {
    const auto left =
        std::chrono::ceil<milliseconds>(std::max(deadline - Clock::now(), Clock::duration(0)));
    try {
      value = store.get(key, spec.cancel == nullptr ? left : std::min(left, kCancelSlice));
      break;
    } catch (const TimeoutError&) {
      if (cancelled(spec)) throwCancelled(spec);
      if (Clock::now() < deadline) continue;
      throw TimeoutError("NCCL: communicator '" + spec.name + "': " + where(spec) +
                         " timed out after " + std::to_string(spec.timeout.count()) +
                         " ms waiting for rank 0 to publish the NCCL unique id: store key '" + key +
                         "' is absent (rank 0 failed, hung or never reached this communicator)");
    }
  }
  NcclUniqueId id;
  if (value.size() != id.bytes.size()) {
    // The value itself is not shown: it is (part of) a secret.
    throw BackendError("NCCL: communicator '" + spec.name + "': " + where(spec) +
                       " read a unique id of " + std::to_string(value.size()) +
                       " bytes from store key '" + key + "', expected " +
                       std::to_string(id.bytes.size()));
  }
  std::copy(value.begin(), value.end(), id.bytes.begin());
  return id;
}

// Aborts a communicator whose init did not complete, unless released.
class InitGuard {
 public:
  InitGuard(NcclApi& api, NcclComm& comm) : api_(api), comm_(comm) {}
  ~InitGuard() {
    if (comm_ != nullptr && !released_) api_.commAbort(comm_);
  }
  InitGuard(const InitGuard&) = delete;
  InitGuard& operator=(const InitGuard&) = delete;
  void release() { released_ = true; }

 private:
  NcclApi& api_;
  NcclComm& comm_;
  bool released_ = false;
};

// Non-blocking ncclCommInitRank, polled until done, failed or `deadline`.
NcclComm initRank(NcclApi& api, const CommSpec& spec, const NcclUniqueId& id,
                  Clock::time_point deadline) {
  NcclComm comm = nullptr;
  InitGuard guard(api, comm);
  const NcclResult started = api.commInitRank(&comm, spec.size, id, spec.rank, false);
  if (started != NcclResult::kSuccess && started != NcclResult::kInProgress) {
    throw BackendError(failure(api, spec, "ncclCommInitRank", started, comm));
  }
  if (comm == nullptr) {
    throw InternalError("NCCL: ncclCommInitRank of communicator '" + spec.name + "' on " +
                        where(spec) + " returned " + ncclResultName(started) +
                        " but no communicator");
  }
  for (;;) {
    NcclResult state = NcclResult::kInProgress;
    const NcclResult polled = api.commGetAsyncError(comm, &state);
    if (polled != NcclResult::kSuccess) {
      throw BackendError(failure(api, spec, "ncclCommGetAsyncError", polled, comm));
    }
    if (state == NcclResult::kSuccess) break;
    if (state != NcclResult::kInProgress) {
      throw BackendError(failure(api, spec, "ncclCommInitRank", state, comm));
    }
    if (cancelled(spec)) throwCancelled(spec);
    const auto now = Clock::now();
    if (now >= deadline) {
      throw TimeoutError("NCCL: ncclCommInitRank of communicator '" + spec.name +
                         "' timed out on " + where(spec) + " after " +
                         std::to_string(spec.timeout.count()) + " ms: not all of its " +
                         std::to_string(spec.size) +
                         " ranks joined (a rank failed, hung or never reached this "
                         "communicator); the communicator was aborted");
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(spec.pollInterval, deadline - now));
  }
  guard.release();
  return comm;
}

}  // namespace

std::string commIdKey(const CommSpec& spec) {
  return spec.keyPrefix + "nccl/" + std::to_string(spec.generation) + "/" + spec.name + "/id";
}

NcclCommunicator::NcclCommunicator(NcclApi& api, NcclComm comm, CommSpec spec)
    : api_(api), comm_(comm), spec_(std::move(spec)) {}

NcclCommunicator::~NcclCommunicator() {
  std::lock_guard<std::mutex> lock(abortMutex_);
  if (aborted_.load()) return;
  const bool broken = broken_.load();
  const NcclResult result = broken ? api_.commAbort(comm_) : api_.commDestroy(comm_);
  if (result != NcclResult::kSuccess) {
    log()->warn(
        "{}", failure(api_, spec_, broken ? "ncclCommAbort" : "ncclCommDestroy", result, nullptr));
  }
}

void NcclCommunicator::abort() {
  std::lock_guard<std::mutex> lock(abortMutex_);
  if (aborted_.load()) return;
  // Set first, so that a collective failing because of this abort says so (check()).
  aborted_.store(true);
  const NcclResult result = api_.commAbort(comm_);
  if (result != NcclResult::kSuccess) {
    log()->warn("{}", failure(api_, spec_, "ncclCommAbort", result, nullptr));
  } else {
    log()->info("NCCL communicator '{}' aborted on {}", spec_.name, where(spec_));
  }
}

void NcclCommunicator::check(NcclResult result, const char* call) {
  if (result == NcclResult::kSuccess || result == NcclResult::kInProgress) return;
  broken_.store(true);
  if (aborted_.load()) {
    // The handle is gone: NCCL's last error would describe another call.
    throw BackendError(std::string("NCCL: ") + call + " on communicator '" + spec_.name +
                       "' failed on " + where(spec_) + ": " + ncclResultName(result) +
                       ": the communicator was aborted");
  }
  throw BackendError(std::string("NCCL: ") + call + " on communicator '" + spec_.name +
                     "' failed on " + where(spec_) + ": " + describe(api_, result, comm_));
}

NcclResult NcclCommunicator::asyncError() {
  // Under the abort mutex: ncclCommGetAsyncError must not race with the abort freeing comm_.
  std::lock_guard<std::mutex> lock(abortMutex_);
  if (aborted_.load()) return NcclResult::kSystemError;
  NcclResult state = NcclResult::kSuccess;
  const NcclResult polled = api_.commGetAsyncError(comm_, &state);
  return polled != NcclResult::kSuccess ? polled : state;
}

std::unique_ptr<NcclCommunicator> bootstrapComm(NcclApi& api, store::Store& store,
                                                const CommSpec& spec) {
  validate(spec);
  const auto start = Clock::now();
  const auto deadline = store::deadlineAfter(spec.timeout);
  const std::string key = commIdKey(spec);
  log()->debug("NCCL communicator '{}': {} of {} bootstrapping (id key '{}')", spec.name,
               where(spec), spec.size, key);

  const NcclUniqueId id =
      spec.rank == 0 ? publishId(api, store, spec, key) : readId(store, spec, key, deadline);
  NcclComm comm = initRank(api, spec, id, deadline);
  auto communicator = std::make_unique<NcclCommunicator>(api, comm, spec);

  if (spec.rank == 0) {
    // Every rank has read the id (the init completes only once all joined with it): it need
    // not stay in the store. A failure here leaves a dead id behind, which is harmless.
    try {
      store.erase(key);
    } catch (const Error& e) {
      log()->warn("NCCL communicator '{}': could not erase store key '{}': {}", spec.name, key,
                  e.what());
    }
  }
  log()->info("NCCL communicator '{}' ready: {} of {} ({} ms)", spec.name, where(spec), spec.size,
              std::chrono::duration_cast<milliseconds>(Clock::now() - start).count());
  return communicator;
}

}  // namespace hvd::gpu
