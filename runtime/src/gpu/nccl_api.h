// NCCL behind an interface (as c10d does): the backend calls NCCL only through NcclApi, so
//  * one libhvd serves hosts with and without GPUs: the real implementation (dl_nccl_api.cc,
//    built when CMake finds NCCL's headers) loads libnccl.so.2 with dlopen on first use, and a
//    host without it simply reports NCCL as unavailable;
//  * every error path runs on CPU machines against a fake (tests/common/fake_nccl.h).
//
// The types here are hvd's own, not nccl.h's, so this header and the code above it compile
// without the CUDA toolkit. Values of NcclResult equal ncclResult_t's; communicators and
// streams are opaque handles (ncclComm_t, cudaStream_t / CUstream).
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <string>

#include "hvd/types.hpp"

namespace hvd::gpu {

using NcclComm = void*;    // ncclComm_t
using CudaStream = void*;  // cudaStream_t (== CUstream); nullptr is the legacy default stream

// ncclResult_t, value for value.
enum class NcclResult : int {
  kSuccess = 0,
  kUnhandledCudaError = 1,
  kSystemError = 2,
  kInternalError = 3,
  kInvalidArgument = 4,
  kInvalidUsage = 5,
  kRemoteError = 6,
  kInProgress = 7,
};

// "ncclSystemError" style name of a result (for messages; errorString() gives NCCL's text).
const char* ncclResultName(NcclResult result);

// ncclUniqueId: 128 opaque bytes. Secret-ish (it lets a process join the communicator): it
// travels through the job's store and is never logged.
struct NcclUniqueId {
  std::array<char, 128> bytes{};
};

class NcclApi {
 public:
  virtual ~NcclApi() = default;

  // NCCL_VERSION_CODE of the loaded library, e.g. 22703 for 2.27.3.
  virtual int version() = 0;

  virtual NcclResult getUniqueId(NcclUniqueId* id) = 0;
  // ncclCommInitRankConfig; `blocking` = false makes it return kInProgress (or kSuccess) at
  // once, and commGetAsyncError then reports kInProgress until the init finishes, so the caller
  // can enforce a deadline and abort.
  virtual NcclResult commInitRank(NcclComm* comm, int nranks, const NcclUniqueId& id, int rank,
                                  bool blocking) = 0;
  virtual NcclResult commGetAsyncError(NcclComm comm, NcclResult* asyncError) = 0;
  virtual NcclResult commAbort(NcclComm comm) = 0;
  virtual NcclResult commDestroy(NcclComm comm) = 0;

  // Collectives and point-to-point, enqueued on `stream`. `count` is in elements of `type`;
  // a type or op NCCL lacks is kInvalidArgument. ReduceOp::kAverage is ncclAvg.
  virtual NcclResult allReduce(const void* send, void* recv, size_t count, DataType type,
                               ReduceOp op, NcclComm comm, CudaStream stream) = 0;
  virtual NcclResult broadcast(const void* send, void* recv, size_t count, DataType type, int root,
                               NcclComm comm, CudaStream stream) = 0;
  // recv holds nranks * sendCount elements, rank r's at r * sendCount.
  virtual NcclResult allGather(const void* send, void* recv, size_t sendCount, DataType type,
                               NcclComm comm, CudaStream stream) = 0;
  // send holds nranks * recvCount elements; rank r receives the reduction of block r.
  virtual NcclResult reduceScatter(const void* send, void* recv, size_t recvCount, DataType type,
                                   ReduceOp op, NcclComm comm, CudaStream stream) = 0;
  virtual NcclResult send(const void* buffer, size_t count, DataType type, int peer, NcclComm comm,
                          CudaStream stream) = 0;
  virtual NcclResult recv(void* buffer, size_t count, DataType type, int peer, NcclComm comm,
                          CudaStream stream) = 0;
  virtual NcclResult groupStart() = 0;
  virtual NcclResult groupEnd() = 0;

  // ncclGetErrorString(result).
  virtual std::string errorString(NcclResult result) = 0;
  // ncclGetLastError(comm): NCCL's last detailed message (may be empty).
  virtual std::string lastError(NcclComm comm) = 0;
};

// True when this libhvd was compiled with the NCCL backend (CMake found NCCL's headers).
bool ncclCompiled();

// The library loadNccl opens unless told otherwise (HVD_NCCL_LIBRARY names another).
inline constexpr const char* kDefaultNcclLibrary = "libnccl.so.2";

// Loads `library` (a name for the loader's search, or a path) with dlopen (RTLD_NOW |
// RTLD_LOCAL) and resolves every symbol NcclApi needs. Returns null and sets *why
// ("libnccl.so.2: cannot open shared object file ...", "this libhvd was built without the NCCL
// backend", "libnccl.so.2 lacks ncclCommInitRankConfig (NCCL 2.14 or later is required)")
// when it cannot. The returned object keeps the library loaded; callers keep it.
std::unique_ptr<NcclApi> loadNccl(const std::string& library, std::string* why);

}  // namespace hvd::gpu
