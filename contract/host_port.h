// "host:port" and "[IPv6]:port", as hvd writes addresses everywhere one process tells another
// where to connect (HVD_STORE_ADDR, --listen, agent addresses) and reads them back: one parser
// and one writer for the runtime, the agent and hvdrun. Header only (hvd_contract_env), so that
// libhvd needs no library for it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace hvd::contract {

struct HostPort {
  std::string host;  // without brackets
  int port = 0;      // 0..65535
};

// Splits `text`; nullopt with `*why` saying what is wrong ("no port", "an IPv6 address needs
// brackets", ...) when it is not host:port or [IPv6]:port with a decimal port of 0..65535. The
// host may be empty (":80"); callers that need one say so in their own words.
inline std::optional<HostPort> splitHostPort(std::string_view text, std::string* why) {
  const auto fail = [&](const char* reason) {
    if (why != nullptr) *why = reason;
    return std::optional<HostPort>();
  };
  HostPort out;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return fail("malformed IPv6 address: no ']:' after it");
    }
    out.host = std::string(text.substr(1, close - 1));
    port = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) return fail("no port");
    out.host = std::string(text.substr(0, colon));
    port = text.substr(colon + 1);
    if (out.host.find(':') != std::string::npos) return fail("an IPv6 address needs brackets");
  }
  if (port.empty() || port.size() > 5) return fail("the port is not a number");
  for (char c : port) {
    if (c < '0' || c > '9') return fail("the port is not a number");
    out.port = out.port * 10 + (c - '0');
  }
  if (out.port > 65535) return fail("the port is above 65535");
  return out;
}

// The host with its port: brackets around an IPv6 address.
inline std::string joinHostPort(const std::string& host, int port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

}  // namespace hvd::contract
