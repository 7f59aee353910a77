/* libhvd's engine in the C ABI: named asynchronous collectives for language bindings (hvd.torch
 * is one, over ctypes). Semantics are those of hvd/engine.hpp: a name identifies one op across
 * ranks, the engine negotiates, checks and fuses, and completes the op in the background.
 *
 *   hvd_op_options o;
 *   hvd_op_options_init(&o);               // defaults; o.struct_size = sizeof o
 *   o.op = HVD_SUM;
 *   hvd_handle h;
 *   int64_t shape[2] = {128, 64};
 *   if (hvd_allreduce_async("allreduce.fc1.weight", in, out, shape, 2, HVD_FLOAT32, &o, &h))
 *     ... hvd_last_error() says why: an invalid argument, or the engine already failed
 *   ...
 *   hvd_status s = hvd_handle_wait(h);    // the op's own failure, if any
 *   hvd_handle_release(h);
 *
 * Errors come in two kinds, told apart by where they are returned:
 *  - a submit call (hvd_*_async, hvd_join) returns HVD_ERR_INVALID_ARGUMENT for arguments that
 *    are wrong on this rank alone (bad shape, null buffer, a name already in flight, splits that
 *    do not add up, hvd not initialised); any other status means the engine had already failed
 *    (a peer died, exited or shut hvd down: HVD_ERR_PEER naming it; a stall shutdown) or the
 *    process was forked after init (HVD_ERR_INTERNAL), and no op was submitted;
 *  - hvd_handle_wait / hvd_handle_wait_for return the op's failure: a mismatch across ranks
 *    (HVD_ERR_INVALID_ARGUMENT, naming the tensor, the field and the ranks), a peer failure or
 *    timeout, a shutdown (HVD_ERR_PEER, naming the rank).
 * A name stays in flight until hvd_handle_wait (or a hvd_handle_wait_for that saw the op done)
 * has returned for its handle, or the handle was released and the op finished.
 * Either way hvd_last_error() holds the C++ API's message for the calling thread.
 *
 * Threads: every call may come from any thread. No call holds a lock of libhvd's while it
 * waits, so a binding may release its interpreter lock around hvd_handle_wait (ctypes does).
 * A handle may be polled and waited on from several threads; it is released once, by its owner,
 * after which it must not be used. Buffers given to a submit call stay the caller's and must
 * stay valid and untouched until the op is done.
 *
 * Shapes are int64_t dims[ndim] (row-major; ndim 0 is a scalar). Engine-allocated results
 * (allgather, reducescatter, alltoall) are host memory owned by the handle: copy them out
 * before hvd_handle_release. */
#ifndef HVD_HVD_ENGINE_H_
#define HVD_HVD_ENGINE_H_

#include <stddef.h>
#include <stdint.h>

#include "hvd/hvd.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hvd_handle_impl* hvd_handle;

/* Per-op options. struct_size is the caller's sizeof(hvd_op_options): libhvd reads only the
 * fields that fit in it, so a binding built against an older, shorter struct keeps working
 * when fields are appended (those it lacks take their defaults). A NULL options pointer means
 * every default. */
typedef struct {
  size_t struct_size;
  int op;                  /* hvd_reduce_op, allreduce and reducescatter; default HVD_AVERAGE */
  double prescale_factor;  /* inputs are multiplied by it before the reduction; default 1 */
  double postscale_factor; /* the result is multiplied by it after; default 1 */
  int fp16_compression;    /* nonzero: float32/float64 travel as float16; default 0 */
  int root;                /* broadcast: the rank whose buffer every rank receives; default 0 */
  int device;              /* -1: host buffers (default); else the CUDA device of the buffers */
  void* stream;            /* CUDA: the cudaStream_t whose queued work the op must follow (the
                              caller's current stream); NULL: the legacy default stream */
  int process_set;         /* the process set the op runs on (hvd/hvd_process_sets.h); default
                              0, every rank. root stays a job rank. */
} hvd_op_options;

/* Fills *options with the defaults and sets struct_size. */
void hvd_op_options_init(hvd_op_options* options);

hvd_status hvd_allreduce_async(const char* name, const void* input, void* output,
                               const int64_t* shape, int ndim, int type,
                               const hvd_op_options* options, hvd_handle* handle);

/* count members, negotiated and reduced as one; names[i], inputs[i], outputs[i],
 * shapes[i] (ndims[i] dims) describe member i. All members share type and options. */
