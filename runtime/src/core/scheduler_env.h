// Where a worker learns its place when no hvd launcher started it (under srun directly, under
// mpirun): the variables Slurm's srun and Open MPI's mpirun set for every
// task. Used by parseConfig only when HVD_RANK is not set; hvdrun and hvdagent always set the
// HVD_* contract, which wins.
//
//   srun     SLURM_PROCID (rank), SLURM_NTASKS (size), SLURM_LOCALID (local rank),
//            SLURM_NODEID (node index) and SLURM_STEP_TASKS_PER_NODE (else
//            SLURM_TASKS_PER_NODE; "2(x3),1": tasks on each node of the step, read by
//            contract/slurm_tasks.h, which hvdrun shares). Local size and
//            the cross rank and size follow exactly from those counts. Job id
//            "slurm-<SLURM_JOB_ID>.<SLURM_STEP_ID>".
//   mpirun   OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE. Open MPI names no node
//            index, so the cross rank and size are left to the runtime, which derives them from
//            every rank's host at rendezvous. Job id "ompi-<OMPI_MCA_ess_base_jobid>".
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "contract/env_reader.h"

namespace hvd::core {

struct SchedulerPlacement {
  std::string source;  // "srun" or "mpirun", for messages
  int rank = 0;
  int size = 1;
  int localRank = 0;
  int localSize = 1;
  std::optional<int> crossRank;  // nullopt: derive at rendezvous
  std::optional<int> crossSize;
  std::string jobId;
};

// The placement srun or mpirun gave this process, or nullopt when neither did. Throws
// hvd::InvalidArgumentError naming the variable when one is set but malformed or inconsistent.
std::optional<SchedulerPlacement> placementFromScheduler(const contract::EnvReader& getenv);

// The cross rank and size of `(localRank, node)` given every node's task count (the node of a
// rank with local rank L is counted when it has more than L tasks).
std::pair<int, int> crossPlacement(const std::vector<int>& tasksPerNode, int node, int localRank);

// The cross rank and size of `rank` (local rank `localRank` of `localSize`) from every rank's
// host key (what the mesh exchanges): nodes in the order of their lowest rank, as hvdrun numbers
// hosts. Throws hvd::InvalidArgumentError when this host runs a number of ranks other than
// `localSize` (the launcher's local size and the hosts disagree).
std::pair<int, int> crossFromHostKeys(const std::vector<std::string>& hostKeys, int rank,
                                      int localRank, int localSize);

}  // namespace hvd::core
