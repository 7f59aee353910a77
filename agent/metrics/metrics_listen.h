// hvdagent --metrics-listen: where the metrics are served. Closed by default like --listen: a
// port alone means loopback, and any wider address must be written out.
#pragma once

#include <string>

#include "agent/common/net.h"

namespace hvd::agent::metrics {

// "PORT" and ":PORT" -> 127.0.0.1:PORT; "IP:PORT" and "[IPv6]:PORT" as given ("localhost" is
// 127.0.0.1, "0.0.0.0:9100" every interface); port 0: ephemeral. Throws
// hvd::InvalidArgumentError naming --metrics-listen and quoting `text` for anything else (a
// hostname, a missing or non-numeric port, a port above 65535, an empty value).
common::ListenAddress parseMetricsListen(const std::string& text);

}  // namespace hvd::agent::metrics
