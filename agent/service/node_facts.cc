#include "agent/service/node_facts.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <unistd.h>

#include <thread>

#include "agent/rpc/convert.h"

namespace hvd::agent::service {
namespace {

// The printable form of an IPv4 or IPv6 address, with the interface as scope for link-local
// IPv6 (an fe80:: address is meaningless without it); empty for other families.
std::string formatAddress(const sockaddr* addr, const char* ifname) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(addr);
    if (::inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text)) == nullptr) return {};
    return text;
  }
  if (addr->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(addr);
    if (::inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text)) == nullptr) return {};
    std::string result = text;
    if (IN6_IS_ADDR_LINKLOCAL(&in6->sin6_addr)) result += std::string("%") + ifname;
    return result;
  }
  return {};
}

bool isLoopback(const sockaddr* addr) {
  if (addr->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(addr);
    return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
  }
  if (addr->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(addr);
    return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
  }
  return false;
}

}  // namespace

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

std::vector<InterfaceAddresses> interfaceAddresses() {
  std::vector<InterfaceAddresses> result;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return result;
  for (const ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || it->ifa_name == nullptr) continue;
    if ((it->ifa_flags & IFF_UP) == 0 || (it->ifa_flags & IFF_LOOPBACK) != 0) continue;
    if (isLoopback(it->ifa_addr)) continue;
    const std::string address = formatAddress(it->ifa_addr, it->ifa_name);
    if (address.empty()) continue;
    InterfaceAddresses* entry = nullptr;
    for (InterfaceAddresses& existing : result) {
      if (existing.name == it->ifa_name) entry = &existing;
    }
    if (entry == nullptr) {
      result.push_back({it->ifa_name, {}});
      entry = &result.back();
    }
    entry->addresses.push_back(address);
  }
  ::freeifaddrs(list);
  return result;
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

NodeFacts collectNodeFacts(node::GpuDiscovery* gpus, bool tlsEnabled) {
  NodeFacts facts;
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) == 0) facts.node.hostname = name;
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

v1::DescribeResponse toProto(const NodeFacts& facts) {
  v1::DescribeResponse response = rpc::toProto(facts.node);
  for (const InterfaceAddresses& i : facts.interfaces) {
    v1::NetworkInterface* entry = response.add_interfaces();
    entry->set_name(i.name);
    for (const std::string& a : i.addresses) entry->add_addresses(a);
  }
  for (const std::string& f : facts.features) response.add_features(f);
  return response;
}

}  // namespace hvd::agent::service
