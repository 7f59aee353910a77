// What hvdagent says about its node (the Describe RPC): hostname, the
// addresses of every non-loopback interface grouped by interface, the CPUs this process may run
// on, the GPUs NVML reports, the agent's version and what this build can do.
//
// The coordinator only needs NodeDescription; the interface list and the feature list are extra
// facts for hvdrun --verbose and operators, so they live in NodeFacts beside it. The Describe
// answer is made from them in agent/rpc/convert.h.
#pragma once

#include <string>
#include <vector>

#include "agent/node/gpu_discovery.h"
#include "agent/node/node_description.h"
#include "hvd_support/interfaces.h"

namespace hvd::agent::node {

using transport::InterfaceAddresses;

struct NodeFacts {
  NodeDescription node;  // node.addresses: every address of `interfaces`, in order
  std::vector<InterfaceAddresses> interfaces;
  std::vector<std::string> features;  // "tcp", "shm", "nccl", "mpi", "tls"
};

// The agent's version (PROJECT_VERSION of the build).
std::string agentVersion();

// What this build can do: "tcp" and "shm" always, "nccl" and "mpi" when built with them, "tls"
// when the agent serves with mutual TLS (`tlsEnabled`).
std::vector<std::string> buildFeatures(bool tlsEnabled);

// Non-loopback interface addresses, grouped by interface (hvd_support/interfaces.h).
using transport::interfaceAddresses;

// The CPUs this process may run on (sched_getaffinity: taskset, cgroup cpusets), at least 1.
int availableCpus();

// Everything above; `gpus` may be null (no GPUs). Not thread-safe because GpuDiscovery is not:
// the caller serialises.
NodeFacts collectNodeFacts(GpuDiscovery* gpus, bool tlsEnabled);

}  // namespace hvd::agent::node
