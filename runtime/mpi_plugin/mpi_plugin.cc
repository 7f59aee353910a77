// libhvd_mpi.so: MPI behind the C table of mpi/plugin_abi.h. libhvd loads it with dlopen, so
// only this file links libmpi. Every MPI call is checked; communicators return errors
// (MPI_ERRORS_RETURN) and each error becomes the call's name plus MPI_Error_string's text.
//
// float16 and bfloat16 have no MPI type: they travel as MPI_UINT16_T and reduce through user
// ops (one per format and op), computed in float32 and rounded once per combination, as
// libhvd's own kernels (collectives/reduce.cc) compute them.
#include <mpi.h>
#include <time.h>

#include <algorithm>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

#include "common/half.h"
#include "hvd/types.hpp"
#include "mpi/plugin_abi.h"

struct hvd_mpi_comm {
  MPI_Comm comm;
};

namespace {

// hvd::DataType and hvd::ReduceOp values (hvd/types.hpp), checked against them below.
enum : int {
  kInt8,
  kUInt8,
  kInt32,
  kInt64,
  kFloat16,
  kBFloat16,
  kFloat32,
  kFloat64,
  kInt16,
  kNumTypes
};
enum : int { kSum, kAverage, kMin, kMax, kProduct };
static_assert(kInt16 == static_cast<int>(hvd::DataType::kInt16) &&
                  kFloat64 == static_cast<int>(hvd::DataType::kFloat64) &&
                  kNumTypes == hvd::kNumDataTypes,
              "the plugin's type codes must be hvd::DataType's values");
static_assert(kProduct == static_cast<int>(hvd::ReduceOp::kProduct),
              "the plugin's op codes must be hvd::ReduceOp's values");

// One MPI call moves at most this many elements (MPI counts are int).
constexpr uint64_t kMaxChunk = uint64_t{1} << 30;

std::mutex g_mutex;  // guards init/finalize and the state below
bool g_initializedHere = false;
bool g_opsCreated = false;
MPI_Op g_halfOps[2][5];  // [float16, bfloat16][op]

void setError(char* err, size_t len, const char* format, ...) {
  if (err == nullptr || len == 0) return;
  va_list args;
  va_start(args, format);
  std::vsnprintf(err, len, format, args);
  va_end(args);
}

// Converts an MPI return code into the plugin's: the error class, with the message.
int mpiError(int rc, const char* what, char* err, size_t len) {
  char text[MPI_MAX_ERROR_STRING] = {0};
  int textLen = 0;
  if (MPI_Error_string(rc, text, &textLen) != MPI_SUCCESS) {
    std::snprintf(text, sizeof(text), "MPI error %d", rc);
  }
  int cls = rc;
  if (MPI_Error_class(rc, &cls) != MPI_SUCCESS || cls == MPI_SUCCESS) cls = rc;
  setError(err, len, "%s: %s", what, text);
  return cls > 0 ? cls : 1;
}

#define HVD_MPI_CHECK(call, what)                                             \
  do {                                                                        \
    const int hvd_rc_ = (call);                                               \
    if (hvd_rc_ != MPI_SUCCESS) return mpiError(hvd_rc_, what, err, err_len); \
  } while (0)

int argumentError(char* err, size_t len, const char* format, ...) {
  if (err != nullptr && len > 0) {
    va_list args;
    va_start(args, format);
    std::vsnprintf(err, len, format, args);
    va_end(args);
  }
  return HVD_MPI_ERR_ARGUMENT;
}

template <float (*Load)(uint16_t), uint16_t (*Store)(float), int Op>
void halfOp(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* acc = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = Load(acc[i]);
    const float y = Load(a[i]);
    float r;
    switch (Op) {
      case kSum:
        r = x + y;
        break;
      case kProduct:
        r = x * y;
        break;
      case kMin:
        r = y < x ? y : x;
        break;
      default:  // kMax
        r = x < y ? y : x;
        break;
    }
    acc[i] = Store(r);
  }
}

