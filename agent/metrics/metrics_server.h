// The HTTP endpoint of hvdagent's metrics (--metrics-listen): GET /metrics answers 200 with the
// text that `render` returns (Prometheus' text format, exposition.h); any other path is 404 and
// any other method 405. Boost.Beast on an io_context and a thread of its own, so a scrape never
// waits for, nor holds up, the agent's gRPC service; `render` runs on that thread.
//
// One request per connection (the answer says Connection: close): a scraper reconnects each
// time, which at Prometheus' intervals costs nothing, and no idle connection is kept. A client
// gets `requestTimeout` to send its request and take the answer, after which its connection is
// closed, so one that connects and says nothing holds nothing for long; past `maxConnections`
// open at once, new ones are closed at once.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "agent/common/net.h"

namespace hvd::agent::metrics {

struct MetricsServerOptions {
  // Long enough for a scraper on a loaded node, short enough that a silent client goes soon.
  std::chrono::milliseconds requestTimeout{5000};
  size_t maxConnections = 64;
};

class MetricsServer {
 public:
  using Render = std::function<std::string()>;

  // Binds `listen` and starts serving. Throws hvd::BackendError naming the address and the
  // system's reason when it cannot bind (in use, not an address of this host).
  MetricsServer(const common::ListenAddress& listen, Render render,
                MetricsServerOptions options = {});
  // stop().
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // The bound port (the kernel's choice for port 0).
  int port() const { return port_; }
  // Closes the listening socket and every open connection and joins the thread; `render` is not
  // called after it returns. Idempotent.
  void stop();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace hvd::agent::metrics
