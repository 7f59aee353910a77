#include "agent/common/net.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "contract/host_port.h"
#include "hvd/error.hpp"

namespace hvd::agent::common {
namespace {

bool isIpLiteral(const std::string& host, bool* ipv6) {
  in_addr a4;
  in6_addr a6;
  if (::inet_pton(AF_INET, host.c_str(), &a4) == 1) {
    *ipv6 = false;
    return true;
  }
  if (::inet_pton(AF_INET6, host.c_str(), &a6) == 1) {
    *ipv6 = true;
    return true;
  }
  return false;
}

}  // namespace

std::string ListenAddress::toString() const { return joinHostPort(host, port); }

ListenAddress parseListenAddress(const std::string& text) {
  const auto bad = [&](const std::string& why) {
    return InvalidArgumentError("--listen '" + text + "': " + why +
                                " (expected IP:PORT or [IPv6]:PORT, e.g. 127.0.0.1:7475)");
  };
  std::string why;
  std::optional<contract::HostPort> split = contract::splitHostPort(text, &why);
  if (!split) throw bad(why);
  std::string host = split->host;
  ListenAddress result;
  result.port = split->port;
  if (host == "localhost") host = "127.0.0.1";
  bool ipv6 = false;
  if (!isIpLiteral(host, &ipv6)) throw bad("'" + host + "' is not an IP address");
  result.host = host;
  return result;
}

std::string joinHostPort(const std::string& host, int port) {
  return contract::joinHostPort(host, port);
}

bool isLoopbackName(const std::string& host) {
  if (host == "localhost" || host == "localhost.localdomain" || host == "ip6-localhost" ||
      host == "ip6-loopback") {
    return true;
  }
  std::string h = host;
  if (h.size() > 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  in_addr a4;
  in6_addr a6;
  if (::inet_pton(AF_INET, h.c_str(), &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  if (::inet_pton(AF_INET6, h.c_str(), &a6) == 1) return IN6_IS_ADDR_LOOPBACK(&a6);
  return false;
}

int pickFreePort(const std::string& host) {
  bool ipv6 = false;
  if (!isIpLiteral(host, &ipv6)) return 0;
  const int fd = ::socket(ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_storage storage = {};
  socklen_t len = 0;
  if (ipv6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&storage);
    a->sin6_family = AF_INET6;
    ::inet_pton(AF_INET6, host.c_str(), &a->sin6_addr);
    len = sizeof(*a);
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&storage);
    a->sin_family = AF_INET;
    ::inet_pton(AF_INET, host.c_str(), &a->sin_addr);
    len = sizeof(*a);
  }
  int port = 0;
  auto* addr = reinterpret_cast<sockaddr*>(&storage);
  if (::bind(fd, addr, len) == 0 && ::getsockname(fd, addr, &len) == 0) {
    port = ipv6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port)
                : ntohs(reinterpret_cast<sockaddr_in*>(&storage)->sin_port);
  }
  ::close(fd);
  return port;
}

}  // namespace hvd::agent::common
