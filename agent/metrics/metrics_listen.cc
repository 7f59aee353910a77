#include "agent/metrics/metrics_listen.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cctype>
#include <optional>

#include "contract/host_port.h"
#include "hvd/error.hpp"

namespace hvd::agent::metrics {
namespace {

bool isIpLiteral(const std::string& host) {
  in_addr a4;
  in6_addr a6;
  return ::inet_pton(AF_INET, host.c_str(), &a4) == 1 ||
         ::inet_pton(AF_INET6, host.c_str(), &a6) == 1;
}

}  // namespace

common::ListenAddress parseMetricsListen(const std::string& text) {
  const auto bad = [&](const std::string& why) {
    return InvalidArgumentError("--metrics-listen '" + text + "': " + why +
                                " (expected PORT, IP:PORT or [IPv6]:PORT, e.g. 9100 for "
                                "127.0.0.1:9100 or 0.0.0.0:9100 for every interface)");
  };
  if (text.empty()) throw bad("is empty");
  const bool portOnly =
      std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c); });
  // A port alone is loopback: serving the metrics wider must be asked for by address.
  const std::string full = portOnly ? ":" + text : text;
  std::string why;
  const std::optional<contract::HostPort> split = contract::splitHostPort(full, &why);
  if (!split) throw bad(why);
  common::ListenAddress out;
  out.port = split->port;
  out.host = split->host;
  if (out.host.empty() || out.host == "localhost") out.host = "127.0.0.1";
  if (!isIpLiteral(out.host)) throw bad("'" + out.host + "' is not an IP address");
  return out;
}

}  // namespace hvd::agent::metrics