hvd_status hvd_grouped_allreduce_async(int count, const char* const* names,
                                       const void* const* inputs, void* const* outputs,
                                       const int64_t* const* shapes, const int* ndims, int type,
                                       const hvd_op_options* options, hvd_handle* handle);

/* Dimension 0 may differ across ranks. Result: the ranks' inputs concatenated along it. */
hvd_status hvd_allgather_async(const char* name, const void* input, const int64_t* shape, int ndim,
                               int type, const hvd_op_options* options, hvd_handle* handle);

/* In place: every rank's buffer receives options->root's. */
hvd_status hvd_broadcast_async(const char* name, void* buffer, const int64_t* shape, int ndim,
                               int type, const hvd_op_options* options, hvd_handle* handle);

/* Result: this rank's rows of the reduction (the first rows % size ranks get one extra). */
hvd_status hvd_reducescatter_async(const char* name, const void* input, const int64_t* shape,
                                   int ndim, int type, const hvd_op_options* options,
                                   hvd_handle* handle);

/* Sends splits[p] rows of dimension 0 to rank p (nsplits == size); nsplits 0: an equal split,
 * which must be exact. Result: the rows received in rank order, and the received splits. */
hvd_status hvd_alltoall_async(const char* name, const void* input, const int64_t* shape, int ndim,
                              const int64_t* splits, int nsplits, int type,
                              const hvd_op_options* options, hvd_handle* handle);

/* Completes when every rank has submitted its n-th barrier. */
hvd_status hvd_barrier_async(hvd_handle* handle);
/* The same among the members of a process set. */
hvd_status hvd_process_set_barrier_async(int process_set, hvd_handle* handle);

/* Blocks until every rank has joined (see hvd/engine.hpp); *last_rank: the rank that joined
 * last, the same on every rank. */
hvd_status hvd_join(int* last_rank);

/* 1 once the op finished (successfully or not), else 0; never blocks. 0 for a NULL handle. */
int hvd_handle_poll(hvd_handle handle);
/* Blocks until the op finished; returns its status. */
hvd_status hvd_handle_wait(hvd_handle handle);
/* Like hvd_handle_wait for at most timeout_ms: *done = 0 (and HVD_OK) if still running. */
hvd_status hvd_handle_wait_for(hvd_handle handle, int64_t timeout_ms, int* done);
/* After a successful wait: the engine-allocated result (*data may be NULL when *bytes is 0). */
hvd_status hvd_handle_output(hvd_handle handle, const void** data, int64_t* bytes);
/* After a successful wait: the result's shape. *ndim receives the number of dimensions; at
 * most capacity of them are written to dims (dims may be NULL when capacity is 0). */
hvd_status hvd_handle_output_shape(hvd_handle handle, int64_t* dims, int capacity, int* ndim);
/* After a successful alltoall: rows received from each rank, like hvd_handle_output_shape. */
hvd_status hvd_handle_received_splits(hvd_handle handle, int64_t* splits, int capacity, int* count);
/* The op's name (valid until release). */
const char* hvd_handle_name(hvd_handle handle);
/* Frees the handle; the op itself goes on if it is still running. NULL is ignored. */
void hvd_handle_release(hvd_handle handle);

/* The timeline (HVD_TIMELINE=DYNAMIC starts with none): rank 0 writes a Chrome trace to path;
 * mark_cycles adds an instant event per negotiation cycle. stop returns once the file is
 * complete. */
hvd_status hvd_start_timeline(const char* path, int mark_cycles);
hvd_status hvd_stop_timeline(void);

/* What this rank's engine did so far; zeros before its first op. struct_size as for
 * hvd_op_options. */
typedef struct {
  size_t struct_size;
  uint64_t cycles;        /* negotiation cycles */
  uint64_t negotiations;  /* cycles that exchanged uncached requests */
  uint64_t collectives;   /* data collectives run (one per fused batch) */
  uint64_t fused_tensors; /* tensors that shared their collective with others */
  uint64_t cache_hits;    /* ops negotiated through the response cache alone */
  uint64_t responses;     /* ops run successfully */
  uint64_t errors;        /* ops failed by negotiation */
  uint64_t bytes;         /* payload bytes of the data collectives, in the type they travel in */
} hvd_engine_stats;

hvd_status hvd_get_engine_stats(hvd_engine_stats* stats);

#ifdef __cplusplus
}
#endif

#endif /* HVD_HVD_ENGINE_H_ */
