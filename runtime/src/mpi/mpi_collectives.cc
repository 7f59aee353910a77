#include "mpi/mpi_collectives.h"

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <tuple>

#include "collectives/reduce.h"
#include "collectives/validate.h"
#include "hvd/error.hpp"
#include "hvd_support/logging.h"

namespace hvd::mpi {
namespace {

using Clock = std::chrono::steady_clock;

bool overlaps(const void* a, size_t aBytes, const void* b, size_t bBytes) {
  const auto* x = static_cast<const uint8_t*>(a);
  const auto* y = static_cast<const uint8_t*>(b);
  return aBytes > 0 && bBytes > 0 && x < y + bBytes && y < x + aBytes;
}

std::vector<uint64_t> wide(const std::vector<size_t>& counts) {
  return std::vector<uint64_t>(counts.begin(), counts.end());
}

coll::Descriptor describeAllreduce(size_t count, DataType type, ReduceOp op,
                                   const std::string& invalid) {
  coll::Descriptor d = coll::describe(coll::CollectiveKind::kAllreduce, type, count);
  d.op = static_cast<uint8_t>(op);
  if (!invalid.empty()) d.flags = coll::kInvalid;
  return d;
}

// MPI has no Adasum: the runtime and the engine run it over hvd's own transports
// (collectives/adasum.h) and never hand it here.
void validateMpiAllreduceOp(ReduceOp op, DataType type) {
  coll::validateAllreduceOp("allreduce", op, type);
  if (op == ReduceOp::kAdasum) {
    throw InvalidArgumentError(
        "allreduce: op adasum does not run over MPI (HVD_CPU_BACKEND=mpi); hvd::allreduce and "
        "the engine run it over hvd's own transports");
  }
}

}  // namespace

// Ends the job when one MPI call outlives the timeout: nothing else can get a rank out of a
// blocking MPI collective whose peers never arrive.
class MpiCollectives::Watchdog {
 public:
  Watchdog(const hvd_mpi_plugin_v1& api, hvd_mpi_comm* comm, int rank,
           std::chrono::milliseconds timeout)
      : api_(api), comm_(comm), rank_(rank), timeout_(timeout), thread_([this] { loop(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  void begin(const char* op) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      op_ = op;
      since_ = Clock::now();
      ++sequence_;
    }
    cv_.notify_all();
  }
  void end() {
    std::lock_guard<std::mutex> lock(mutex_);
    op_ = nullptr;
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_) {
      if (op_ == nullptr) {
        cv_.wait(lock, [&] { return stop_ || op_ != nullptr; });
        continue;
      }
      const uint64_t watched = sequence_;
      const auto deadline = since_ + timeout_;
      if (cv_.wait_until(lock, deadline,
                         [&] { return stop_ || op_ == nullptr || sequence_ != watched; })) {
        continue;
      }
      const double seconds = std::chrono::duration<double>(timeout_).count();
      logging::get("coll")->error(
          "mpi {} on rank {} has not completed after {} s (HVD_TIMEOUT; a peer is stopped, "
          "slow, or never called it): an MPI call cannot be interrupted, so the job is aborted "
          "(MPI_Abort, error code {})",
          op_, rank_, seconds, kAbortCodeTimeout);
      char err[1024] = {0};
      api_.abort(comm_, kAbortCodeTimeout, err, sizeof(err));
      logging::get("coll")->error("MPI_Abort returned: {}", err);
      return;
    }
  }

