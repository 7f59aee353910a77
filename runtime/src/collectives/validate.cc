#include "collectives/validate.h"

#include <limits>

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

void validateOp(const char* op, ReduceOp reduceOp) { (void)reduceOpName(reduceOp); }

void validateRank(const char* op, const char* what, int rank, int size) {
  if (rank < 0 || rank >= size) {
    throw InvalidArgumentError(std::string(op) + ": " + what + " " + std::to_string(rank) +
                               " is not a rank (size " + std::to_string(size) + ")");
  }
}

transport::Schedule& scheduleOf(transport::Context& ctx) {
  auto& schedule = ctx.schedule();
  schedule.clear();
  return schedule;
}

}  // namespace hvd::coll