int createHalfOps(char* err, size_t err_len) {
  if (g_opsCreated) return HVD_MPI_OK;
  using hvd::bfloat16ToFloat;
  using hvd::floatToBfloat16;
  using hvd::floatToHalf;
  using hvd::halfToFloat;
  MPI_User_function* fns[2][5] = {
      {halfOp<halfToFloat, floatToHalf, kSum>, nullptr, halfOp<halfToFloat, floatToHalf, kMin>,
       halfOp<halfToFloat, floatToHalf, kMax>, halfOp<halfToFloat, floatToHalf, kProduct>},
      {halfOp<bfloat16ToFloat, floatToBfloat16, kSum>, nullptr,
       halfOp<bfloat16ToFloat, floatToBfloat16, kMin>,
       halfOp<bfloat16ToFloat, floatToBfloat16, kMax>,
       halfOp<bfloat16ToFloat, floatToBfloat16, kProduct>}};
  for (int f = 0; f < 2; ++f) {
    for (int o = 0; o < 5; ++o) {
      g_halfOps[f][o] = MPI_OP_NULL;
      if (fns[f][o] == nullptr) continue;
      HVD_MPI_CHECK(MPI_Op_create(fns[f][o], /*commute=*/1, &g_halfOps[f][o]), "MPI_Op_create");
    }
  }
  g_opsCreated = true;
  return HVD_MPI_OK;
}

bool toMpiType(int dtype, MPI_Datatype* out) {
  switch (dtype) {
    case kInt8:
      *out = MPI_INT8_T;
      return true;
    case kUInt8:
      *out = MPI_UINT8_T;
      return true;
    case kInt16:
      *out = MPI_INT16_T;
      return true;
    case kInt32:
      *out = MPI_INT32_T;
      return true;
    case kInt64:
      *out = MPI_INT64_T;
      return true;
    case kFloat16:
    case kBFloat16:
      *out = MPI_UINT16_T;
      return true;
    case kFloat32:
      *out = MPI_FLOAT;
      return true;
    case kFloat64:
      *out = MPI_DOUBLE;
      return true;
    default:
      return false;
  }
}

size_t typeSize(int dtype) {
  switch (dtype) {
    case kInt8:
    case kUInt8:
      return 1;
    case kInt16:
    case kFloat16:
    case kBFloat16:
      return 2;
    case kInt32:
    case kFloat32:
      return 4;
    default:
      return 8;
  }
}

// The MPI op for (dtype, op): a predefined one, or the user op of a 16-bit float format.
int toMpiOp(int dtype, int op, MPI_Op* out, char* err, size_t err_len) {
  if (op == kAverage || op < kSum || op > kProduct) {
    return argumentError(err, err_len,
                         "reduce op %d is not one the plugin runs (average is a sum, divided "
                         "by libhvd)",
                         op);
  }
  if (dtype == kFloat16 || dtype == kBFloat16) {
    std::lock_guard<std::mutex> lock(g_mutex);
    const int rc = createHalfOps(err, err_len);
    if (rc != HVD_MPI_OK) return rc;
    *out = g_halfOps[dtype == kFloat16 ? 0 : 1][op];
    return HVD_MPI_OK;
  }
  switch (op) {
    case kSum:
      *out = MPI_SUM;
      break;
    case kMin:
      *out = MPI_MIN;
      break;
    case kMax:
      *out = MPI_MAX;
      break;
    default:
      *out = MPI_PROD;
      break;
  }
  return HVD_MPI_OK;
}

int toMpiType(int dtype, MPI_Datatype* out, char* err, size_t err_len) {
  if (!toMpiType(dtype, out)) return argumentError(err, err_len, "unknown data type %d", dtype);
  return HVD_MPI_OK;
}

