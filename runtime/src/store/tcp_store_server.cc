#include "store/tcp_store_server.h"

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <deque>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/logging.h"
#include "hvd/error.hpp"
#include "store/tcp_protocol.h"

namespace hvd::store {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using protocol::Opcode;
using protocol::Request;
using protocol::Response;

// Longer waits are clamped: a timer needs a representable expiry, and no rendezvous
// legitimately waits for a month.
constexpr int64_t kMaxWaitMs = int64_t{30} * 24 * 3600 * 1000;

// After accept fails for lack of descriptors, retrying at once would spin the io thread.
constexpr std::chrono::milliseconds kAcceptRetry{50};

// Before HELLO a peer is a stranger: a HELLO is two short strings, so a stranger's frame is
// capped far below the frame limit, which keeps unauthenticated memory per connection small.
constexpr size_t kMaxHelloFrameBytes = 64 * 1024;

// Client-supplied text (a job id) is logged at most this long, with odd bytes escaped, so that
// a peer cannot flood or forge log lines.
constexpr size_t kMaxLoggedChars = 64;

std::string printable(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < text.size() && i < kMaxLoggedChars; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xF]);
    }
  }
  if (text.size() > kMaxLoggedChars) out += "...";
  return out;
}

std::string endpointText(const tcp::endpoint& endpoint) {
  const auto address = endpoint.address();
  const std::string host = address.is_v6() ? "[" + address.to_string() + "]" : address.to_string();
  return host + ":" + std::to_string(endpoint.port());
}

class Session;

// One job's namespace. The id and token never change; `removed` is read by every thread;
// everything else belongs to the io thread.
struct Job {
  Job(std::string id, std::string token) : id(std::move(id)), token(std::move(token)) {}

  const std::string id;
  const std::string token;
  std::atomic<bool> removed{false};
  std::unordered_map<std::string, Bytes> data;
  // Parked sessions by the key they wait for next. A parked session is listed exactly once,
  // under the first of its keys that is missing; it is re-listed when that key arrives and
  // others are still missing. Weak, so that a job never keeps a connection alive.
  std::unordered_map<std::string, std::vector<std::weak_ptr<Session>>> waiters;
};

// Callbacks a session needs from its server; keeps Session independent of Impl's layout.
class SessionOwner {
 public:
  virtual ~SessionOwner() = default;
  virtual std::shared_ptr<Job> findJob(const std::string& id) = 0;
  virtual void forget(Session* session) = 0;
  virtual size_t maxFrameBytes() const = 0;
  virtual std::chrono::milliseconds helloTimeout() const = 0;
};

