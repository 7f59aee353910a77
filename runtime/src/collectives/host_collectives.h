// The blocking CPU collectives as one interface, so that what runs them is a choice
// (HVD_CPU_BACKEND): RingCollectives, hvd's own algorithms over a transport Context
// (collectives.h), or mpi::MpiCollectives, the same calls through the job's MPI
// (mpi/mpi_collectives.h). The public API (core/api.cc) and the engine's data collectives
// (engine/executor.cc) go through it; the engine's negotiation stays on hvd's own Context.
//
// Semantics are collectives.h's for both: every rank calls the same collective with matching
// arguments, in place or out of place, results bit-identical on every rank, averages summed
// then divided by the number of ranks (integers truncate). `algorithm` is a hint only the ring
// backend reads. One caller at a time per instance.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "collectives/collectives.h"
#include "hvd/hvd.hpp"

namespace hvd::coll {

class HostCollectives {
 public:
  virtual ~HostCollectives() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  virtual void allreduce(const void* input, void* output, size_t count, DataType type,
                         const AllreduceOptions& options) = 0;
  // One allreduce over the concatenation of `segments` (tensor fusion).
  virtual void allreduceSegments(const std::vector<AllreduceSegment>& segments, DataType type,
                                 const AllreduceOptions& options) = 0;
  virtual void allgather(const void* input, size_t count, void* output,
                         const std::vector<size_t>& counts, DataType type,
                         Algorithm algorithm = Algorithm::kAuto) = 0;
  virtual void broadcast(void* buffer, size_t count, DataType type,
                         const BroadcastOptions& options) = 0;
  virtual void reducescatter(const void* input, void* output, size_t count, DataType type,
                             const ReducescatterOptions& options) = 0;
  virtual void alltoall(const void* input, const std::vector<size_t>& sendCounts, void* output,
                        const std::vector<size_t>& recvCounts, DataType type) = 0;
  virtual void barrier() = 0;

  // Every rank's count (an allgather of one element each) and the counts each peer sends this
  // rank (an alltoall of one element each).
  virtual std::vector<size_t> allgatherCounts(size_t count);
  virtual std::vector<size_t> alltoallCounts(const std::vector<size_t>& sendCounts);

  // What carries the data, for logs and hvd::transportDescription(): "shm+tcp", "tcp", "self"
  // for the ring backend, "mpi (Open MPI v4.1.4)" for MPI.
  virtual std::string describe() const = 0;
};

// hvd's own collectives (collectives.h) over `context`, which must outlive this.
class RingCollectives final : public HostCollectives {
 public:
  explicit RingCollectives(Context& context) : context_(context) {}

  Context& context() const { return context_; }

  int rank() const override { return context_.rank(); }
  int size() const override { return context_.size(); }
  void allreduce(const void* input, void* output, size_t count, DataType type,
                 const AllreduceOptions& options) override;
  void allreduceSegments(const std::vector<AllreduceSegment>& segments, DataType type,
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
  std::vector<size_t> allgatherCounts(size_t count) override;
  std::vector<size_t> alltoallCounts(const std::vector<size_t>& sendCounts) override;
  std::string describe() const override;

 private:
  Context& context_;
};

}  // namespace hvd::coll