// Per-rank counts and displacements as MPI's ints; refuses totals beyond INT_MAX elements.
int toIntCounts(hvd_mpi_comm* comm, const uint64_t* counts, std::vector<int>* ints,
                std::vector<int>* displs, const char* what, char* err, size_t err_len) {
  int size = 0;
  HVD_MPI_CHECK(MPI_Comm_size(comm->comm, &size), "MPI_Comm_size");
  ints->resize(size);
  if (displs != nullptr) displs->resize(size);
  uint64_t total = 0;
  for (int r = 0; r < size; ++r) {
    if (displs != nullptr) (*displs)[r] = static_cast<int>(total);
    total += counts[r];
    if (counts[r] > INT_MAX || total > INT_MAX) {
      return argumentError(err, err_len,
                           "%s: %llu elements in all exceed MPI's int counts (at most %d)", what,
                           static_cast<unsigned long long>(total), INT_MAX);
    }
    (*ints)[r] = static_cast<int>(counts[r]);
  }
  return HVD_MPI_OK;
}

int threadLevel(int provided) {
  if (provided >= MPI_THREAD_MULTIPLE) return HVD_MPI_THREAD_MULTIPLE;
  if (provided >= MPI_THREAD_SERIALIZED) return HVD_MPI_THREAD_SERIALIZED;
  if (provided >= MPI_THREAD_FUNNELED) return HVD_MPI_THREAD_FUNNELED;
  return HVD_MPI_THREAD_SINGLE;
}

// --- the table ---------------------------------------------------------------------------------

int pluginInit(int* initialized_here, int* provided, char* err, size_t err_len) {
  std::lock_guard<std::mutex> lock(g_mutex);
  int initialized = 0;
  int finalized = 0;
  HVD_MPI_CHECK(MPI_Initialized(&initialized), "MPI_Initialized");
  HVD_MPI_CHECK(MPI_Finalized(&finalized), "MPI_Finalized");
  if (finalized) {
    setError(err, err_len,
             "MPI is already finalized in this process (MPI cannot be initialised again)");
    return MPI_ERR_OTHER;
  }
  int level = MPI_THREAD_SINGLE;
  if (!initialized) {
    HVD_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &level),
                  "MPI_Init_thread");
    g_initializedHere = true;
    *initialized_here = 1;
  } else {
    HVD_MPI_CHECK(MPI_Query_thread(&level), "MPI_Query_thread");
    *initialized_here = 0;
  }
  *provided = threadLevel(level);
  return HVD_MPI_OK;
}

int pluginFinalize(char* err, size_t err_len) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_initializedHere) return HVD_MPI_OK;
  int finalized = 0;
  HVD_MPI_CHECK(MPI_Finalized(&finalized), "MPI_Finalized");
  g_initializedHere = false;
  if (finalized) return HVD_MPI_OK;
  if (g_opsCreated) {
    for (auto& format : g_halfOps) {
      for (MPI_Op& op : format) {
        if (op != MPI_OP_NULL) MPI_Op_free(&op);
      }
    }
    g_opsCreated = false;
  }
  HVD_MPI_CHECK(MPI_Finalize(), "MPI_Finalize");
  return HVD_MPI_OK;
}

int pluginLibraryVersion(char* out, size_t out_len) {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int len = 0;
  char* err = out;
  size_t err_len = out_len;
  HVD_MPI_CHECK(MPI_Get_library_version(text, &len), "MPI_Get_library_version");
  text[std::min<int>(len, MPI_MAX_LIBRARY_VERSION_STRING - 1)] = '\0';
  const size_t line = std::strcspn(text, "\n");
  text[line] = '\0';
  setError(out, out_len, "%s", text);
  return HVD_MPI_OK;
}

int pluginCommDupWorld(hvd_mpi_comm** out, char* err, size_t err_len) {
  MPI_Comm comm = MPI_COMM_NULL;
  HVD_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "MPI_Comm_dup(MPI_COMM_WORLD)");
  const int rc = MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  if (rc != MPI_SUCCESS) {
    MPI_Comm_free(&comm);
    return mpiError(rc, "MPI_Comm_set_errhandler", err, err_len);
  }
  *out = new hvd_mpi_comm{comm};
  return HVD_MPI_OK;
}

