// libhvd, the C++ API. A training process calls hvd::init() once (it reads the worker
// environment set by hvdrun / hvdagent: HVD_RANK, HVD_SIZE, HVD_LOCAL_RANK, ...), then uses
// rank()/size() and the collectives below, and calls hvd::shutdown() at the end.
//
// Collectives are blocking and must be called by every rank in the same order with matching
// arguments. Buffers are pointer + element count + DataType. Passing the same pointer as input
// and output runs the operation in place. Results are bit-identical on every rank.
//
// Buffers may be CUDA device memory (cudaMalloc, or a tensor's data_ptr()), all of one device
// in a call. Those calls run on NCCL, on a stream of hvd's own that waits for the legacy default
// stream first (so work the caller queued there is done before hvd reads), and return when the
// results are on the device. Where NCCL cannot be loaded, or with HVD_GPU_BACKEND=host, device
// buffers are copied through pinned host memory over the CPU transports instead (slower, same
// results). With HVD_HIERARCHICAL_ALLREDUCE=1 a device allreduce is a reduce-scatter inside
// each node, an allreduce across nodes and an allgather inside each node. A watchdog aborts the
// NCCL communicators when a peer fails or an op outlives HVD_TIMEOUT, so a device call fails
// with the reason instead of leaving the GPU spinning.
//
// Under mpirun, hvd::init() also works with no store variables at all (the ranks meet through
// MPI), and HVD_CPU_BACKEND=mpi runs the collectives on host buffers through MPI instead of
// hvd's transports (same semantics; a call that outlives HVD_TIMEOUT aborts the job, since an
// MPI call cannot be interrupted).
//
// Errors are exceptions deriving from hvd::Error (hvd/error.hpp): InvalidArgumentError for bad
// arguments or environment, PeerError when a peer died or closed, TimeoutError when a peer did
// not answer within the timeout (HVD_TIMEOUT seconds, default 60), BackendError for failing
// system calls. After a PeerError or TimeoutError the job's collectives are unusable: shut down.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "hvd/error.hpp"
#include "hvd/types.hpp"

namespace hvd {

// Which algorithm a collective uses; kAuto picks by message size (HVD_SMALL_MESSAGE_BYTES).
enum class Algorithm { kAuto, kRing, kDirect };

struct AllreduceOptions {
  ReduceOp op = ReduceOp::kSum;
  Algorithm algorithm = Algorithm::kAuto;
};

struct BroadcastOptions {
  int root = 0;
  Algorithm algorithm = Algorithm::kAuto;
};

struct ReducescatterOptions {
  ReduceOp op = ReduceOp::kSum;
  // The buffer is split by rows of this many elements: rank r receives rows
  // [start(r), start(r) + rows(r)) where the first (rows % size) ranks get one extra row.
  size_t rowElements = 1;
};

// --- lifecycle ---------------------------------------------------------------------------
void init();
// init() of a job formed by some of the launched ranks (Horovod's hvd.init(comm=[ranks])):
// rank i of the new job is launched rank members[i], and every query, collective and process
// set (processSets, dynamic: as in hvd/process_sets.hpp, in the new job's ranks) counts the
// members alone. Only the members call it, each with the same list; a launched rank outside the
// list may form a job of its own with a list of its own. Local and cross placement come from
// the members' hosts. An empty list, or every launched rank in order, is init(). Throws
// InvalidArgumentError, before connecting, for a rank outside the launched job or listed twice,
// for this rank not listed, and in elastic mode and under MPI's rendezvous or
// HVD_CPU_BACKEND=mpi (they take every launched rank). Idempotent like init().
void initMembers(const std::vector<int>& members,
                 const std::vector<std::vector<int>>& processSets = {}, bool dynamic = false);
void shutdown();
bool isInitialized();

int rank();
int size();
int localRank();
int localSize();
int crossRank();
int crossSize();
// Whether every rank's host runs the same number of ranks (Horovod's is_homogeneous), as
// learnt at init: no communication.
bool isHomogeneous();

// --- collectives -------------------------------------------------------------------------
// With ReduceOp::kAdasum (floating-point types) the call is Adasum over the ranks (types.hpp),
// always over hvd's own transports (MPI has none) and, for device buffers, through host copies
// (NCCL has none). reducescatter refuses it.
void allreduce(const void* input, void* output, size_t count, DataType type,
               const AllreduceOptions& options = {});

// Every rank contributes `count` elements (which may differ across ranks, zero included);
// `output` receives the concatenation in rank order, sum(counts) elements. `counts[r]` must be
// rank r's count; allgatherCounts() obtains them.
void allgather(const void* input, size_t count, void* output, const std::vector<size_t>& counts,
               DataType type);
std::vector<size_t> allgatherCounts(size_t count);

void broadcast(void* buffer, size_t count, DataType type, const BroadcastOptions& options = {});

// Reduces `count` elements across ranks and leaves this rank's share in `output`
// (reducescatterCount(count, rank()) elements).
void reducescatter(const void* input, void* output, size_t count, DataType type,
                   const ReducescatterOptions& options = {});
size_t reducescatterCount(size_t count, int rank, int size, size_t rowElements = 1);

// Sends sendCounts[p] elements (consecutive in `input`, in rank order) to each rank p and
// receives recvCounts[p] elements from each rank p into `output` (in rank order).
// alltoallCounts(sendCounts) returns the matching recvCounts.
void alltoall(const void* input, const std::vector<size_t>& sendCounts, void* output,
              const std::vector<size_t>& recvCounts, DataType type);
std::vector<size_t> alltoallCounts(const std::vector<size_t>& sendCounts);

void barrier();

// Which transports this rank's CPU collectives use ("shm+tcp", "tcp", "self"), or
// "mpi (Open MPI v4.1.4)" with HVD_CPU_BACKEND=mpi.
std::string transportDescription();

// What the CPU collectives run on: "hvd" (hvd's own transports) or "mpi". Needs no init():
// before it, the backend HVD_CPU_BACKEND (or Horovod's HOROVOD_CPU_OPERATIONS) asks for, read as
// init() will read it; "" when that value is one init() would refuse.
std::string cpuBackend();

// Elastic mode (HVD_ELASTIC=1; hvd.h's hvd_elastic_* say what each returns).
bool elasticEnabled();
int elasticRound();
// {round, change}: the round the leader announced to follow the current one (0: none) and what
// changed (bits: 1 hosts removed, 2 hosts added). Needs init().
std::pair<int, int> elasticPending();
bool elasticRemoved();

// --- GPU backend ---------------------------------------------------------------------------
// What device buffers of the blocking collectives run on: "none" before the first call with
// device memory, then "nccl 2.27.3" (", hierarchical" with HVD_HIERARCHICAL_ALLREDUCE) or
// "host-staged (<why NCCL is not used>)".
std::string deviceBackend();

// Neither needs init(). True when this libhvd was built with the NCCL backend (CMake found the
// CUDA toolkit and NCCL).
bool ncclBuilt();
// The version of the NCCL library this process can load ("2.27.3"): $HVD_NCCL_LIBRARY, else
// libnccl.so.2 through the loader's search, $CUDA_HOME/lib64, $NCCL_HOME/lib and
// /usr/local/cuda/lib64. Empty when none loads or the backend is not built.
std::string ncclVersion();

}  // namespace hvd
