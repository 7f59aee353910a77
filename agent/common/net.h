// Addresses for hvdagent and hvdrun: parsing --listen, naming endpoints, and picking ports on the
// address the agent serves (the job store and MASTER_PORT live on the same address as the agent, so
// a loopback agent never opens anything wider).
#pragma once

#include <string>

namespace hvd::agent::common {

// "0.0.0.0" or "::": every address of this host.
inline bool isWildcardAddress(const std::string& host) { return host == "0.0.0.0" || host == "::"; }

struct ListenAddress {
  std::string host;  // an IP literal without brackets: "127.0.0.1", "::1", "0.0.0.0", "::"
  int port = 0;      // 0: ephemeral

  bool ipv6() const { return host.find(':') != std::string::npos; }
  bool wildcard() const { return isWildcardAddress(host); }
  // "127.0.0.1:7475" / "[::1]:7475": what gRPC binds.
  std::string toString() const;
};

// "IP:PORT" or "[IPv6]:PORT"; "localhost" is taken as 127.0.0.1. Throws
// hvd::InvalidArgumentError naming the value for anything else (a hostname, a missing or
// non-numeric port, a port above 65535), because the agent must bind exactly what it was told.
ListenAddress parseListenAddress(const std::string& text);

// "host:port", with brackets when host is an IPv6 literal.
std::string joinHostPort(const std::string& host, int port);

// localhost, localhost.localdomain, ip6-localhost, 127.0.0.0/8 and ::1: names that mean "this
// machine" to whoever resolves them, so useless as an address for other hosts.
bool isLoopbackName(const std::string& host);

// A port the kernel says is free on `host` (an IP literal; a wildcard means every address)
// right now, or 0 when none could be bound. Released before returning, so another process may
// take it first; good enough for MASTER_PORT, which only torch env:// jobs use.
int pickFreePort(const std::string& host);

}  // namespace hvd::agent::common
