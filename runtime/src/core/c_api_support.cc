#include "core/c_api_support.h"

namespace hvd::capi {

std::string& lastError() {
  thread_local std::string message;
  return message;
}

hvd_status statusOf(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidArgument:
      return HVD_ERR_INVALID_ARGUMENT;
    case ErrorKind::kTimeout:
      return HVD_ERR_TIMEOUT;
    case ErrorKind::kPeer:
      return HVD_ERR_PEER;
    case ErrorKind::kBackend:
      return HVD_ERR_BACKEND;
    case ErrorKind::kInternal:
      return HVD_ERR_INTERNAL;
  }
  return HVD_ERR_INTERNAL;
}

size_t checkedCount(const std::string& what, int64_t count) {
  if (count < 0) {
    throw InvalidArgumentError(what + " is negative (" + std::to_string(count) + ")");
  }
  return static_cast<size_t>(count);
}

DataType dataType(int type) {
  if (type < 0 || type >= kNumDataTypes) {
    throw InvalidArgumentError("unknown data type " + std::to_string(type) +
                               " (valid: HVD_INT8 .. HVD_FLOAT64, HVD_INT16)");
  }
  return static_cast<DataType>(type);
}

ReduceOp reduceOp(int op) {
  if (op < 0 || op >= kNumReduceOps) {
    throw InvalidArgumentError("unknown reduce op " + std::to_string(op) +
                               " (valid: HVD_SUM .. HVD_ADASUM)");
  }
  return static_cast<ReduceOp>(op);
}

}  // namespace hvd::capi
