// One connection of the TCP store server, and the job namespace it serves. Internal to
// tcp_store_server.cc, which owns the io thread, the listener and the jobs; a Session only
// runs on that io thread and reaches its server through SessionOwner.
#pragma once

#include <atomic>
#include <boost/asio.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hvd/error.hpp"
#include "hvd_support/logging.h"
#include "store/store.h"
#include "store/tcp_protocol.h"

namespace hvd::store {

class Session;

// One job's namespace. The id and token never change; `removed` is read by every thread;
// everything else belongs to the io thread.
struct Job {
  Job(std::string id, std::string token) : id(std::move(id)), token(std::move(token)) {}

  const std::string id;
  const std::string token;
  std::atomic<bool> removed{false};
  std::unordered_map<std::string, Bytes> data;
  size_t bytes = 0;  // of the keys and values in `data`
  // Parked sessions by the key they wait for next. A parked session is listed exactly once,
  // under the first of its keys that is missing; it is re-listed when that key arrives and
  // others are still missing. Weak, so that a job never keeps a connection alive.
  std::unordered_map<std::string, std::vector<std::weak_ptr<Session>>> waiters;
};

// Wakes the sessions parked on `key` in `job` (io thread).
void notifyWaiters(Job& job, const std::string& key);

// Callbacks a session needs from its server; keeps Session independent of Impl's layout.
class SessionOwner {
 public:
  virtual ~SessionOwner() = default;
  virtual std::shared_ptr<Job> findJob(const std::string& id) = 0;
  virtual void forget(Session* session) = 0;
  virtual size_t maxFrameBytes() const = 0;
  virtual size_t maxJobBytes() const = 0;
  virtual std::chrono::milliseconds helloTimeout() const = 0;
};

// One client connection. Requests are served one at a time in arrival order; while a GET or
// WAIT is parked the session keeps reading, so a client that disconnects is noticed at once
// and a frame sent before the answer (which a synchronous client never does) drops it.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(SessionOwner& owner, boost::asio::ip::tcp::socket socket, std::string peer);

  // Starts reading, and gives the peer helloTimeout to present its credentials: a connection
  // that never says HELLO would otherwise hold a descriptor for ever.
  void start();

  // Ends the connection; idempotent.
  void close();

  // A key this session was listed under has arrived (it is no longer listed).
  void onKeyArrived();

  // The job was removed while this session was parked (it is no longer listed).
  void onJobRemoved();

 private:
  void maybeRead();
  void onHeader(const boost::system::error_code& ec);
  // Reads the announced payload in steps that grow with what has arrived (readPayloadStep), so
  // a peer that announces a large frame and sends little costs little.
  void readPayloadStep();
  void onPayloadStep(const boost::system::error_code& ec);
  void onPayload();
  // Sets `key` in the job's data, within the job's byte limit (InvalidArgumentError past it).
  void put(const std::string& key, Bytes value);
  void handle(const protocol::Request& request);
  void hello(const protocol::Request& request);
  // The reason goes to the log, once; the client only learns that it was refused, so that
  // probing cannot tell a wrong token from an unknown job. Never log the token.
  void deny(const std::string& reason);
  size_t frameLimit() const;
  void checkValueSize(const Bytes& value) const;
  std::vector<std::string> missingKeys(const std::vector<std::string>& keys) const;
  // Wakes the sessions listed under `key` in this session's job.
  void notify(const std::string& key);
  void park(protocol::Opcode op, std::vector<std::string> keys, int64_t timeoutMs);
  // Advances parkedPresent_ past the parked keys that exist; returns whether all do. Each
  // wake-up resumes where the last one stopped, so a wait for K keys that arrive one by one
  // costs O(K) in all, not O(K) per arrival.
  bool advanceParked();
  void listUnder(const std::string& key);
  // Leaves the parked state and the job's waiter list.
  void unpark();
  void answerParked();
  // The answer to a GET (value), WAIT (OK) or GET_MANY (VALUES) whose keys all exist.
  void answer(protocol::Opcode op, const std::vector<std::string>& keys);
  void sendOk(const Bytes& value = Bytes(), int64_t number = 0);
  void sendTimeout(std::vector<std::string> missing);
  void sendError(ErrorKind kind, const std::string& message);
  void send(const protocol::Response& response);
  void writeFront();
  void onWritten(const boost::system::error_code& ec);
  void disconnected(const boost::system::error_code& ec);
  void drop(const std::string& reason);

  SessionOwner& owner_;
  boost::asio::ip::tcp::socket socket_;
  const std::string peer_;
  boost::asio::steady_timer timer_;
  std::shared_ptr<spdlog::logger> log_;

  unsigned char header_[protocol::kFrameHeaderBytes] = {};
  std::string payload_;
  size_t payloadExpected_ = 0;  // the announced length of the frame being read
  std::shared_ptr<Job> job_;    // set by a successful HELLO
  std::deque<Bytes> writes_;
  bool closed_ = false;
  bool reading_ = false;
  bool closeAfterWrite_ = false;

  bool parked_ = false;
  protocol::Opcode parkedOp_ = protocol::Opcode::kWait;
  std::vector<std::string> parkedKeys_;
  size_t parkedPresent_ = 0;  // parkedKeys_[0, parkedPresent_) were present when last looked at
  std::string listedUnder_;   // the key of job_->waiters that lists this session, if any
  uint64_t parkGeneration_ = 0;
};

}  // namespace hvd::store
