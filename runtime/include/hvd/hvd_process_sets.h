/* Process sets in the C ABI: semantics are those of hvd/process_sets.hpp. An engine op runs on
 * the set hvd_op_options.process_set names (hvd_engine.h); these calls set sets up and describe
 * them. Errors: HVD_ERR_INVALID_ARGUMENT with hvd_last_error() naming what is wrong (a set that
 * does not exist, a rank not in it, a duplicate set, dynamic mode off). */
#ifndef HVD_HVD_PROCESS_SETS_H_
#define HVD_HVD_PROCESS_SETS_H_

#include "hvd/hvd.h"

#ifdef __cplusplus
extern "C" {
#endif

/* hvd_init() with process sets fixed at init: count sets, set i being sizes[i] ranks taken in
 * turn from ranks (instead of HVD_PROCESS_SETS); dynamic nonzero: dynamic mode. Ids 1.. follow
 * the order given (a set equal to an earlier one, or to every rank, gets that id). */
hvd_status hvd_init_process_sets(const int* ranks, const int* sizes, int count, int dynamic);

/* hvd_init_process_sets in a job formed by some of the launched ranks (Horovod's
 * hvd.init(comm=[ranks]), hvd::initMembers in hvd/hvd.hpp): rank i of the new job is launched
 * rank members[i]; the sets name the new job's ranks. nmembers 0 is the whole job. count 0
 * with dynamic 0 keeps the sets of HVD_PROCESS_SETS. */
hvd_status hvd_init_members(const int* members, int nmembers, const int* ranks, const int* sizes,
                            int count, int dynamic);

/* Dynamic mode; collective over every rank of the job. *id: the new set's id. */
hvd_status hvd_add_process_set(const int* ranks, int nranks, int* id);
/* Dynamic mode; collective over every rank of the job. *removed: 1, or 0 for the global set
 * and ids that do not exist. */
hvd_status hvd_remove_process_set(int id, int* removed);

/* The ids of the sets that exist, ascending: *count receives how many, at most capacity are
 * written (ids may be NULL when capacity is 0). */
hvd_status hvd_process_set_ids(int* ids, int capacity, int* count);
/* Set id's job ranks, ascending, like hvd_process_set_ids. */
hvd_status hvd_process_set_ranks(int id, int* ranks, int capacity, int* count);
hvd_status hvd_process_set_size(int id, int* out);
/* This rank's index in the set; HVD_ERR_INVALID_ARGUMENT when it is not a member. */
hvd_status hvd_process_set_rank(int id, int* out);
/* *out: 1 when this rank is a member, else 0. */
hvd_status hvd_process_set_included(int id, int* out);

#ifdef __cplusplus
}
#endif

#endif /* HVD_HVD_PROCESS_SETS_H_ */