  const hvd_mpi_plugin_v1& api_;
  hvd_mpi_comm* comm_;
  const int rank_;
  const std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::condition_variable cv_;
  const char* op_ = nullptr;
  Clock::time_point since_;
  uint64_t sequence_ = 0;
  bool stop_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

class MpiCollectives::InFlight {
 public:
  InFlight(Watchdog* watchdog, const char* op) : watchdog_(watchdog) {
    if (watchdog_ != nullptr) watchdog_->begin(op);
  }
  ~InFlight() {
    if (watchdog_ != nullptr) watchdog_->end();
  }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  Watchdog* watchdog_;
};

MpiCollectives::MpiCollectives(std::unique_ptr<Comm> comm, std::chrono::milliseconds timeout)
    : MpiCollectives(comm->api(), comm->handle(), comm->rank(), comm->size(),
                     "mpi (" + comm->session().shortVersion() + ")", timeout) {
  comm_ = std::move(comm);
}

MpiCollectives::MpiCollectives(const hvd_mpi_plugin_v1& api, hvd_mpi_comm* comm, int rank, int size,
                               std::string description, std::chrono::milliseconds timeout)
    : api_(api),
      handle_(comm),
      rank_(rank),
      size_(size),
      description_(std::move(description)),
      watchdog_(timeout.count() > 0 ? std::make_unique<Watchdog>(api, comm, rank, timeout)
                                    : nullptr) {}

MpiCollectives::~MpiCollectives() {
  watchdog_.reset();  // before the communicator it watches
  comm_.reset();
}

void MpiCollectives::checkUsable() const {
  if (broken_.empty()) return;
  const std::string message = "an earlier MPI error left the collectives unusable: " + broken_;
  if (brokenKind_ == ErrorKind::kTimeout) throw TimeoutError(message);
  throw BackendError(message);
}

template <typename Call>
void MpiCollectives::run(const char* op, Call&& call) {
  char err[1024] = {0};
  int rc;
  {
    InFlight inFlight(watchdog_.get(), op);
    rc = call(err, sizeof(err));
  }
  if (rc == HVD_MPI_OK) return;
  const std::string message =
      std::string("mpi ") + op + " on rank " + std::to_string(rank_) + ": " + err;
  // A refused argument touched no MPI state; anything else leaves the communicator unusable.
  if (rc == HVD_MPI_ERR_ARGUMENT) throw InvalidArgumentError(message);
  broken_ = message;
  brokenKind_ = rc == HVD_MPI_ERR_TIMEOUT ? ErrorKind::kTimeout : ErrorKind::kBackend;
  if (brokenKind_ == ErrorKind::kTimeout) throw TimeoutError(message);
  throw BackendError(message);
}

uint8_t* MpiCollectives::scratch(size_t bytes) {
  if (scratch_.size() < bytes) scratch_.resize(bytes);
  return scratch_.data();
}

void MpiCollectives::agree(const char* op, const coll::Descriptor& mine,
                           const std::string& localError) {
  checkUsable();
  if (size_ == 1) {
    if (!localError.empty()) throw InvalidArgumentError(localError);
    return;
  }
  std::vector<coll::Descriptor> all(size_);
  all[rank_] = mine;
  const std::vector<uint64_t> sizes(size_, sizeof(coll::Descriptor));
  run(op, [&](char* err, size_t len) {
    return api_.allgatherv(handle_, nullptr, all.data(), sizes.data(),
                           static_cast<int>(DataType::kUInt8), err, len);
  });
  coll::checkDescriptors(op, all, rank_, localError);
}

int MpiCollectives::wireOp(ReduceOp op) {
  return static_cast<int>(op == ReduceOp::kAverage ? ReduceOp::kSum : op);
}

void MpiCollectives::allreduce(const void* input, void* output, size_t count, DataType type,
                               const AllreduceOptions& options) {
  const std::string invalid = coll::localError([&] {
    coll::validateBuffers("allreduce", input, output, count, type);
    validateMpiAllreduceOp(options.op, type);
  });
  agree("allreduce", describeAllreduce(count, type, options.op, invalid), invalid);
  if (count == 0) return;
  const size_t bytes = count * dataTypeSize(type);
  if (size_ == 1) {
    if (output != input) std::memmove(output, input, bytes);
    return;
  }
  const void* send = input;
  if (input == output) {
    send = nullptr;  // MPI_IN_PLACE
  } else if (overlaps(input, bytes, output, bytes)) {
    std::memmove(output, input, bytes);
    send = nullptr;
  }
  run("allreduce", [&](char* err, size_t len) {
    return api_.allreduce(handle_, send, output, count, static_cast<int>(type), wireOp(options.op),
                          err, len);
  });
  // The ring divides each chunk's final sum once, by the number of ranks: so does this.
  if (options.op == ReduceOp::kAverage) coll::finishAverage(type, output, count, size_);
}

void MpiCollectives::allreduceSegments(const std::vector<coll::AllreduceSegment>& segments,
                                       DataType type, const AllreduceOptions& options) {
  size_t count = 0;
  const std::string invalid = coll::localError([&] {
    for (const coll::AllreduceSegment& s : segments) {
      coll::validateBuffers("allreduce", s.input, s.output, s.count, type);
      count += s.count;
    }
    validateMpiAllreduceOp(options.op, type);
  });
  if (!invalid.empty()) {
    agree("allreduce", describeAllreduce(count, type, options.op, invalid), invalid);
  }
  checkUsable();
  if (segments.size() <= 1) {
    // One segment or none: the plain call (which still agrees with the peers).
    if (segments.empty()) return allreduce(nullptr, nullptr, 0, type, options);
    allreduce(segments[0].input, segments[0].output, count, type, options);
    return;
  }
  const size_t elem = dataTypeSize(type);
  if (size_ == 1) {
    for (const coll::AllreduceSegment& s : segments) {
      if (s.output != s.input) std::memmove(s.output, s.input, s.count * elem);
    }
    return;
  }
  // One MPI call per fused batch: pack, reduce in place, unpack.
  uint8_t* packed = scratch(count * elem);
  size_t at = 0;
  for (const coll::AllreduceSegment& s : segments) {
    if (s.count > 0) std::memcpy(packed + at, s.input, s.count * elem);
    at += s.count * elem;
  }
  allreduce(packed, packed, count, type, options);
  at = 0;
  for (const coll::AllreduceSegment& s : segments) {
    if (s.count > 0) std::memcpy(s.output, packed + at, s.count * elem);
    at += s.count * elem;
  }
}

void MpiCollectives::allgather(const void* input, size_t count, void* output,
                               const std::vector<size_t>& counts, DataType type, Algorithm) {
  const int n = size_;
  const int r = rank_;
  size_t total = 0;
  const std::string invalid = coll::localError(
      [&] { total = coll::validateAllgather(input, count, output, counts, type, r, n); });
  coll::Descriptor desc = coll::describe(coll::CollectiveKind::kAllgather, type, count);
  desc.extra = coll::countsChecksum(counts);
  if (!invalid.empty()) desc.flags = coll::kInvalid;
  agree("allgather", desc, invalid);
  size_t offset = 0;
  for (int p = 0; p < r; ++p) offset += counts[p];
  const size_t elem = dataTypeSize(type);
  auto* mine = static_cast<uint8_t*>(output) + offset * elem;
  const void* send = input;
  if (input == mine || n == 1 || total == 0 ||
      overlaps(input, count * elem, output, total * elem)) {
    if (count > 0 && input != mine) std::memmove(mine, input, count * elem);
    send = nullptr;  // MPI_IN_PLACE: this rank's block is in the output already
  }
  if (n == 1 || total == 0) return;
  const std::vector<uint64_t> wideCounts = wide(counts);
  run("allgather", [&](char* err, size_t len) {
    return api_.allgatherv(handle_, send, output, wideCounts.data(), static_cast<int>(type), err,
                           len);
  });
}

void MpiCollectives::broadcast(void* buffer, size_t count, DataType type,
                               const BroadcastOptions& options) {
  const std::string invalid = coll::localError([&] {
    coll::validateBuffers("broadcast", buffer, buffer, count, type);
    coll::validateRank("broadcast", "root", options.root, size_);
  });
  coll::Descriptor mine = coll::describe(coll::CollectiveKind::kBroadcast, type, count);
  mine.root = options.root;
  if (!invalid.empty()) mine.flags = coll::kInvalid;
  agree("broadcast", mine, invalid);
  if (count == 0 || size_ == 1) return;
  const uint64_t bytes = count * dataTypeSize(type);
  run("broadcast", [&](char* err, size_t len) {
    return api_.bcast(handle_, buffer, bytes, options.root, err, len);
  });
}

void MpiCollectives::reducescatter(const void* input, void* output, size_t count, DataType type,
                                   const ReducescatterOptions& options) {
  const int n = size_;
  std::vector<size_t> counts;
  const std::string invalid = coll::localError([&] {
    coll::validateBuffers("reducescatter", input, output, count, type);
    coll::validateOp("reducescatter", options.op);
    counts = coll::reducescatterCounts(count, n, options.rowElements);
  });
  coll::Descriptor desc = coll::describe(coll::CollectiveKind::kReducescatter, type, count);
  desc.op = static_cast<uint8_t>(options.op);
  desc.extra = options.rowElements;
  if (!invalid.empty()) desc.flags = coll::kInvalid;
  agree("reducescatter", desc, invalid);
  const size_t elem = dataTypeSize(type);
  const size_t mine = counts[rank_];
  if (n == 1) {
    if (count > 0 && output != input) std::memmove(output, input, count * elem);
    return;
  }
  if (count == 0) return;
  // MPI forbids the output to overlap the input (in place means something else to it): stage.
  const void* send = input;
  if (overlaps(output, mine * elem, input, count * elem)) {
    uint8_t* copy = scratch(count * elem);
    std::memcpy(copy, input, count * elem);
    send = copy;
  }
  const std::vector<uint64_t> wideCounts = wide(counts);
  run("reducescatter", [&](char* err, size_t len) {
    return api_.reduce_scatter(handle_, send, output, wideCounts.data(), static_cast<int>(type),
                               wireOp(options.op), err, len);
  });
  if (options.op == ReduceOp::kAverage) coll::finishAverage(type, output, mine, n);
}

void MpiCollectives::alltoall(const void* input, const std::vector<size_t>& sendCounts,
                              void* output, const std::vector<size_t>& recvCounts, DataType type) {
  const int n = size_;
  const int r = rank_;
  size_t sendTotal = 0, recvTotal = 0;
  const std::string invalid = coll::localError([&] {
    std::tie(sendTotal, recvTotal) =
        coll::validateAlltoall(input, sendCounts, output, recvCounts, type, r, n);
  });
  coll::Descriptor mine = coll::describe(coll::CollectiveKind::kAlltoall, type, sendTotal);
  if (invalid.empty()) {
    for (int p = 0; p < n; ++p) {
      mine.extra += sendCounts[p] * coll::countWeight(r, p);
      mine.extra2 += recvCounts[p] * coll::countWeight(p, r);
    }
  } else {
    mine.flags = coll::kInvalid;
  }
  agree("alltoall", mine, invalid);
  const size_t elem = dataTypeSize(type);
  if (n == 1) {
    if (sendTotal > 0 && input != output) std::memmove(output, input, sendTotal * elem);
    return;
  }
  const void* send = input;
  if (overlaps(input, sendTotal * elem, output, recvTotal * elem)) {
    uint8_t* copy = scratch(sendTotal * elem);
    std::memcpy(copy, input, sendTotal * elem);
    send = copy;
  }
  const std::vector<uint64_t> wideSend = wide(sendCounts);
  const std::vector<uint64_t> wideRecv = wide(recvCounts);
  run("alltoall", [&](char* err, size_t len) {
    return api_.alltoallv(handle_, send, wideSend.data(), output, wideRecv.data(),
                          static_cast<int>(type), err, len);
  });
}

void MpiCollectives::barrier() {
  // The allgather of the descriptors returns on a rank only once every rank has contributed:
  // it is the barrier.
  agree("barrier", coll::describe(coll::CollectiveKind::kBarrier, DataType::kUInt8, 0), "");
}

}  // namespace hvd::mpi
