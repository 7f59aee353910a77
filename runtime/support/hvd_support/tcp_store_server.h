// The TCP store server: embedded by the agent and the launcher, one per host that serves jobs.
// It keeps every job's keys in memory, in a namespace of their own, and serves only clients
// that open their connection with the job's id and token (HELLO).
//
// Everything runs on one io thread, fully asynchronously: a GET or WAIT whose keys are absent
// is parked server-side and answered when the keys arrive or its deadline timer fires, so one
// thread serves thousands of waiting ranks and no request can block another. A malformed
// frame (bad length, unknown opcode, truncated field) drops that one connection; nothing a
// client sends can stop the server.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace hvd::store {

struct TcpStoreServerOptions {
  // Loopback by default, like every hvd listener; a wider bind is an explicit choice.
  std::string bindAddress = "127.0.0.1";
  uint16_t port = 0;                        // 0 picks an ephemeral port; see port()
  size_t maxFrameBytes = size_t{16} << 20;  // a larger frame drops the connection
  // The keys and values one job may hold: a set that would pass it is refused with an error
  // (the connection stays), so one job cannot take the memory of the agent that serves many.
  // hvd's own keys are a few KiB per rank.
  size_t maxJobBytes = size_t{64} << 20;
  // A connection that has not presented its credentials by then is dropped.
  std::chrono::milliseconds helloTimeout{30000};
};

class TcpStoreServer {
 public:
  explicit TcpStoreServer(TcpStoreServerOptions options = {});
  ~TcpStoreServer();  // stops and joins
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  // Binds and starts the io thread. Throws hvd::BackendError naming the address when the bind
  // fails, hvd::InvalidArgumentError when called twice.
  void start();
  // Closes the listener and every connection (clients see the connection drop) and joins the
  // io thread. Idempotent; a stopped server cannot be started again.
  void stop();

  // The bound port and "host:port" ("[::1]:port" for IPv6); valid after start().
  uint16_t port() const;
  std::string address() const;

  // Registers a job's credential. Thread-safe. Adding a known job again with the same token is
  // a no-op; with another token it throws hvd::InvalidArgumentError. Ids and tokens must be
  // non-empty.
  void addJob(const std::string& jobId, const std::string& token);
  // Forgets a job and its keys; its parked waiters and later requests on its open connections
  // get a PeerError, new connections are refused. Thread-safe; unknown ids are ignored.
  void removeJob(const std::string& jobId);

  // The embedding program's own access to a job's keys (elastic mode's leader), from any thread
  // but the server's io thread: set() wakes the job's waiters as a client's SET does and throws
  // hvd::InvalidArgumentError for an unknown job; value() is a key's value, nullopt when the key
  // or the job is absent. Each waits for the io thread (a queued handler), never for a client.
  void set(const std::string& jobId, const std::string& key, const std::string& value);
  std::optional<std::string> value(const std::string& jobId, const std::string& key);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hvd::store