// One client connection. Requests are served one at a time in arrival order; while a GET or
// WAIT is parked the session keeps reading, so a client that disconnects is noticed at once
// and a frame sent before the answer (which a synchronous client never does) drops it.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(SessionOwner& owner, tcp::socket socket, std::string peer)
      : owner_(owner),
        socket_(std::move(socket)),
        peer_(std::move(peer)),
        timer_(socket_.get_executor()),
        log_(logging::get("store")) {}

  // Starts reading, and gives the peer helloTimeout to present its credentials: a connection
  // that never says HELLO would otherwise hold a descriptor for ever.
  void start() {
    timer_.expires_after(owner_.helloTimeout());
    timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (ec || self->job_ || self->closed_) return;
      self->drop("no HELLO within " + std::to_string(self->owner_.helloTimeout().count()) + " ms");
    });
    maybeRead();
  }

  // Ends the connection; idempotent.
  void close() {
    if (closed_) return;
    closed_ = true;
    if (parked_) unpark();
    boost::system::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    timer_.cancel();
    owner_.forget(this);
  }

  // A key this session was listed under has arrived (it is no longer listed).
  void onKeyArrived() {
    if (!parked_ || closed_) return;
    listedUnder_.clear();
    std::vector<std::string> missing = missingKeys(parkedKeys_);
    if (missing.empty()) {
      answerParked();
      return;
    }
    listUnder(missing.front());
  }

  // The job was removed while this session was parked (it is no longer listed).
  void onJobRemoved() {
    if (!parked_ || closed_) return;
    listedUnder_.clear();
    parked_ = false;
    timer_.cancel();
    sendError(ErrorKind::kPeer, "job '" + job_->id + "' was removed from the store");
  }

 private:
  void maybeRead() {
    if (closed_ || reading_ || closeAfterWrite_ || !writes_.empty()) return;
    reading_ = true;
    asio::async_read(socket_, asio::buffer(header_),
                     [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
                       self->onHeader(ec);
                     });
  }

  void onHeader(const boost::system::error_code& ec) {
    reading_ = false;
    if (closed_) return;
    if (ec) {
      disconnected(ec);
      return;
    }
    if (parked_) {
      drop("it sent a request while its " + std::string(parkedIsGet_ ? "GET" : "WAIT") +
           " was still pending");
      return;
    }
    std::string error;
    // The length is checked here, before the payload buffer grows to hold it.
    const std::optional<uint32_t> length =
        protocol::decodeFrameLength(header_, frameLimit(), &error);
    if (!length) {
      drop(error);
      return;
    }
    payload_.resize(*length);
    reading_ = true;
    asio::async_read(socket_, asio::buffer(payload_),
                     [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
                       self->onPayload(ec);
                     });
  }

  void onPayload(const boost::system::error_code& ec) {
    reading_ = false;
    if (closed_) return;
    if (ec) {
      disconnected(ec);
      return;
    }
    std::string error;
    std::optional<Request> request = protocol::decodeRequest(payload_, &error);
    // Large values are copied out; keep the buffer from pinning a 16 MiB frame per idle client.
    if (payload_.capacity() > 4096) std::string().swap(payload_);
    if (!request) {
      drop("malformed frame: " + error);
      return;
    }
    try {
      handle(*request);
    } catch (const Error& e) {
      sendError(e.kind(), e.what());
    } catch (const std::exception& e) {
      // Out of memory or a broken invariant: this connection cannot be served, the rest can.
      log_->error("dropping connection from {}: {}", peer_, e.what());
      close();
      return;
    }
    maybeRead();
  }

  void handle(const Request& request) {
    if (!job_) {
      hello(request);
      return;
    }
    if (request.op == Opcode::kHello) {
      drop("it sent a second HELLO");
      return;
    }
    if (job_->removed.load()) {
      sendError(ErrorKind::kPeer, "job '" + job_->id + "' was removed from the store");
      return;
    }
    Job& job = *job_;
    switch (request.op) {
      case Opcode::kSet:
        checkValueSize(request.value);
        job.data[request.key] = request.value;
        notify(request.key);
        sendOk();
        break;
      case Opcode::kGet:
      case Opcode::kWait: {
        std::vector<std::string> keys =
            request.op == Opcode::kGet ? std::vector<std::string>{request.key} : request.keys;
        if (missingKeys(keys).empty()) {
          sendOk(request.op == Opcode::kGet ? job.data[request.key] : Bytes());
        } else {
          park(request.op == Opcode::kGet, std::move(keys), request.number);
        }
        break;
      }
      case Opcode::kAdd: {
        auto it = job.data.find(request.key);
        const int64_t sum =
            addToCounter(request.key, it == job.data.end() ? nullptr : &it->second, request.number);
        job.data[request.key] = std::to_string(sum);
        notify(request.key);
        sendOk(Bytes(), sum);
        break;
      }
      case Opcode::kCompareSet: {
        checkValueSize(request.value);
        auto it = job.data.find(request.key);
        const bool matches =
            it == job.data.end() ? request.expected.empty() : it->second == request.expected;
        if (!matches) {
          sendOk(it == job.data.end() ? Bytes() : it->second);
          break;
        }
        job.data[request.key] = request.value;
        notify(request.key);
        sendOk(request.value);
        break;
      }
      case Opcode::kCheck:
        sendOk(Bytes(), missingKeys(request.keys).empty() ? 1 : 0);
        break;
      case Opcode::kErase:
        job.data.erase(request.key);
        sendOk();
        break;
      default:
        drop(std::string("unexpected ") + protocol::opcodeName(request.op));
        break;
    }
  }

  void hello(const Request& request) {
    if (request.op != Opcode::kHello) {
      deny(std::string("its first request was ") + protocol::opcodeName(request.op) +
           ", not HELLO");
      return;
    }
    std::shared_ptr<Job> job = owner_.findJob(request.key);
    if (!job) {
      deny("unknown job '" + printable(request.key) + "'");
      return;
    }
    if (!protocol::constantTimeEquals(request.value, job->token)) {
      deny("wrong token for job '" + printable(request.key) + "'");
      return;
    }
    job_ = std::move(job);
    timer_.cancel();  // the HELLO deadline
    log_->debug("{} joined job '{}'", peer_, job_->id);
    sendOk();
  }

  // The reason goes to the log, once; the client only learns that it was refused, so that
  // probing cannot tell a wrong token from an unknown job. Never log the token.
  void deny(const std::string& reason) {
    log_->warn("refused connection from {}: {}", peer_, reason);
    Response response;
    response.op = Opcode::kDenied;
    response.value = "the store refused the credentials";
    send(response);
    closeAfterWrite_ = true;
  }

  size_t frameLimit() const {
    return job_ ? owner_.maxFrameBytes() : std::min(owner_.maxFrameBytes(), kMaxHelloFrameBytes);
  }

  void checkValueSize(const Bytes& value) const {
    const size_t limit = owner_.maxFrameBytes() > protocol::kResponseOverheadBytes
                             ? owner_.maxFrameBytes() - protocol::kResponseOverheadBytes
                             : 0;
    if (value.size() > limit) {
      throw InvalidArgumentError("a store value of " + std::to_string(value.size()) +
                                 " bytes exceeds the limit of " + std::to_string(limit) + " bytes");
    }
  }

  std::vector<std::string> missingKeys(const std::vector<std::string>& keys) const {
    std::vector<std::string> missing;
    for (const auto& key : keys) {
      if (job_->data.count(key) == 0) missing.push_back(key);
    }
    return missing;
  }

  // Wakes the sessions listed under `key` in this session's job.
  void notify(const std::string& key) {
    auto it = job_->waiters.find(key);
    if (it == job_->waiters.end()) return;
    std::vector<std::weak_ptr<Session>> listed = std::move(it->second);
    job_->waiters.erase(it);
    for (auto& weak : listed) {
      if (auto session = weak.lock()) session->onKeyArrived();
    }
  }

  void park(bool isGet, std::vector<std::string> keys, int64_t timeoutMs) {
    timeoutMs = std::clamp<int64_t>(timeoutMs, 0, kMaxWaitMs);
    if (timeoutMs == 0) {
      sendTimeout(missingKeys(keys));
      return;
    }
    parked_ = true;
    parkedIsGet_ = isGet;
    parkedKeys_ = std::move(keys);
    const uint64_t generation = ++parkGeneration_;
    listUnder(missingKeys(parkedKeys_).front());
    timer_.expires_after(std::chrono::milliseconds(timeoutMs));
    timer_.async_wait([self = shared_from_this(), generation](const boost::system::error_code& ec) {
      // A timer that expired just as the keys arrived may still run; the generation tells.
      if (ec || !self->parked_ || self->closed_ || self->parkGeneration_ != generation) return;
      self->unpark();
      self->sendTimeout(self->missingKeys(self->parkedKeys_));
    });
  }

  void listUnder(const std::string& key) {
    listedUnder_ = key;
    job_->waiters[key].push_back(weak_from_this());
  }

  // Leaves the parked state and the job's waiter list.
  void unpark() {
    parked_ = false;
    timer_.cancel();
    if (listedUnder_.empty()) return;
    auto it = job_->waiters.find(listedUnder_);
    if (it != job_->waiters.end()) {
      auto& listed = it->second;
      listed.erase(std::remove_if(listed.begin(), listed.end(),
                                  [this](const std::weak_ptr<Session>& weak) {
                                    auto session = weak.lock();
                                    return !session || session.get() == this;
                                  }),
                   listed.end());
      if (listed.empty()) job_->waiters.erase(it);
    }
    listedUnder_.clear();
  }

  void answerParked() {
    parked_ = false;
    timer_.cancel();
    sendOk(parkedIsGet_ ? job_->data[parkedKeys_.front()] : Bytes());
  }

  void sendOk(const Bytes& value = Bytes(), int64_t number = 0) {
    Response response;
    response.op = Opcode::kOk;
    response.value = value;
    response.number = number;
    send(response);
  }

  void sendTimeout(std::vector<std::string> missing) {
    Response response;
    response.op = Opcode::kTimeout;
    response.keys = std::move(missing);
    send(response);
  }

  void sendError(ErrorKind kind, const std::string& message) {
    Response response;
    response.op = Opcode::kError;
    response.number = static_cast<int64_t>(kind);
    response.value = message;
    send(response);
  }

  void send(const Response& response) {
    if (closed_) return;
    // Limit plus overhead: values were checked on the way in, so this cannot refuse a value
    // the server stored.
    writes_.push_back(protocol::encodeResponse(
        response, owner_.maxFrameBytes() + protocol::kResponseOverheadBytes));
    if (writes_.size() == 1) writeFront();
  }

  void writeFront() {
    asio::async_write(socket_, asio::buffer(writes_.front()),
                      [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
                        self->onWritten(ec);
                      });
  }

  void onWritten(const boost::system::error_code& ec) {
    if (closed_) return;
    if (ec) {
      disconnected(ec);
      return;
    }
    writes_.pop_front();
    if (!writes_.empty()) {
      writeFront();
    } else if (closeAfterWrite_) {
      close();
    } else {
      maybeRead();
    }
  }

  void disconnected(const boost::system::error_code& ec) {
    if (ec == asio::error::eof || ec == asio::error::connection_reset) {
      log_->debug("{} disconnected", peer_);
    } else if (ec != asio::error::operation_aborted) {
      log_->info("connection from {} failed: {}", peer_, ec.message());
    }
    close();
  }

  void drop(const std::string& reason) {
    log_->warn("dropping connection from {}: {}", peer_, reason);
    close();
  }

  SessionOwner& owner_;
  tcp::socket socket_;
  const std::string peer_;
  asio::steady_timer timer_;
  std::shared_ptr<spdlog::logger> log_;

  unsigned char header_[protocol::kFrameHeaderBytes] = {};
  std::string payload_;
  std::shared_ptr<Job> job_;  // set by a successful HELLO
  std::deque<Bytes> writes_;
  bool closed_ = false;
  bool reading_ = false;
  bool closeAfterWrite_ = false;

  bool parked_ = false;
  bool parkedIsGet_ = false;
  std::vector<std::string> parkedKeys_;
  std::string listedUnder_;  // the key of job_->waiters that lists this session, if any
  uint64_t parkGeneration_ = 0;
};

}  // namespace

