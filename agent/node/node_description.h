// What an agent says about its node (the Describe RPC), as the job coordinator places ranks with
// it. Here, below the coordinator, because the node's own facts (node_facts.h) are gathered from
// the same fields.
#pragma once

#include <string>
#include <vector>

#include "agent/node/gpu_discovery.h"

namespace hvd::agent::node {

struct NodeDescription {
  std::string hostname;
  std::vector<std::string> addresses;  // the node's interface addresses
  int cpus = 0;
  std::vector<GpuInfo> gpus;  // NVML order; empty on a CPU-only node
  std::string version;        // agent version, for "agent too old" messages later
};

}  // namespace hvd::agent::node
