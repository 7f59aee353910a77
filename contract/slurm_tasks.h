// Slurm's tasks-per-node form, "2(x3),1" -> 2 2 2 1: read by hvdrun for the slots of an
// allocation's hosts (SLURM_TASKS_PER_NODE, contract/slurm_hosts.h) and by srun's workers for
// their local size and cross rank (SLURM_STEP_TASKS_PER_NODE, runtime/src/core/scheduler_env.h).
#pragma once

#include <string>
#include <vector>

namespace hvd::contract {

// Expands the tasks-per-node form ("N" or "N(xR)" entries, comma separated) into one count per
// node. `name` is the variable it came from, for the hvd::InvalidArgumentError that quotes the
// text, the entry and what was expected.
std::vector<int> expandTasksPerNode(const std::string& tasks,
                                    const std::string& name = "SLURM_TASKS_PER_NODE");

}  // namespace hvd::contract
