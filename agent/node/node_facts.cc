#include "agent/node/node_facts.h"

#include <sched.h>
#include <unistd.h>

#include <thread>

#include "hvd_support/host.h"

namespace hvd::agent::node {

std::string agentVersion() { return HVD_AGENT_VERSION; }

std::vector<std::string> buildFeatures(bool tlsEnabled) {
  std::vector<std::string> features = {"tcp", "shm"};
#if defined(HVD_AGENT_HAVE_NCCL)
  features.push_back("nccl");
#endif
#if defined(HVD_AGENT_HAVE_MPI)
  features.push_back("mpi");
#endif
  if (tlsEnabled) features.push_back("tls");
  return features;
}

int availableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) {
    return CPU_COUNT(&set);
  }
  const unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? static_cast<int>(n) : 1;
}

NodeFacts collectNodeFacts(GpuDiscovery* gpus, bool tlsEnabled) {
  NodeFacts facts;
  facts.node.hostname = localHostName();
  facts.interfaces = interfaceAddresses();
  for (const InterfaceAddresses& i : facts.interfaces) {
    facts.node.addresses.insert(facts.node.addresses.end(), i.addresses.begin(), i.addresses.end());
  }
  facts.node.cpus = availableCpus();
  if (gpus != nullptr) facts.node.gpus = gpus->discover();
  facts.node.version = agentVersion();
  facts.features = buildFeatures(tlsEnabled);
  return facts;
}

}  // namespace hvd::agent::node