int pluginCommFree(hvd_mpi_comm* comm, char* err, size_t err_len) {
  if (comm == nullptr) return HVD_MPI_OK;
  int finalized = 0;
  MPI_Finalized(&finalized);
  int rc = MPI_SUCCESS;
  if (!finalized) rc = MPI_Comm_free(&comm->comm);
  delete comm;
  if (rc != MPI_SUCCESS) return mpiError(rc, "MPI_Comm_free", err, err_len);
  return HVD_MPI_OK;
}

int pluginCommRank(hvd_mpi_comm* comm, int* rank, char* err, size_t err_len) {
  HVD_MPI_CHECK(MPI_Comm_rank(comm->comm, rank), "MPI_Comm_rank");
  return HVD_MPI_OK;
}

int pluginCommSize(hvd_mpi_comm* comm, int* size, char* err, size_t err_len) {
  HVD_MPI_CHECK(MPI_Comm_size(comm->comm, size), "MPI_Comm_size");
  return HVD_MPI_OK;
}

int pluginAbort(hvd_mpi_comm* comm, int code, char* err, size_t err_len) {
  HVD_MPI_CHECK(MPI_Abort(comm != nullptr ? comm->comm : MPI_COMM_WORLD, code), "MPI_Abort");
  return HVD_MPI_OK;
}

int pluginBarrier(hvd_mpi_comm* comm, double timeout_seconds, char* err, size_t err_len) {
  if (timeout_seconds < 0) {
    HVD_MPI_CHECK(MPI_Barrier(comm->comm), "MPI_Barrier");
    return HVD_MPI_OK;
  }
  MPI_Request request = MPI_REQUEST_NULL;
  HVD_MPI_CHECK(MPI_Ibarrier(comm->comm, &request), "MPI_Ibarrier");
  const double deadline = MPI_Wtime() + timeout_seconds;
  while (true) {
    int done = 0;
    HVD_MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test(MPI_Ibarrier)");
    if (done) return HVD_MPI_OK;
    if (MPI_Wtime() > deadline) {
      // A pending non-blocking collective may be neither freed nor cancelled: it is left to
      // complete when the missing ranks arrive.
      setError(err, err_len, "MPI_Ibarrier: not every rank arrived within %.1f s", timeout_seconds);
      return HVD_MPI_ERR_TIMEOUT;
    }
    const timespec pause{0, 1000000};  // 1 ms: a barrier at shutdown is not latency-bound
    nanosleep(&pause, nullptr);
  }
}

int pluginBcast(hvd_mpi_comm* comm, void* buffer, uint64_t bytes, int root, char* err,
                size_t err_len) {
  auto* p = static_cast<char*>(buffer);
  for (uint64_t at = 0; at < bytes; at += kMaxChunk) {
    const int n = static_cast<int>(std::min(kMaxChunk, bytes - at));
    HVD_MPI_CHECK(MPI_Bcast(p + at, n, MPI_BYTE, root, comm->comm), "MPI_Bcast");
  }
  return HVD_MPI_OK;
}

int pluginAllreduce(hvd_mpi_comm* comm, const void* send, void* recv, uint64_t count, int dtype,
                    int op, char* err, size_t err_len) {
  MPI_Datatype type;
  MPI_Op mpiOp;
  int rc = toMpiType(dtype, &type, err, err_len);
  if (rc == HVD_MPI_OK) rc = toMpiOp(dtype, op, &mpiOp, err, err_len);
  if (rc != HVD_MPI_OK) return rc;
  const size_t elem = typeSize(dtype);
  for (uint64_t at = 0; at < count; at += kMaxChunk) {
    const int n = static_cast<int>(std::min(kMaxChunk, count - at));
    const void* in = send == nullptr ? MPI_IN_PLACE : static_cast<const char*>(send) + at * elem;
    HVD_MPI_CHECK(
        MPI_Allreduce(in, static_cast<char*>(recv) + at * elem, n, type, mpiOp, comm->comm),
        "MPI_Allreduce");
  }
  return HVD_MPI_OK;
}

