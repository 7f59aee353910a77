// The job hvdrun runs, built once from its options for both modes: the embedded coordinator
// takes the JobSpec itself, remote mode sends it to the leader agent as a SubmitJobRequest.
// The modes differ only where they must: the environment (embedded jobs forward the caller's
// whole environment; remote ranks get only what -x names) and the agents' addresses.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "agent/coordinator/job_coordinator.h"
#include "hvd/v1/agent.pb.h"
#include "launcher/options.h"

namespace hvd::launcher {

// "hvdrun-<pid>-<8 hex>": names the job in logs (the leader agent makes its own id from it).
std::string newJobId();

// The elastic part of the job (off unless options.elastic), with Horovod's defaults: --min-np is
// -np when not given, --max-np unbounded (0). -np is the number of slots the first round waits
// for, so min-np <= np <= max-np must hold: otherwise an hvd::InvalidArgumentError names the
// flags and their values. parseCommandLine checks it when -np was given; buildJobSpec again with
// the -np a Slurm allocation gave.
agent::coordinator::ElasticSpec elasticSpec(const Options& options);

// Everything but the environment comes from `options` and `hosts`; `env` is the forwarded
// environment of the mode (see forwardedEnvironment / exportedEnvironment), to which
// --start-timeout is added (addStartTimeout). Options must have been validated by
// parseCommandLine (stop signal and --gpu-bind known).
agent::coordinator::JobSpec buildJobSpec(const Options& options,
                                         const std::vector<contract::HostSlots>& hosts,
                                         std::vector<std::string> env);

// Hosts of a job that goes through agents must name each machine the same way for every agent:
// a loopback name (localhost, 127.0.0.1, ::1) would mean a different machine to each of them.
// Throws hvd::InvalidArgumentError naming the host when a loopback name is mixed with other
// hosts, or when one host is listed twice.
void checkAgentHosts(const std::vector<contract::HostSlots>& hosts);

// The SubmitJob request of a remote job: the JobSpec with only the -x environment, every host's
// agent address (`addresses`, one per host, or when empty agentAddress(host, --agent-port): the
// agents hvdrun started in a Slurm allocation listen on ports of their own) and --start-timeout
// as the leader's connect timeout. Throws hvd::InvalidArgumentError for a bad -x.
v1::SubmitJobRequest buildSubmitRequest(const Options& options,
                                        const std::vector<contract::HostSlots>& hosts,
                                        std::vector<std::string> addresses = {});

}  // namespace hvd::launcher
