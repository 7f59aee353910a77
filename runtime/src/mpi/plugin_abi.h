/* The C interface between libhvd and its MPI plugin, libhvd_mpi.so (runtime/mpi_plugin/).
 *
 * libhvd never links libmpi: GPU nodes build it with a compiler and CUDA only, and a program
 * that mpirun did not start must never touch MPI. The plugin, built only where CMake finds MPI
 * (HVD_HAVE_MPI), links libmpi and exports one function, hvd_mpi_plugin_get(), which returns a
 * table of function pointers. libhvd opens the plugin with dlopen when it needs MPI (the
 * rendezvous under mpirun, HVD_CPU_BACKEND=mpi; mpi/mpi_api.h).
 *
 * The contract, version 1:
 *   - Plain C types only. Element types are hvd::DataType's values, reduce ops
 *     hvd::ReduceOp's; the plugin refuses kAverage (libhvd divides after a sum, as its own
 *     collectives do). Counts are uint64_t; the plugin splits or refuses what exceeds MPI's int.
 *   - Every function returns HVD_MPI_OK or an error code: an MPI error class (> 0), or one of
 *     the HVD_MPI_ERR_* below (< 0). On error it writes a NUL-terminated message into
 *     err[0..err_len) ("MPI_Allreduce: MPI_ERR_TRUNCATE: message truncated"); the caller owns
 *     the buffer, so calls on different threads never share one.
 *   - Communicators are MPI_Comm_dup's of MPI_COMM_WORLD with MPI_ERRORS_RETURN, opaque to
 *     libhvd. Calls on different communicators may run concurrently (MPI_THREAD_MULTIPLE).
 *   - A send pointer of NULL means MPI_IN_PLACE.
 */
#ifndef HVD_MPI_PLUGIN_ABI_H_
#define HVD_MPI_PLUGIN_ABI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HVD_MPI_PLUGIN_ABI_VERSION 1u
#define HVD_MPI_PLUGIN_ENTRY "hvd_mpi_plugin_get"

#define HVD_MPI_OK 0
#define HVD_MPI_ERR_ARGUMENT (-1) /* a type, op, count or pointer the plugin refuses */
#define HVD_MPI_ERR_TIMEOUT (-2)  /* barrier: the timeout passed before every rank arrived */

/* MPI's thread levels, in order (the values of MPI_THREAD_* are implementation-defined). */
#define HVD_MPI_THREAD_SINGLE 0
#define HVD_MPI_THREAD_FUNNELED 1
#define HVD_MPI_THREAD_SERIALIZED 2
#define HVD_MPI_THREAD_MULTIPLE 3

typedef struct hvd_mpi_comm hvd_mpi_comm;

typedef struct hvd_mpi_plugin_v1 {
  uint32_t abi_version; /* HVD_MPI_PLUGIN_ABI_VERSION */
  uint32_t struct_size; /* sizeof(hvd_mpi_plugin_v1) */

  /* Initialises MPI with MPI_Init_thread(MPI_THREAD_MULTIPLE) unless the program already did
   * (MPI_Initialized). *initialized_here: 1 when this call initialised it (then only
   * finalize() below ends it). *provided: the thread level MPI runs at (HVD_MPI_THREAD_*).
   * Idempotent. Fails when MPI was already finalized. */
  int (*init)(int* initialized_here, int* provided, char* err, size_t err_len);
  /* MPI_Finalize, when init() initialised MPI and it is not finalized yet; else nothing. */
  int (*finalize)(char* err, size_t err_len);
  /* The first line of MPI_Get_library_version ("Open MPI v4.1.4, package: ..."). */
  int (*library_version)(char* out, size_t out_len);

  /* MPI_Comm_dup(MPI_COMM_WORLD) with MPI_ERRORS_RETURN: collective over every rank. */
  int (*comm_dup_world)(hvd_mpi_comm** out, char* err, size_t err_len);
  /* MPI_Comm_free; no-op once MPI is finalized (the program may finalize first). */
  int (*comm_free)(hvd_mpi_comm* comm, char* err, size_t err_len);
  int (*comm_rank)(hvd_mpi_comm* comm, int* rank, char* err, size_t err_len);
  int (*comm_size)(hvd_mpi_comm* comm, int* size, char* err, size_t err_len);
  /* MPI_Abort on the communicator: ends the job (mpirun reports `code`). Does not return when
   * MPI honours it. */
  int (*abort)(hvd_mpi_comm* comm, int code, char* err, size_t err_len);

  /* MPI_Barrier; with timeout_seconds >= 0 an MPI_Ibarrier polled until then, which returns
   * HVD_MPI_ERR_TIMEOUT (leaving the barrier to complete in the background) when it passes. */
  int (*barrier)(hvd_mpi_comm* comm, double timeout_seconds, char* err, size_t err_len);
  /* MPI_Bcast of `bytes` bytes from `root`. */
  int (*bcast)(hvd_mpi_comm* comm, void* buffer, uint64_t bytes, int root, char* err,
               size_t err_len);
  /* MPI_Allreduce of `count` elements; float16 and bfloat16 through user ops (computed in
   * float32, rounded to nearest even after each combination, as libhvd's kernels do). */
  int (*allreduce)(hvd_mpi_comm* comm, const void* send, void* recv, uint64_t count, int dtype,
                   int op, char* err, size_t err_len);
  /* MPI_Allgatherv: rank r contributes counts[r] elements; recv is their concatenation in rank
   * order. send == NULL: this rank's block is already in place in recv. */
  int (*allgatherv)(hvd_mpi_comm* comm, const void* send, void* recv, const uint64_t* counts,
                    int dtype, char* err, size_t err_len);
  /* MPI_Reduce_scatter: send holds the concatenation of every rank's block (counts[r]
   * elements for rank r); recv receives this rank's block, reduced. */
  int (*reduce_scatter)(hvd_mpi_comm* comm, const void* send, void* recv, const uint64_t* counts,
                        int dtype, int op, char* err, size_t err_len);
  /* MPI_Alltoallv: send_counts[p] consecutive elements of send go to rank p, recv_counts[p]
   * from rank p land consecutively in recv, both in rank order. */
  int (*alltoallv)(hvd_mpi_comm* comm, const void* send, const uint64_t* send_counts, void* recv,
                   const uint64_t* recv_counts, int dtype, char* err, size_t err_len);
} hvd_mpi_plugin_v1;

/* The table for `abi_version`, or NULL when the plugin does not speak that version. */
typedef const hvd_mpi_plugin_v1* (*hvd_mpi_plugin_get_fn)(uint32_t abi_version);

#ifdef __cplusplus
}
#endif

#endif /* HVD_MPI_PLUGIN_ABI_H_ */