int pluginAllgatherv(hvd_mpi_comm* comm, const void* send, void* recv, const uint64_t* counts,
                     int dtype, char* err, size_t err_len) {
  MPI_Datatype type;
  int rc = toMpiType(dtype, &type, err, err_len);
  std::vector<int> ints, displs;
  if (rc == HVD_MPI_OK) rc = toIntCounts(comm, counts, &ints, &displs, "allgatherv", err, err_len);
  if (rc != HVD_MPI_OK) return rc;
  int rank = 0;
  HVD_MPI_CHECK(MPI_Comm_rank(comm->comm, &rank), "MPI_Comm_rank");
  const void* in = send == nullptr ? MPI_IN_PLACE : send;
  HVD_MPI_CHECK(
      MPI_Allgatherv(in, ints[rank], type, recv, ints.data(), displs.data(), type, comm->comm),
      "MPI_Allgatherv");
  return HVD_MPI_OK;
}

int pluginReduceScatter(hvd_mpi_comm* comm, const void* send, void* recv, const uint64_t* counts,
                        int dtype, int op, char* err, size_t err_len) {
  MPI_Datatype type;
  MPI_Op mpiOp;
  int rc = toMpiType(dtype, &type, err, err_len);
  if (rc == HVD_MPI_OK) rc = toMpiOp(dtype, op, &mpiOp, err, err_len);
  std::vector<int> ints;
  if (rc == HVD_MPI_OK)
    rc = toIntCounts(comm, counts, &ints, nullptr, "reduce_scatter", err, err_len);
  if (rc != HVD_MPI_OK) return rc;
  const void* in = send == nullptr ? MPI_IN_PLACE : send;
  HVD_MPI_CHECK(MPI_Reduce_scatter(in, recv, ints.data(), type, mpiOp, comm->comm),
                "MPI_Reduce_scatter");
  return HVD_MPI_OK;
}

int pluginAlltoallv(hvd_mpi_comm* comm, const void* send, const uint64_t* send_counts, void* recv,
                    const uint64_t* recv_counts, int dtype, char* err, size_t err_len) {
  MPI_Datatype type;
  int rc = toMpiType(dtype, &type, err, err_len);
  std::vector<int> sc, sd, rcounts, rd;
  if (rc == HVD_MPI_OK) rc = toIntCounts(comm, send_counts, &sc, &sd, "alltoallv", err, err_len);
  if (rc == HVD_MPI_OK) {
    rc = toIntCounts(comm, recv_counts, &rcounts, &rd, "alltoallv", err, err_len);
  }
  if (rc != HVD_MPI_OK) return rc;
  HVD_MPI_CHECK(MPI_Alltoallv(send, sc.data(), sd.data(), type, recv, rcounts.data(), rd.data(),
                              type, comm->comm),
                "MPI_Alltoallv");
  return HVD_MPI_OK;
}

const hvd_mpi_plugin_v1 kTable = {
    HVD_MPI_PLUGIN_ABI_VERSION,
    sizeof(hvd_mpi_plugin_v1),
    pluginInit,
    pluginFinalize,
    pluginLibraryVersion,
    pluginCommDupWorld,
    pluginCommFree,
    pluginCommRank,
    pluginCommSize,
    pluginAbort,
    pluginBarrier,
    pluginBcast,
    pluginAllreduce,
    pluginAllgatherv,
    pluginReduceScatter,
    pluginAlltoallv,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const hvd_mpi_plugin_v1* hvd_mpi_plugin_get(
    uint32_t abi_version) {
  return abi_version == HVD_MPI_PLUGIN_ABI_VERSION ? &kTable : nullptr;
}
