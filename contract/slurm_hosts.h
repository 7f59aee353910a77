// Slurm's compact host and task lists: what hvdrun reads inside an
// allocation when no -H or --hostfile is given.
//
//   SLURM_JOB_NODELIST    "node[01-04,07],gpu-a[1-2]"  -> node01 node02 node03 node04 node07
//                                                          gpu-a1 gpu-a2
//                         brackets may appear more than once in a name ("r[1-2]n[1-2]" is the
//                         product r1n1 r1n2 r2n1 r2n2) and numbers keep the width of the range's
//                         first bound ("[08-10]" -> 08 09 10);
//   SLURM_TASKS_PER_NODE  "2(x3),1"                    -> 2 2 2 1
//
// Every malformed input is an hvd::InvalidArgumentError that names the variable's text, the
// offending token and what was expected.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "contract/env_reader.h"
#include "contract/host_spec.h"

namespace hvd::contract {

// Expands a Slurm hostlist expression into host names, in order.
std::vector<std::string> expandHostlist(const std::string& hostlist);

// SLURM_TASKS_PER_NODE is expanded by contract/slurm_tasks.h, which srun's workers use too.

// The hosts of the allocation hvdrun runs in: SLURM_JOB_NODELIST with the slots of
// SLURM_TASKS_PER_NODE (when it lists one count per node; otherwise, or when unset, slots are
// left to each host's GPUs). nullopt when SLURM_JOB_ID is not set (not inside an allocation).
// `getenv` is injectable for tests.
std::optional<std::vector<HostSlots>> slurmAllocationHosts(const EnvReader& getenv);

}  // namespace hvd::contract
