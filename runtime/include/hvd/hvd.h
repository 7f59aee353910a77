/* libhvd, the C ABI for language bindings. Every function returns an hvd_status; on failure
 * hvd_last_error() returns a message for the calling thread (valid until its next hvd call).
 * Semantics are those of the C++ API in hvd/hvd.hpp. Counts are int64_t so that a negative
 * count from a binding is reported as an error instead of wrapping around. */
#ifndef HVD_HVD_H_
#define HVD_HVD_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  HVD_OK = 0,
  HVD_ERR_INVALID_ARGUMENT = 1,
  HVD_ERR_TIMEOUT = 2,
  HVD_ERR_PEER = 3,
  HVD_ERR_BACKEND = 4,
  HVD_ERR_INTERNAL = 5,
} hvd_status;

/* Values match hvd::DataType and hvd::ReduceOp. Functions take them as int so that a binding
 * passing an out-of-range value gets HVD_ERR_INVALID_ARGUMENT, not undefined behaviour. */
typedef enum {
  HVD_INT8 = 0,
  HVD_UINT8 = 1,
  HVD_INT32 = 2,
  HVD_INT64 = 3,
  HVD_FLOAT16 = 4,
  HVD_BFLOAT16 = 5,
  HVD_FLOAT32 = 6,
  HVD_FLOAT64 = 7,
  HVD_INT16 = 8,
} hvd_datatype;

typedef enum {
  HVD_SUM = 0,
  HVD_AVERAGE = 1,
  HVD_MIN = 2,
  HVD_MAX = 3,
  HVD_PRODUCT = 4,
  /* Adaptive summation (Horovod's Adasum): allreduce of floating-point types only. */
  HVD_ADASUM = 5,
} hvd_reduce_op;

const char* hvd_last_error(void);
const char* hvd_status_name(hvd_status status);

hvd_status hvd_init(void);
hvd_status hvd_shutdown(void);
int hvd_is_initialized(void);

/* Each writes the value to *out. */
hvd_status hvd_rank(int* out);
hvd_status hvd_size(int* out);
hvd_status hvd_local_rank(int* out);
hvd_status hvd_local_size(int* out);
hvd_status hvd_cross_rank(int* out);
hvd_status hvd_cross_size(int* out);
/* 1 when every rank's host runs the same number of ranks, else 0 (learnt at init: local). */
hvd_status hvd_is_homogeneous(int* out);

/* input == output runs in place. */
hvd_status hvd_allreduce(const void* input, void* output, int64_t count, int type, int op);
/* counts[size]: every rank's element count; output holds their sum. */
hvd_status hvd_allgather(const void* input, int64_t count, void* output, const int64_t* counts,
                         int type);
hvd_status hvd_broadcast(void* buffer, int64_t count, int type, int root);
/* output receives this rank's share: rows split with the first rows % size ranks one longer. */
hvd_status hvd_reducescatter(const void* input, void* output, int64_t count, int type, int op,
                             int64_t row_elements);
hvd_status hvd_alltoall(const void* input, const int64_t* send_counts, void* output,
                        const int64_t* recv_counts, int type);
hvd_status hvd_barrier(void);

/* The GPU backend; neither needs hvd_init(). hvd_nccl_built: 1 when this libhvd was built with
 * the NCCL backend, else 0. hvd_nccl_version: the loadable NCCL library's version ("2.27.3"),
 * "" when none loads; the string is valid until the calling thread's next hvd_nccl_version. */
int hvd_nccl_built(void);
const char* hvd_nccl_version(void);

/* The CPU backend: "hvd" or "mpi" (hvd::cpuBackend(); no hvd_init() needed), "" for a value of
 * HVD_CPU_BACKEND that hvd_init() would refuse. The string is static. */
const char* hvd_cpu_backend(void);

/* Elastic mode (hvdrun --min-np or --host-discovery-script; docs/elastic.md).
 * hvd_elastic_enabled: 1 when HVD_ELASTIC=1 (no hvd_init() needed). hvd_elastic_round: the round
 * this process joined last, -1 before any. hvd_elastic_pending (after hvd_init()): *round is the
 * round the leader announced to follow the current one, 0 when none; *change what changed
 * (bits: 1 hosts removed, 2 hosts added). hvd_elastic_removed: 1 when an hvd_init() failed
 * because the leader removed this worker from the job (every later hvd_init() fails too). */
int hvd_elastic_enabled(void);
int hvd_elastic_round(void);
hvd_status hvd_elastic_pending(int* round, int* change);
int hvd_elastic_removed(void);

#ifdef __cplusplus
}
#endif

#endif /* HVD_HVD_H_ */
