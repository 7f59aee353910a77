#include "store/tcp_store_client.h"

#include <algorithm>
#include <boost/asio.hpp>
#include <thread>

#include "contract/host_port.h"
#include "hvd/error.hpp"
#include "store/tcp_protocol.h"

namespace hvd::store {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using protocol::Opcode;
using protocol::Request;
using protocol::Response;

// A parked GET/WAIT is answered by the server when its own timer fires; the margin covers the
// trip back and a busy server, so that the server's TIMEOUT (which names the missing keys)
// normally arrives before the client gives up on its own.
constexpr Timeout kAnswerMargin{10'000};
// Requests that do not wait are answered in microseconds; not hearing back for this long means
// the server is stopped or the network is cut.
constexpr Timeout kRequestLimit{30'000};
// Even with the connect timeout used up by retries, a server that accepted deserves a moment
// to answer HELLO.
constexpr Timeout kMinHelloWait{1'000};
// Connect retries: quick at first (the server is usually a moment away), then gentle.
constexpr std::chrono::milliseconds kFirstRetry{10};
constexpr std::chrono::milliseconds kMaxRetry{250};

Timeout withMargin(Timeout timeout) {
  if (timeout < Timeout::zero()) timeout = Timeout::zero();
  return timeout >= Timeout::max() - kAnswerMargin ? Timeout::max() : timeout + kAnswerMargin;
}

int64_t wireTimeout(Timeout timeout) { return std::max<int64_t>(0, timeout.count()); }

struct HostPort {
  std::string host;
  uint16_t port = 0;
};

HostPort splitAddress(const std::string& address) {
  auto bad = [&](const std::string& why) {
    return InvalidArgumentError("store address '" + address + "' is not host:port or [v6]:port (" +
                                why + ")");
  };
  std::string why;
  const std::optional<contract::HostPort> split = contract::splitHostPort(address, &why);
  if (!split) throw bad(why);
  if (split->host.empty()) throw bad("no host");
  if (split->port == 0) throw bad("the port is 0");
  HostPort result;
  result.host = split->host;
  result.port = static_cast<uint16_t>(split->port);
  return result;
}

// The server's error kind off the wire; a value this build does not know is a backend error.
[[noreturn]] void throwKind(int64_t kind, const std::string& message) {
  const bool known = kind >= static_cast<int64_t>(ErrorKind::kInvalidArgument) &&
                     kind <= static_cast<int64_t>(ErrorKind::kInternal);
  throwError(known ? static_cast<ErrorKind>(kind) : ErrorKind::kBackend, message);
}

}  // namespace

// The socket and its private io_context. Asynchronous operations run on the calling thread
// through run_one_for, which is what gives every blocking step a deadline.
class TcpStore::Connection {
 public:
  explicit Connection(std::string address) : address_(std::move(address)) {}

  ~Connection() {
    boost::system::error_code ignored;
    socket_.close(ignored);
  }

  // Connects, retrying refused or unreachable attempts until `deadline`.
  void connect(const HostPort& target, std::chrono::steady_clock::time_point deadline,
               Timeout connectTimeout) {
    std::string lastError = "no attempt finished";
    auto retry = kFirstRetry;
    while (true) {
      for (const tcp::endpoint& endpoint : endpoints(target, &lastError)) {
        boost::system::error_code ignored;
        socket_.close(ignored);
        bool done = false;
        boost::system::error_code ec;
        socket_.async_connect(endpoint, [&](const boost::system::error_code& e) {
          ec = e;
          done = true;
        });
        if (!runUntil(done, deadline)) {
          lastError = "timed out";
          break;
        }
        if (!ec) {
          socket_.set_option(tcp::no_delay(true), ec);
          return;
        }
        lastError = ec.message();
      }
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) {
        broken_ = "could not connect to the store at " + address_;
        throw PeerError("cannot connect to the store at " + address_ + " within " +
                        std::to_string(connectTimeout.count()) + " ms: " + lastError);
      }
      std::this_thread::sleep_for(
          std::min<std::chrono::steady_clock::duration>(retry, deadline - now));
      retry = std::min(retry * 2, kMaxRetry);
    }
  }

  // Sends one request frame and reads one response within `deadline`. A failure leaves the
  // connection unusable: a late answer would otherwise be taken for the next request's.
  Response roundTrip(const Bytes& frame, std::chrono::steady_clock::time_point deadline,
                     Timeout limit, const char* what) {
    if (!broken_.empty()) {
      throw PeerError("the connection to the store at " + address_ + " is unusable: " + broken_);
    }
    boost::system::error_code ec;
    bool done = false;
    asio::async_write(socket_, asio::buffer(frame),
                      [&](const boost::system::error_code& e, size_t) {
                        ec = e;
                        done = true;
                      });
    awaitOrFail(done, ec, deadline, limit, what);

    unsigned char header[protocol::kFrameHeaderBytes];
    done = false;
    asio::async_read(socket_, asio::buffer(header),
                     [&](const boost::system::error_code& e, size_t) {
                       ec = e;
                       done = true;
                     });
    awaitOrFail(done, ec, deadline, limit, what);
    std::string error;
    const std::optional<uint32_t> length = protocol::decodeFrameLength(
        header, protocol::kDefaultMaxFrameBytes + protocol::kResponseOverheadBytes, &error);
    if (!length) fail(PeerError(malformed(what, error)));

    Bytes payload(*length, '\0');
    done = false;
    asio::async_read(socket_, asio::buffer(payload),
                     [&](const boost::system::error_code& e, size_t) {
                       ec = e;
                       done = true;
                     });
    awaitOrFail(done, ec, deadline, limit, what);
    std::optional<Response> response = protocol::decodeResponse(payload, &error);
    if (!response) fail(PeerError(malformed(what, error)));
    return std::move(*response);
  }

 private:
  std::vector<tcp::endpoint> endpoints(const HostPort& target, std::string* lastError) {
    boost::system::error_code ec;
    const auto address = asio::ip::make_address(target.host, ec);
    if (!ec) return {tcp::endpoint(address, target.port)};
    // A host name: getaddrinfo has its own timeouts and cannot be cancelled, so it runs
    // synchronously rather than on a resolver thread per connection.
    tcp::resolver resolver(io_);
    auto results = resolver.resolve(target.host, std::to_string(target.port), ec);
    if (ec) {
      *lastError = "cannot resolve " + target.host + ": " + ec.message();
      return {};
    }
    std::vector<tcp::endpoint> list;
    for (const auto& entry : results) list.push_back(entry.endpoint());
    return list;
  }

  // Runs the private io_context until `done` or `deadline`; on the deadline closes the socket,
  // which aborts the operation, lets its handler run, and returns false.
  bool runUntil(const bool& done, std::chrono::steady_clock::time_point deadline) {
    while (!done) {
      if (io_.stopped()) io_.restart();
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) {
        boost::system::error_code ignored;
        socket_.close(ignored);
        while (!done) {
          if (io_.stopped()) io_.restart();
          io_.run_one();
        }
        return false;
      }
      // Bounded slices keep the io_context's own "now + duration" far from overflowing.
      io_.run_one_for(
          std::min<std::chrono::steady_clock::duration>(deadline - now, std::chrono::hours(1)));
    }
    return true;
  }

  void awaitOrFail(const bool& done, const boost::system::error_code& ec,
                   std::chrono::steady_clock::time_point deadline, Timeout limit,
                   const char* what) {
    if (!runUntil(done, deadline)) {
      fail(TimeoutError("the store at " + address_ + " did not answer a " + what + " within " +
                        std::to_string(limit.count()) + " ms"));
    }
    if (ec) {
      fail(PeerError("lost the connection to the store at " + address_ + " during a " + what +
                     ": " + ec.message()));
    }
  }

  std::string malformed(const char* what, const std::string& error) const {
    return "the store at " + address_ + " sent a malformed answer to a " + what + ": " + error;
  }

  template <typename E>
  [[noreturn]] void fail(const E& error) {
    broken_ = error.what();
    boost::system::error_code ignored;
    socket_.close(ignored);
    throw error;
  }

  const std::string address_;
  asio::io_context io_{1};
  tcp::socket socket_{io_};
  std::string broken_;  // why the connection is unusable; empty while it works
};

TcpStore::TcpStore(const std::string& address, const std::string& jobId, const std::string& token,
                   Timeout connectTimeout)
    : address_(address), jobId_(jobId), connection_(std::make_unique<Connection>(address)) {
  const HostPort target = splitAddress(address);
  const auto deadline = deadlineAfter(connectTimeout);
  connection_->connect(target, deadline, connectTimeout);

  Request hello;
  hello.op = Opcode::kHello;
  hello.key = jobId;
  hello.value = token;
  const auto helloDeadline = std::max(deadline, deadlineAfter(kMinHelloWait));
  const Response response =
      connection_->roundTrip(protocol::encodeRequest(hello), helloDeadline,
                             std::max(connectTimeout, kMinHelloWait), "HELLO");
  if (response.op == Opcode::kDenied) {
    throw InvalidArgumentError("the store at " + address_ + " refused the credentials for job '" +
                               jobId + "'");
  }
  if (response.op == Opcode::kError)
    throwKind(response.number, "store at " + address_ + ": " + response.value);
  if (response.op != Opcode::kOk) {
    throw PeerError("the store at " + address_ + " answered HELLO with " +
                    protocol::opcodeName(response.op));
  }
}

TcpStore::~TcpStore() = default;

Response TcpStore::call(const Request& request, Timeout answerWithin,
                        const std::vector<std::string>& keys, Timeout timeout) {
  // Encoding first: an oversized value is the caller's error and must not break the connection.
  const Bytes frame = protocol::encodeRequest(request);
  Response response;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    response = connection_->roundTrip(frame, deadlineAfter(answerWithin), answerWithin,
                                      protocol::opcodeName(request.op));
  }
  // GET_MANY is answered by VALUES, one per key; every other request by OK.
  const Opcode answer = request.op == Opcode::kGetMany ? Opcode::kValues : Opcode::kOk;
  if (response.op == answer) {
    if (answer == Opcode::kValues && response.values.size() != request.keys.size()) {
      throw PeerError("the store at " + address_ + " answered GET_MANY of " +
                      std::to_string(request.keys.size()) + " keys with " +
                      std::to_string(response.values.size()) + " values");
    }
    return response;
  }
  switch (response.op) {
    case Opcode::kTimeout:
      throw TimeoutError(timeoutMessage(keys, response.keys, timeout));
    case Opcode::kDenied:
      throw InvalidArgumentError("the store at " + address_ + " refused the credentials for job '" +
                                 jobId_ + "'");
    case Opcode::kError:
      throwKind(response.number, "store at " + address_ + ": " + response.value);
    default:
      throw PeerError("the store at " + address_ + " answered " + protocol::opcodeName(request.op) +
                      " with " + protocol::opcodeName(response.op));
  }
}

