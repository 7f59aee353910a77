#include "hvd_support/interfaces.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <boost/asio.hpp>

namespace hvd::transport {
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

std::string firstInterfaceIpv4() {
  for (const InterfaceAddresses& i : interfaceAddresses()) {
    for (const std::string& a : i.addresses) {
      if (a.find(':') == std::string::npos) return a;
    }
  }
  return "127.0.0.1";
}

std::string localAddressToward(const std::string& host) {
  try {
    boost::asio::io_context io;
    boost::asio::ip::tcp::resolver resolver(io);
    auto results = resolver.resolve(host, "9");
    for (const auto& entry : results) {
      const auto address = entry.endpoint().address();
      if (address.is_loopback()) return address.is_v6() ? "::1" : "127.0.0.1";
      boost::asio::ip::udp::socket probe(io);
      boost::system::error_code ec;
      probe.open(address.is_v6() ? boost::asio::ip::udp::v6() : boost::asio::ip::udp::v4(), ec);
      if (ec) continue;
      probe.connect(boost::asio::ip::udp::endpoint(address, 9), ec);  // sends nothing: routing only
      if (ec) continue;
      return probe.local_endpoint().address().to_string();
    }
  } catch (const std::exception&) {
  }
  return "127.0.0.1";
}

}  // namespace hvd::transport
