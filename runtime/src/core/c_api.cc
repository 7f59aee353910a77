// The C ABI: converts arguments, calls the C++ API, and turns exceptions into status codes plus
// a thread-local message. Nothing throws across this boundary.
#include <string>
#include <vector>

#include "hvd/hvd.h"
#include "hvd/hvd.hpp"

namespace {

thread_local std::string lastError;

hvd_status statusOf(hvd::ErrorKind kind) {
  switch (kind) {
    case hvd::ErrorKind::kInvalidArgument:
      return HVD_ERR_INVALID_ARGUMENT;
    case hvd::ErrorKind::kTimeout:
      return HVD_ERR_TIMEOUT;
    case hvd::ErrorKind::kPeer:
      return HVD_ERR_PEER;
    case hvd::ErrorKind::kBackend:
      return HVD_ERR_BACKEND;
    case hvd::ErrorKind::kInternal:
      return HVD_ERR_INTERNAL;
  }
  return HVD_ERR_INTERNAL;
}

template <typename F>
hvd_status guarded(F&& body) {
  try {
    body();
    lastError.clear();
    return HVD_OK;
  } catch (const hvd::Error& e) {
    lastError = e.what();
    return statusOf(e.kind());
  } catch (const std::bad_alloc&) {
    lastError = "out of memory";
    return HVD_ERR_BACKEND;
  } catch (const std::exception& e) {
    lastError = e.what();
    return HVD_ERR_INTERNAL;
  } catch (...) {
    lastError = "unknown error";
    return HVD_ERR_INTERNAL;
  }
}

size_t checkedCount(const char* what, int64_t count) {
  if (count < 0) {
    throw hvd::InvalidArgumentError(std::string(what) + " is negative (" + std::to_string(count) +
                                    ")");
  }
  return static_cast<size_t>(count);
}

std::vector<size_t> checkedCounts(const char* what, const int64_t* counts) {
  if (counts == nullptr) throw hvd::InvalidArgumentError(std::string(what) + " is null");
  std::vector<size_t> out(hvd::size());
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = checkedCount((std::string(what) + "[" + std::to_string(i) + "]").c_str(), counts[i]);
  }
  return out;
}

hvd::DataType dataType(int type) {
  if (type < 0 || type >= hvd::kNumDataTypes) {
    throw hvd::InvalidArgumentError("unknown data type " + std::to_string(type) +
                                    " (valid: HVD_INT8 .. HVD_FLOAT64, HVD_INT16)");
  }
  return static_cast<hvd::DataType>(type);
}

hvd::ReduceOp reduceOp(int op) {
  if (op < 0 || op >= hvd::kNumReduceOps) {
    throw hvd::InvalidArgumentError("unknown reduce op " + std::to_string(op) +
                                    " (valid: HVD_SUM .. HVD_PRODUCT)");
  }
  return static_cast<hvd::ReduceOp>(op);
}

hvd_status query(int* out, int (*getter)()) {
  return guarded([&] {
    if (out == nullptr) throw hvd::InvalidArgumentError("output pointer is null");
    *out = getter();
  });
}

}  // namespace

extern "C" {

const char* hvd_last_error(void) { return lastError.c_str(); }

const char* hvd_status_name(hvd_status status) {
  switch (status) {
    case HVD_OK:
      return "ok";
    case HVD_ERR_INVALID_ARGUMENT:
      return "invalid argument";
    case HVD_ERR_TIMEOUT:
      return "timeout";
    case HVD_ERR_PEER:
      return "peer failure";
    case HVD_ERR_BACKEND:
      return "backend error";
    case HVD_ERR_INTERNAL:
      return "internal error";
  }
  return "unknown status";
}

hvd_status hvd_init(void) {
  return guarded([] { hvd::init(); });
}
hvd_status hvd_shutdown(void) {
  return guarded([] { hvd::shutdown(); });
}
int hvd_is_initialized(void) { return hvd::isInitialized() ? 1 : 0; }

hvd_status hvd_rank(int* out) { return query(out, hvd::rank); }
hvd_status hvd_size(int* out) { return query(out, hvd::size); }
hvd_status hvd_local_rank(int* out) { return query(out, hvd::localRank); }
hvd_status hvd_local_size(int* out) { return query(out, hvd::localSize); }
hvd_status hvd_cross_rank(int* out) { return query(out, hvd::crossRank); }
hvd_status hvd_cross_size(int* out) { return query(out, hvd::crossSize); }

hvd_status hvd_allreduce(const void* input, void* output, int64_t count, int type, int op) {
  return guarded([&] {
    hvd::AllreduceOptions options;
    options.op = reduceOp(op);
    hvd::allreduce(input, output, checkedCount("count", count), dataType(type), options);
  });
}

hvd_status hvd_allgather(const void* input, int64_t count, void* output, const int64_t* counts,
                         int type) {
  return guarded([&] {
    hvd::allgather(input, checkedCount("count", count), output, checkedCounts("counts", counts),
                   dataType(type));
  });
}

hvd_status hvd_broadcast(void* buffer, int64_t count, int type, int root) {
  return guarded([&] {
    hvd::BroadcastOptions options;
    options.root = root;
    hvd::broadcast(buffer, checkedCount("count", count), dataType(type), options);
  });
}

hvd_status hvd_reducescatter(const void* input, void* output, int64_t count, int type, int op,
                             int64_t row_elements) {
  return guarded([&] {
    hvd::ReducescatterOptions options;
    options.op = reduceOp(op);
    options.rowElements = checkedCount("row_elements", row_elements);
    hvd::reducescatter(input, output, checkedCount("count", count), dataType(type), options);
  });
}

hvd_status hvd_alltoall(const void* input, const int64_t* send_counts, void* output,
                        const int64_t* recv_counts, int type) {
  return guarded([&] {
    hvd::alltoall(input, checkedCounts("send_counts", send_counts), output,
                  checkedCounts("recv_counts", recv_counts), dataType(type));
  });
}

hvd_status hvd_barrier(void) {
  return guarded([] { hvd::barrier(); });
}

int hvd_nccl_built(void) { return hvd::ncclBuilt() ? 1 : 0; }

const char* hvd_nccl_version(void) {
  thread_local std::string version;
  try {
    version = hvd::ncclVersion();
  } catch (...) {
    version.clear();  // only std::bad_alloc can get here; "" means "no NCCL"
  }
  return version.c_str();
}

}  // extern "C"
