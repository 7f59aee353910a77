// NcclApi over libnccl.so.2 loaded with dlopen. nccl.h supplies the types and the signature of
// every function; none is called by name, so libhvd has no link-time dependency on NCCL and a
// host without it only learns so when something asks for NCCL.
#include <nccl.h>

#include <cstring>

#include "gpu/loader.h"
#include "gpu/nccl_api.h"

namespace hvd::gpu {

static_assert(static_cast<int>(NcclResult::kSuccess) == ncclSuccess);
static_assert(static_cast<int>(NcclResult::kUnhandledCudaError) == ncclUnhandledCudaError);
static_assert(static_cast<int>(NcclResult::kSystemError) == ncclSystemError);
static_assert(static_cast<int>(NcclResult::kInternalError) == ncclInternalError);
static_assert(static_cast<int>(NcclResult::kInvalidArgument) == ncclInvalidArgument);
static_assert(static_cast<int>(NcclResult::kInvalidUsage) == ncclInvalidUsage);
static_assert(static_cast<int>(NcclResult::kRemoteError) == ncclRemoteError);
static_assert(static_cast<int>(NcclResult::kInProgress) == ncclInProgress);
static_assert(sizeof(ncclUniqueId) == sizeof(NcclUniqueId::bytes));

namespace {

// Every NCCL function hvd calls. ncclCommInitRankConfig (NCCL 2.14) is the newest of them.
// clang-format off
#define HVD_NCCL_FUNCTIONS(X) \
  X(ncclGetVersion)           \
  X(ncclGetUniqueId)          \
  X(ncclCommInitRankConfig)   \
  X(ncclCommGetAsyncError)    \
  X(ncclCommAbort)            \
  X(ncclCommDestroy)          \
  X(ncclAllReduce)            \
  X(ncclBroadcast)            \
  X(ncclAllGather)            \
  X(ncclReduceScatter)        \
  X(ncclSend)                 \
  X(ncclRecv)                 \
  X(ncclGroupStart)           \
  X(ncclGroupEnd)             \
  X(ncclGetErrorString)       \
  X(ncclGetLastError)
// clang-format on

struct NcclFunctions {
#define HVD_NCCL_POINTER(name) decltype(&::name) name = nullptr;
  HVD_NCCL_FUNCTIONS(HVD_NCCL_POINTER)
#undef HVD_NCCL_POINTER
};

// Types and ops hvd has and NCCL lacks are refused before NCCL sees them (kInvalidArgument).
bool toNccl(DataType type, ncclDataType_t* out) {
  switch (type) {
    case DataType::kInt8:
      *out = ncclInt8;
      return true;
    case DataType::kUInt8:
      *out = ncclUint8;
      return true;
    case DataType::kInt32:
      *out = ncclInt32;
      return true;
    case DataType::kInt64:
      *out = ncclInt64;
      return true;
    case DataType::kFloat16:
      *out = ncclFloat16;
      return true;
    case DataType::kBFloat16:
      // ncclBfloat16 (= 9) exists only in headers of NCCL built with CUDA's bfloat16 support.
      if constexpr (static_cast<int>(ncclNumTypes) > 9) {
        *out = static_cast<ncclDataType_t>(9);
        return true;
      }
      return false;
    case DataType::kFloat32:
      *out = ncclFloat32;
      return true;
    case DataType::kFloat64:
      *out = ncclFloat64;
      return true;
    case DataType::kInt16:
      // NCCL has no 16-bit integer type; NcclCollectives sends such calls elsewhere first.
      return false;
  }
  return false;
}

bool toNccl(ReduceOp op, ncclRedOp_t* out) {
  switch (op) {
    case ReduceOp::kSum:
      *out = ncclSum;
      return true;
    case ReduceOp::kAverage:
      *out = ncclAvg;
      return true;
    case ReduceOp::kMin:
      *out = ncclMin;
      return true;
    case ReduceOp::kMax:
      *out = ncclMax;
      return true;
    case ReduceOp::kProduct:
      *out = ncclProd;
      return true;
    case ReduceOp::kAdasum:
      // No NCCL op: NcclCollectives stages Adasum through host memory before it gets here.
      return false;
  }
  return false;
}

NcclResult fromNccl(ncclResult_t result) { return static_cast<NcclResult>(result); }
ncclComm_t toComm(NcclComm comm) { return static_cast<ncclComm_t>(comm); }
cudaStream_t toStream(CudaStream stream) { return static_cast<cudaStream_t>(stream); }

class DlNcclApi final : public NcclApi {
 public:
  DlNcclApi(DlLibrary library, const NcclFunctions& fn, int version)
      : library_(std::move(library)), fn_(fn), version_(version) {}

  int version() override { return version_; }

  NcclResult getUniqueId(NcclUniqueId* id) override {
    ncclUniqueId unique;
    const ncclResult_t result = fn_.ncclGetUniqueId(&unique);
    if (result == ncclSuccess) std::memcpy(id->bytes.data(), unique.internal, id->bytes.size());
    return fromNccl(result);
  }

