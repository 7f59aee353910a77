// The C ABI of hvd.h: converts arguments, calls the C++ API, and turns exceptions into status codes
// plus a thread-local message. Nothing throws across this boundary.
#include <string>
#include <vector>

#include "core/c_api_support.h"
#include "hvd/hvd.h"
#include "hvd/hvd.hpp"

namespace {

using hvd::capi::checkedCount;
using hvd::capi::dataType;
using hvd::capi::guarded;
using hvd::capi::reduceOp;

std::vector<size_t> checkedCounts(const char* what, const int64_t* counts) {
  if (counts == nullptr) throw hvd::InvalidArgumentError(std::string(what) + " is null");
  std::vector<size_t> out(hvd::size());
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = checkedCount(std::string(what) + "[" + std::to_string(i) + "]", counts[i]);
  }
  return out;
}

hvd_status query(int* out, int (*getter)()) {
  return guarded([&] {
    if (out == nullptr) throw hvd::InvalidArgumentError("output pointer is null");
    *out = getter();
  });
}

}  // namespace

extern "C" {

const char* hvd_last_error(void) { return hvd::capi::lastError().c_str(); }

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
hvd_status hvd_is_homogeneous(int* out) {
  return query(out, [] { return hvd::isHomogeneous() ? 1 : 0; });
}

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

int hvd_elastic_enabled(void) {
  try {
    return hvd::elasticEnabled() ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

int hvd_elastic_round(void) { return hvd::elasticRound(); }

hvd_status hvd_elastic_pending(int* round, int* change) {
  return guarded([&] {
    if (round == nullptr || change == nullptr) {
      throw hvd::InvalidArgumentError("output pointer is null");
    }
    const std::pair<int, int> pending = hvd::elasticPending();
    *round = pending.first;
    *change = pending.second;
  });
}

int hvd_elastic_removed(void) { return hvd::elasticRemoved() ? 1 : 0; }

const char* hvd_cpu_backend(void) {
  try {
    const std::string backend = hvd::cpuBackend();
    return backend == "mpi" ? "mpi" : backend == "hvd" ? "hvd" : "";
  } catch (...) {
    return "";  // only std::bad_alloc can get here
  }
}

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
