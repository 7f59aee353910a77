#include "collectives/validate.h"

#include <limits>

#include "collectives/adasum.h"

namespace hvd::coll {

void validateBuffers(const char* op, const void* input, const void* output, size_t count,
                     DataType type) {
  const size_t elem = dataTypeSize(type);  // throws for an unknown type
  if (count > std::numeric_limits<size_t>::max() / 2 / elem) {
    throw InvalidArgumentError(std::string(op) + ": count " + std::to_string(count) +
                               " is too large");
  }
  if (count > 0 && (input == nullptr || output == nullptr)) {
    throw InvalidArgumentError(std::string(op) + ": null buffer for " + std::to_string(count) +
                               " elements");
  }
}

void validateOp(const char* op, ReduceOp reduceOp) {
  (void)reduceOpName(reduceOp);
  if (reduceOp == ReduceOp::kAdasum) {
    throw InvalidArgumentError(std::string(op) +
                               ": op adasum applies to allreduce only (it combines whole "
                               "vectors, not the elements of a shard)");
  }
}

void validateAllreduceOp(const char* op, ReduceOp reduceOp, DataType type) {
  (void)reduceOpName(reduceOp);
  if (reduceOp == ReduceOp::kAdasum && !adasumSupports(type)) {
    const std::string types = "float16, bfloat16, float32 and float64";
    throw InvalidArgumentError(std::string(op) + ": op adasum reduces " + types + ", not " +
                               dataTypeName(type));
  }
}

void validateRank(const char* op, const char* what, int rank, int size) {
  if (rank < 0 || rank >= size) {
    throw InvalidArgumentError(std::string(op) + ": " + what + " " + std::to_string(rank) +
                               " is not a rank (size " + std::to_string(size) + ")");
  }
}

void validateCountsPerRank(const char* op, const char* what, const std::vector<size_t>& counts,
                           int size) {
  if (static_cast<int>(counts.size()) != size) {
    throw InvalidArgumentError(std::string(op) + ": " + what + " has " +
                               std::to_string(counts.size()) + " entries for " +
                               std::to_string(size) + " ranks");
  }
}

size_t validateAllgather(const void* input, size_t count, const void* output,
                         const std::vector<size_t>& counts, DataType type, int rank, int size) {
  validateCountsPerRank("allgather", "counts", counts, size);
  if (counts[rank] != count) {
    throw InvalidArgumentError("allgather: counts[" + std::to_string(rank) +
                               "] = " + std::to_string(counts[rank]) +
                               " but this rank contributes " + std::to_string(count));
  }
  size_t total = 0;
  for (size_t c : counts) total += c;
  validateBuffers("allgather", input, output, total, type);
  return total;
}

std::pair<size_t, size_t> validateAlltoall(const void* input, const std::vector<size_t>& sendCounts,
                                           const void* output,
                                           const std::vector<size_t>& recvCounts, DataType type,
                                           int rank, int size) {
  validateCountsPerRank("alltoall", "sendCounts", sendCounts, size);
  validateCountsPerRank("alltoall", "recvCounts", recvCounts, size);
  size_t sendTotal = 0, recvTotal = 0;
  for (size_t c : sendCounts) sendTotal += c;
  for (size_t c : recvCounts) recvTotal += c;
  validateBuffers("alltoall", input, input, sendTotal, type);
  validateBuffers("alltoall", output, output, recvTotal, type);
  if (sendCounts[rank] != recvCounts[rank]) {
    throw InvalidArgumentError("alltoall: rank " + std::to_string(rank) + " sends itself " +
                               std::to_string(sendCounts[rank]) + " elements but expects " +
                               std::to_string(recvCounts[rank]));
  }
  return {sendTotal, recvTotal};
}

transport::Schedule& scheduleOf(transport::Context& ctx) {
  auto& schedule = ctx.schedule();
  schedule.clear();
  return schedule;
}

}  // namespace hvd::coll
