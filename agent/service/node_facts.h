// What hvdagent says about its node (the Describe RPC): hostname, the
// addresses of every non-loopback interface grouped by interface, the CPUs this process may run
// on, the GPUs NVML reports, the agent's version and what this build can do.
//
// The coordinator only needs coordinator::NodeDescription; the interface list and the feature
// list are extra facts for hvdrun --verbose and operators, so they live in NodeFacts beside it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "agent/coordinator/node_agent.h"
#include "agent/node/gpu_discovery.h"
#include "hvd/v1/agent.pb.h"
#include "transport/interfaces.h"

namespace hvd::agent::service {

using transport::InterfaceAddresses;

struct NodeFacts {
  coordinator::NodeDescription node;  // node.addresses: every address of `interfaces`, in order
  std::vector<InterfaceAddresses> interfaces;
  std::vector<std::string> features;  // "tcp", "shm", "nccl", "mpi", "tls"
};

// The agent's version (PROJECT_VERSION of the build).
std::string agentVersion();

// What this build can do: "tcp" and "shm" always, "nccl" and "mpi" when built with them, "tls"
// when the agent serves with mutual TLS (`tlsEnabled`).
std::vector<std::string> buildFeatures(bool tlsEnabled);

// Non-loopback interface addresses, grouped by interface (transport/interfaces.h).
using transport::interfaceAddresses;

// The CPUs this process may run on (sched_getaffinity: taskset, cgroup cpusets), at least 1.
int availableCpus();

// Everything above; `gpus` may be null (no GPUs). Not thread-safe because GpuDiscovery is not:
// the caller serialises.
NodeFacts collectNodeFacts(node::GpuDiscovery* gpus, bool tlsEnabled);

v1::DescribeResponse toProto(const NodeFacts& facts);

}  // namespace hvd::agent::service
