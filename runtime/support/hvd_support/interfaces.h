// The network interfaces of this host and their addresses (getifaddrs), for hvdagent's
// Describe and for the runtime's data-plane address when it has no store address to route
// toward (a file store under srun or mpirun).
#pragma once

#include <string>
#include <vector>

namespace hvd::transport {

struct InterfaceAddresses {
  std::string name;                    // "eth0"
  std::vector<std::string> addresses;  // "10.0.0.2", "fe80::1%eth0" (scope for link-local)
};

// Non-loopback interface addresses, grouped by interface name in the order the kernel lists
// them; interfaces that are down are skipped. Never throws: a failing getifaddrs yields an empty
// list.
std::vector<InterfaceAddresses> interfaceAddresses();

// The first IPv4 address of interfaceAddresses(), or "127.0.0.1" when there is none.
std::string firstInterfaceIpv4();

// The local address that routes to `host` (the interface a peer can reach us on when it can
// reach the store), or 127.0.0.1 for loopback stores.
std::string localAddressToward(const std::string& host);

}  // namespace hvd::transport
