// The TCP store client that workers use: one connection to the job's TcpStoreServer, opened
// with the job's id and token, and used synchronously (one request at a time, guarded by a
// mutex, so any thread may call).
//
// Every call has a deadline: a GET or WAIT gets its timeout plus a margin for the answer to
// travel, anything else a fixed limit. A server that goes away turns into hvd::PeerError
// naming its address; a server that stops answering into hvd::TimeoutError. Either leaves the
// connection unusable: later calls fail at once with the same cause, because the job's
// rendezvous is lost anyway and a silent reconnect could hide a restarted, empty store.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "store/store.h"

namespace hvd::store {

namespace protocol {
struct Request;
struct Response;
}  // namespace protocol

class TcpStore : public Store {
 public:
  // Connects to `address` ("host:port" or "[v6]:port"), retrying until `connectTimeout` since
  // the server may start a moment after the workers, and presents the credentials.
  // Throws hvd::InvalidArgumentError for a malformed address or refused credentials,
  // hvd::PeerError when no connection could be made in time, hvd::TimeoutError when the
  // server accepted but did not answer.
  TcpStore(const std::string& address, const std::string& jobId, const std::string& token,
           Timeout connectTimeout);
  ~TcpStore() override;
  TcpStore(const TcpStore&) = delete;
  TcpStore& operator=(const TcpStore&) = delete;

  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, Timeout timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  void wait(const std::vector<std::string>& keys, Timeout timeout) override;
  std::vector<Bytes> getMany(const std::vector<std::string>& keys, Timeout timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  void erase(const std::string& key) override;

  const std::string& address() const { return address_; }

 private:
  class Connection;

  // Sends one request and returns the OK response; throws for the others (`timeout` and
  // `keys` build the message of a TIMEOUT).
  protocol::Response call(const protocol::Request& request, Timeout answerWithin,
                          const std::vector<std::string>& keys = {}, Timeout timeout = {});

  const std::string address_;
  const std::string jobId_;
  std::mutex mutex_;  // one request at a time on the connection
  std::unique_ptr<Connection> connection_;
};

}  // namespace hvd::store