void TcpStore::set(const std::string& key, const Bytes& value) {
  Request request;
  request.op = Opcode::kSet;
  request.key = key;
  request.value = value;
  call(request, kRequestLimit);
}

Bytes TcpStore::get(const std::string& key, Timeout timeout) {
  Request request;
  request.op = Opcode::kGet;
  request.key = key;
  request.number = wireTimeout(timeout);
  return call(request, withMargin(timeout), {key}, timeout).value;
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  Request request;
  request.op = Opcode::kAdd;
  request.key = key;
  request.number = delta;
  return call(request, kRequestLimit).number;
}

Bytes TcpStore::compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) {
  Request request;
  request.op = Opcode::kCompareSet;
  request.key = key;
  request.expected = expected;
  request.value = desired;
  return call(request, kRequestLimit).value;
}

void TcpStore::wait(const std::vector<std::string>& keys, Timeout timeout) {
  Request request;
  request.op = Opcode::kWait;
  request.keys = keys;
  request.number = wireTimeout(timeout);
  call(request, withMargin(timeout), keys, timeout);
}

std::vector<Bytes> TcpStore::getMany(const std::vector<std::string>& keys, Timeout timeout) {
  if (keys.empty()) return {};
  Request request;
  request.op = Opcode::kGetMany;
  request.keys = keys;
  request.number = wireTimeout(timeout);
  return std::move(call(request, withMargin(timeout), keys, timeout).values);
}

bool TcpStore::check(const std::vector<std::string>& keys) {
  Request request;
  request.op = Opcode::kCheck;
  request.keys = keys;
  return call(request, kRequestLimit).number != 0;
}

void TcpStore::erase(const std::string& key) {
  Request request;
  request.op = Opcode::kErase;
  request.key = key;
  call(request, kRequestLimit);
}

}  // namespace hvd::store