class TcpStoreServer::Impl : public SessionOwner {
 public:
  explicit Impl(TcpStoreServerOptions options)
      : options_(std::move(options)), log_(logging::get("store")) {}

  ~Impl() override { stop(); }

  void start() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (state_ != State::kNew) {
      throw InvalidArgumentError("the store server was already started");
    }
    const tcp::endpoint endpoint = resolveBindEndpoint();
    boost::system::error_code ec;
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      boost::system::error_code ignored;
      acceptor_.close(ignored);
      throw BackendError("cannot listen for store clients on " + endpointText(endpoint) + ": " +
                         ec.message());
    }
    const tcp::endpoint bound = acceptor_.local_endpoint(ec);
    port_ = bound.port();
    address_ = endpointText(bound);
    accept();
    work_.emplace(asio::make_work_guard(io_));
    thread_ = std::thread([this] { runIo(); });
    state_ = State::kRunning;
    log_->info("server listening on {}", address_);
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (state_ != State::kRunning) {
        state_ = State::kStopped;
        return;
      }
      state_ = State::kStopped;
    }
    asio::post(io_, [this] { closeEverything(); });
    work_.reset();
    thread_.join();
  }

  uint16_t port() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return port_;
  }

  std::string address() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return address_;
  }

  void addJob(const std::string& jobId, const std::string& token) {
    if (jobId.empty() || token.empty()) {
      throw InvalidArgumentError("a store job needs a non-empty id and token");
    }
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = jobs_.find(jobId);
    if (it != jobs_.end()) {
      if (protocol::constantTimeEquals(token, it->second->token)) return;
      throw InvalidArgumentError("store job '" + jobId + "' is already registered");
    }
    jobs_.emplace(jobId, std::make_shared<Job>(jobId, token));
  }

  void removeJob(const std::string& jobId) {
    std::shared_ptr<Job> job;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = jobs_.find(jobId);
      if (it == jobs_.end()) return;
      job = std::move(it->second);
      jobs_.erase(it);
    }
    // From here no request of the job is served; the io thread fails its waiters and frees
    // its keys, since both belong to that thread.
    job->removed.store(true);
    asio::post(io_, [job] {
      auto waiters = std::move(job->waiters);
      job->waiters.clear();
      for (auto& [key, listed] : waiters) {
        for (auto& weak : listed) {
          if (auto session = weak.lock()) session->onJobRemoved();
        }
      }
      job->data.clear();
    });
  }

  std::shared_ptr<Job> findJob(const std::string& id) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = jobs_.find(id);
    return it == jobs_.end() ? nullptr : it->second;
  }

  void forget(Session* session) override { sessions_.erase(session); }

  size_t maxFrameBytes() const override { return options_.maxFrameBytes; }
  std::chrono::milliseconds helloTimeout() const override { return options_.helloTimeout; }

 private:
  enum class State { kNew, kRunning, kStopped };

  tcp::endpoint resolveBindEndpoint() {
    boost::system::error_code ec;
    const auto address = asio::ip::make_address(options_.bindAddress, ec);
    if (!ec) return tcp::endpoint(address, options_.port);
    tcp::resolver resolver(io_);
    auto results = resolver.resolve(options_.bindAddress, std::to_string(options_.port), ec);
    if (ec || results.empty()) {
      throw BackendError("cannot listen for store clients on " + options_.bindAddress + ":" +
                         std::to_string(options_.port) + ": " +
                         (ec ? ec.message() : std::string("no address found")));
    }
    return results.begin()->endpoint();
  }

  void runIo() {
    // Handlers catch what they can; this is the last guard, because an exception escaping a
    // thread would terminate the agent that embeds the server.
    while (true) {
      try {
        io_.run();
        return;
      } catch (const std::exception& e) {
        log_->error("io thread handler failed: {}", e.what());
      }
    }
  }

  void accept() {
    acceptor_.async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
      if (!acceptor_.is_open()) return;
      if (ec) {
        log_->warn("accept on {} failed: {}", address_, ec.message());
        acceptRetry_.expires_after(kAcceptRetry);
        acceptRetry_.async_wait([this](const boost::system::error_code& waitEc) {
          if (!waitEc && acceptor_.is_open()) accept();
        });
        return;
      }
      boost::system::error_code optionEc;
      socket.set_option(tcp::no_delay(true), optionEc);
      const tcp::endpoint remote = socket.remote_endpoint(optionEc);
      const std::string peer = optionEc ? std::string("an unknown peer") : endpointText(remote);
      auto session = std::make_shared<Session>(*this, std::move(socket), peer);
      sessions_[session.get()] = session;
      session->start();
      accept();
    });
  }

  void closeEverything() {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    acceptRetry_.cancel();
    // close() erases from sessions_, so walk a copy.
    std::vector<std::weak_ptr<Session>> sessions;
    for (auto& [raw, weak] : sessions_) sessions.push_back(weak);
    for (auto& weak : sessions) {
      if (auto session = weak.lock()) session->close();
    }
    sessions_.clear();
  }

  const TcpStoreServerOptions options_;
  std::shared_ptr<spdlog::logger> log_;
  // The io objects below are declared after io_ so that they are destroyed before it.
  asio::io_context io_{1};
  tcp::acceptor acceptor_{io_};
  asio::steady_timer acceptRetry_{io_};
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::thread thread_;
  std::unordered_map<Session*, std::weak_ptr<Session>> sessions_;  // io thread only

  mutable std::mutex mutex_;  // guards the members below
  State state_ = State::kNew;
  uint16_t port_ = 0;
  std::string address_;
  std::unordered_map<std::string, std::shared_ptr<Job>> jobs_;
};

TcpStoreServer::TcpStoreServer(TcpStoreServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

TcpStoreServer::~TcpStoreServer() = default;

void TcpStoreServer::start() { impl_->start(); }
void TcpStoreServer::stop() { impl_->stop(); }
uint16_t TcpStoreServer::port() const { return impl_->port(); }
std::string TcpStoreServer::address() const { return impl_->address(); }
void TcpStoreServer::addJob(const std::string& jobId, const std::string& token) {
  impl_->addJob(jobId, token);
}
void TcpStoreServer::removeJob(const std::string& jobId) { impl_->removeJob(jobId); }

}  // namespace hvd::store
