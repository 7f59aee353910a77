// The CPU collectives over the job's MPI (HVD_CPU_BACKEND=mpi), for sites whose MPI is tuned
// for their fabric: each call is one MPI collective through the plugin (mpi/plugin_abi.h) on a
// communicator of its own, with hvd's semantics kept on top of it:
//  * averages are MPI sums divided by the number of ranks afterwards (coll::finishAverage), as
//    the ring divides; float16/bfloat16 reduce in float32 (the plugin's user ops);
//  * reducescatter splits by rows as coll::reducescatterCounts does (the first rows % size
//    ranks get one more); allgather and alltoall take hvd's uneven counts;
//  * in place and out of place, with any overlap MPI forbids staged through a scratch buffer;
//    allreduceSegments packs the segments into it (one MPI call per fused batch);
//  * arguments are checked as the ring checks them (same messages), before MPI sees them, and
//    every rank's call is checked against every other's (coll/agreement.h) by an allgather of
//    the descriptors before the data call: MPI with mismatched counts is undefined behaviour,
//    so a mismatch is an InvalidArgumentError on every rank and MPI never sees the bad call;
//  * MPI's results are the same bits on every rank for commutative operations;
//  * the first failed call leaves the instance unusable: later calls throw its error, as a
//    broken transport Context does.
// MPI calls cannot be interrupted, so the deadline of a call (HVD_TIMEOUT) is enforced by a
// watchdog thread: a call still in flight after it ends the job with MPI_Abort (error code
// 124), after logging which collective on which rank did not complete. One caller at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "collectives/agreement.h"
#include "collectives/host_collectives.h"
#include "mpi/mpi_api.h"

namespace hvd::mpi {

inline constexpr int kAbortCodeTimeout = 124;

class MpiCollectives final : public coll::HostCollectives {
 public:
  // Over `comm` (kept). `timeout` zero: no watchdog.
  MpiCollectives(std::unique_ptr<Comm> comm, std::chrono::milliseconds timeout);
  // Over a plugin table and communicator handle the caller keeps alive (tests use a fake);
  // `description` is what describe() returns.
  MpiCollectives(const hvd_mpi_plugin_v1& api, hvd_mpi_comm* comm, int rank, int size,
                 std::string description, std::chrono::milliseconds timeout);
  ~MpiCollectives() override;
  MpiCollectives(const MpiCollectives&) = delete;
  MpiCollectives& operator=(const MpiCollectives&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void allreduce(const void* input, void* output, size_t count, DataType type,
                 const AllreduceOptions& options) override;
  void allreduceSegments(const std::vector<coll::AllreduceSegment>& segments, DataType type,
                         const AllreduceOptions& options) override;
  void allgather(const void* input, size_t count, void* output, const std::vector<size_t>& counts,
                 DataType type, Algorithm algorithm) override;
  void broadcast(void* buffer, size_t count, DataType type,
                 const BroadcastOptions& options) override;
  void reducescatter(const void* input, void* output, size_t count, DataType type,
                     const ReducescatterOptions& options) override;
  void alltoall(const void* input, const std::vector<size_t>& sendCounts, void* output,
                const std::vector<size_t>& recvCounts, DataType type) override;
  void barrier() override;
  std::string describe() const override { return description_; }

 private:
  class Watchdog;
  class InFlight;

  // Throws the error that broke this instance, if any.
  void checkUsable() const;
  // Runs one plugin call under the watchdog; a failure breaks the instance and throws.
  template <typename Call>
  void run(const char* op, Call&& call);
  uint8_t* scratch(size_t bytes);
  // Allgathers the descriptors and throws on every rank when they disagree (or when
  // `localError`, this rank's own argument error, is set).
  void agree(const char* op, const coll::Descriptor& mine, const std::string& localError);
  // MPI_SUM for kAverage (divided afterwards), else the op itself.
  static int wireOp(ReduceOp op);

  std::unique_ptr<Comm> comm_;  // null for the table-and-handle form
  const hvd_mpi_plugin_v1& api_;
  hvd_mpi_comm* handle_;
  const int rank_;
  const int size_;
  const std::string description_;
  std::string broken_;  // the first failure's message
  ErrorKind brokenKind_ = ErrorKind::kBackend;
  std::vector<uint8_t> scratch_;
  std::unique_ptr<Watchdog> watchdog_;
};

}  // namespace hvd::mpi
