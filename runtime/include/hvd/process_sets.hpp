// Process sets (Horovod's hvd.ProcessSet): collectives over a subset of the job's ranks. A set
// is its ranks in ascending order (job ranks, as hvd::rank() returns them) and an id that every
// rank agrees on; set 0, the global set, is every rank. An engine op (hvd/engine.hpp) runs on
// the set OpOptions::processSet (or the processSet argument) names: only its members submit
// it, names are matched within the set, and the set negotiates on its own (its own response
// cache, fusion, stall detection naming the set's missing job ranks). Results are as for a job
// of the set's ranks: an allgather concatenates the members' inputs in set order, a
// reducescatter and an alltoall split over the members, an average divides by the set's size;
// a broadcast's root is a job rank, which must be a member.
//
//   hvd::init({{0, 1}, {2, 3}});                  // or HVD_PROCESS_SETS="0,1;2,3"
//   hvd::OpOptions o;
//   o.processSet = hvd::rank() < 2 ? 1 : 2;       // ids in the order given
//   hvd::allreduceAsync("grad", g, g, {n}, hvd::DataType::kFloat32, o).wait();
//
// Sets are fixed at init, or — in dynamic mode (HVD_DYNAMIC_PROCESS_SETS=1, alias
// HOROVOD_DYNAMIC_PROCESS_SETS, or init(sets, true)) — added and removed at run time by every
// rank of the job together, in the same order. Every rank must be given the same sets at init;
// otherwise init fails on every rank, naming the ranks that differ.
#pragma once

#include <vector>

namespace hvd {

// hvd::init() with process sets fixed at init (instead of HVD_PROCESS_SETS) and, with
// `dynamic`, dynamic mode. Ids 1, 2, ... follow the list's order; a set equal to an earlier
// one (or to every rank: the global set) gets that set's id. Idempotent like init().
void init(const std::vector<std::vector<int>>& processSets, bool dynamic = false);

// Dynamic mode only (else InvalidArgumentError). Collective over every rank of the job; returns
// the new set's id. A set whose ranks exist as a set already, an empty set, a rank outside the
// job or given twice, and ranks asking for different changes throw InvalidArgumentError on
// every rank, naming them.
int addProcessSet(const std::vector<int>& ranks);
// Dynamic mode only. Collective over every rank of the job. False for the global set (0) and
// for an id that does not exist. Ops of the set still pending on its members fail.
bool removeProcessSet(int id);

// The ids of the sets that exist now, ascending (0 first).
std::vector<int> processSetIds();
// Set `id`'s job ranks, ascending. These and the calls below throw InvalidArgumentError for an
// id that does not exist.
std::vector<int> processSetRanks(int id);
int processSetSize(int id);
// This rank's index in the set; InvalidArgumentError when it is not a member.
int processSetRank(int id);
bool processSetIncluded(int id);

}  // namespace hvd