  NcclResult commInitRank(NcclComm* comm, int nranks, const NcclUniqueId& id, int rank,
                          bool blocking) override {
    ncclUniqueId unique;
    std::memcpy(unique.internal, id.bytes.data(), id.bytes.size());
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = blocking ? 1 : 0;
    ncclComm_t created = nullptr;
    const ncclResult_t result = fn_.ncclCommInitRankConfig(&created, nranks, unique, rank, &config);
    *comm = created;
    return fromNccl(result);
  }

  NcclResult commGetAsyncError(NcclComm comm, NcclResult* asyncError) override {
    ncclResult_t error = ncclSuccess;
    const ncclResult_t result = fn_.ncclCommGetAsyncError(toComm(comm), &error);
    *asyncError = fromNccl(error);
    return fromNccl(result);
  }

  NcclResult commAbort(NcclComm comm) override { return fromNccl(fn_.ncclCommAbort(toComm(comm))); }
  NcclResult commDestroy(NcclComm comm) override {
    return fromNccl(fn_.ncclCommDestroy(toComm(comm)));
  }

  NcclResult allReduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                       NcclComm comm, CudaStream stream) override {
    ncclDataType_t t;
    ncclRedOp_t o;
    if (!toNccl(type, &t) || !toNccl(op, &o)) return NcclResult::kInvalidArgument;
    return fromNccl(fn_.ncclAllReduce(send, recv, count, t, o, toComm(comm), toStream(stream)));
  }

  NcclResult broadcast(const void* send, void* recv, size_t count, DataType type, int root,
                       NcclComm comm, CudaStream stream) override {
    ncclDataType_t t;
    if (!toNccl(type, &t)) return NcclResult::kInvalidArgument;
    return fromNccl(fn_.ncclBroadcast(send, recv, count, t, root, toComm(comm), toStream(stream)));
  }

  NcclResult allGather(const void* send, void* recv, size_t sendCount, DataType type, NcclComm comm,
                       CudaStream stream) override {
    ncclDataType_t t;
    if (!toNccl(type, &t)) return NcclResult::kInvalidArgument;
    return fromNccl(fn_.ncclAllGather(send, recv, sendCount, t, toComm(comm), toStream(stream)));
  }

  NcclResult reduceScatter(const void* send, void* recv, size_t recvCount, DataType type,
                           ReduceOp op, NcclComm comm, CudaStream stream) override {
    ncclDataType_t t;
    ncclRedOp_t o;
    if (!toNccl(type, &t) || !toNccl(op, &o)) return NcclResult::kInvalidArgument;
    return fromNccl(
        fn_.ncclReduceScatter(send, recv, recvCount, t, o, toComm(comm), toStream(stream)));
  }

  NcclResult send(const void* buffer, size_t count, DataType type, int peer, NcclComm comm,
                  CudaStream stream) override {
    ncclDataType_t t;
    if (!toNccl(type, &t)) return NcclResult::kInvalidArgument;
    return fromNccl(fn_.ncclSend(buffer, count, t, peer, toComm(comm), toStream(stream)));
  }

  NcclResult recv(void* buffer, size_t count, DataType type, int peer, NcclComm comm,
                  CudaStream stream) override {
    ncclDataType_t t;
    if (!toNccl(type, &t)) return NcclResult::kInvalidArgument;
    return fromNccl(fn_.ncclRecv(buffer, count, t, peer, toComm(comm), toStream(stream)));
  }

  NcclResult groupStart() override { return fromNccl(fn_.ncclGroupStart()); }
  NcclResult groupEnd() override { return fromNccl(fn_.ncclGroupEnd()); }

  std::string errorString(NcclResult result) override {
    const char* text = fn_.ncclGetErrorString(static_cast<ncclResult_t>(result));
    return text != nullptr ? text : "";
  }

  std::string lastError(NcclComm comm) override {
    const char* text = fn_.ncclGetLastError(toComm(comm));
    return text != nullptr ? text : "";
  }

 private:
  DlLibrary library_;
  NcclFunctions fn_;
  int version_;
};

}  // namespace

bool ncclCompiled() { return true; }

std::unique_ptr<NcclApi> loadNccl(const std::string& library, std::string* why) {
  std::string ignored;
  if (why == nullptr) why = &ignored;
  // RTLD_NODELETE: NCCL's threads can outlive every handle hvd holds (the bootstrap root that
  // ncclGetUniqueId starts waits for ranks that may never come), so dlclose in ~DlLibrary only
  // drops the reference and never unmaps code that a thread may still run.
  DlLibrary lib;
  if (!lib.open(ncclLibraryCandidates(library), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE, why)) {
    return nullptr;
  }
  NcclFunctions fn;
#define HVD_NCCL_RESOLVE(name)                                            \
  if (!lib.resolve(#name, &fn.name)) {                                    \
    *why = library + " lacks " #name " (NCCL 2.14 or later is required)"; \
    return nullptr;                                                       \
  }
  HVD_NCCL_FUNCTIONS(HVD_NCCL_RESOLVE)
#undef HVD_NCCL_RESOLVE
  int version = 0;
  const ncclResult_t result = fn.ncclGetVersion(&version);
  if (result != ncclSuccess) {
    *why = library + ": ncclGetVersion failed: " + ncclResultName(fromNccl(result));
    return nullptr;
  }
  return std::make_unique<DlNcclApi>(std::move(lib), fn, version);
}

}  // namespace hvd::gpu
