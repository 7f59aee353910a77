// The hosts of a job as hvdrun derives them from its options: -H, --hostfile, a Slurm
// allocation or this machine alone; whether they are this machine (embedded run) or need the
// agents, and each agent's address. Kept apart from the parsing so the rules read (and are
// tested) on their own.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "contract/env_reader.h"
#include "contract/host_spec.h"
#include "launcher/options.h"

namespace hvd::launcher {

// True for the names that mean this machine: loopback names and addresses (common::isLoopbackName)
// and `ownHostname`.
bool isLocalHost(const std::string& host, const std::string& ownHostname);

// The hosts of the job: -H, else --hostfile, else "localhost:np" (Horovod's default). Throws
// hvd::InvalidArgumentError for a malformed list, both options given, or an unreadable file.
std::vector<contract::HostSlots> resolveHosts(const Options& options);

// Inside a Slurm allocation (SLURM_JOB_ID set) with neither -H nor --hostfile: the allocation's
// hosts (contract/slurm_hosts.h), which hvdrun reaches through agents it starts itself
// (launcher/slurm_agents.h). nullopt otherwise. Throws hvd::InvalidArgumentError for malformed
// Slurm variables. `getenv` is injectable for tests.
bool usesSlurmAllocation(const Options& options,
                         contract::EnvReader getenv);  // SLURM_JOB_ID, no -H
std::optional<std::vector<contract::HostSlots>> slurmHosts(const Options& options,
                                                           contract::EnvReader getenv);

// The hosts as a -H value: "node01:2,node02:2" (a host without slots has no ":N"); IPv6
// addresses in brackets. What --print-hosts prints.
std::string formatHostList(const std::vector<contract::HostSlots>& hosts);

// -np when none was given inside a Slurm allocation: the sum of the hosts' slots (srun's and
// mpirun's default there). Throws hvd::InvalidArgumentError when a host's slots are unknown.
int slotsTotal(const std::vector<contract::HostSlots>& hosts);

// Before any agent starts: -np more than the allocation's tasks (when every node's are known)
// without --oversubscribe is an hvd::InvalidArgumentError that says how to ask Slurm for them.
void checkAllocationFits(const Options& options, const std::vector<contract::HostSlots>& hosts);

// True when the job goes through hvdagent: some host is not this machine, or --agent-port was
// given (then even a local job is submitted to the agent on this machine).
bool usesAgents(const Options& options, const std::vector<contract::HostSlots>& hosts,
                const std::string& ownHostname);

// "host:port" of a host's agent: IPv6 literals in brackets; localhost is contacted at 127.0.0.1
// (where hvdagent listens by default) so the result does not depend on name resolution order.
std::string agentAddress(const std::string& host, int port);

}  // namespace hvd::launcher
