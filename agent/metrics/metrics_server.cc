#include "agent/metrics/metrics_server.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <optional>
#include <string_view>
#include <thread>
#include <utility>

#include "agent/common/thread_guard.h"
#include "agent/metrics/exposition.h"
#include "hvd/error.hpp"

namespace hvd::agent::metrics {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// A request is a line and a few headers: anything much larger is not a scraper's.
constexpr uint32_t kMaxHeaderBytes = 8 * 1024;
constexpr uint64_t kMaxBodyBytes = 1024;
// After a failed accept (out of file descriptors, say): try again after a pause, not in a loop.
constexpr std::chrono::milliseconds kAcceptRetry{100};

// What the sessions share with the server; touched on the server's thread only.
struct Shared {
  MetricsServer::Render render;
  MetricsServerOptions options;
  size_t open = 0;  // connections open now
};

// One connection: read one request (within the timeout), answer it, close.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, Shared* shared) : stream_(std::move(socket)), shared_(shared) {
    ++shared_->open;
    parser_.header_limit(kMaxHeaderBytes);
    parser_.body_limit(kMaxBodyBytes);
  }
  ~Session() { --shared_->open; }

  void start() {
    stream_.expires_after(shared_->options.requestTimeout);
    http::async_read(stream_, buffer_, parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->read(ec); });
  }

 private:
  void read(beast::error_code ec) {
    if (ec == beast::error::timeout || ec == http::error::end_of_stream || ec == asio::error::eof ||
        ec == asio::error::connection_reset || ec == asio::error::operation_aborted) {
      return;  // the client said nothing in time, or left: nobody to answer
    }
    if (ec) {
      answer(http::status::bad_request, "bad request: " + ec.message() + "\n", 11);
      return;
    }
    const http::request<http::string_body>& request = parser_.get();
    const std::string_view target(request.target().data(), request.target().size());
    const std::string_view path = target.substr(0, target.find('?'));
    if (path != "/metrics") {
      answer(http::status::not_found, "not found: hvdagent serves /metrics only\n",
             request.version());
    } else if (request.method() != http::verb::get) {
      answer(http::status::method_not_allowed, "method not allowed: GET /metrics only\n",
             request.version());
    } else {
      std::string text;
      try {
        text = shared_->render();
      } catch (...) {
        answer(http::status::internal_server_error,
               "internal error: " + common::currentExceptionMessage() + "\n", request.version());
        return;
      }
      answer(http::status::ok, std::move(text), request.version(), kExpositionContentType);
    }
  }

  void answer(http::status status, std::string body, unsigned version,
              const char* contentType = "text/plain; charset=utf-8") {
    response_.result(status);
    response_.version(version);
    response_.set(http::field::server, "hvdagent");
    response_.set(http::field::content_type, contentType);
    if (status == http::status::method_not_allowed) response_.set(http::field::allow, "GET");
    response_.keep_alive(false);
    response_.body() = std::move(body);
    response_.prepare_payload();
    stream_.expires_after(shared_->options.requestTimeout);
    http::async_write(stream_, response_,
                      [self = shared_from_this()](beast::error_code, size_t) { self->close(); });
  }

  void close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  }

  beast::tcp_stream stream_;
  Shared* const shared_;
  beast::flat_buffer buffer_;
  http::request_parser<http::string_body> parser_;
  http::response<http::string_body> response_;
};

}  // namespace

class MetricsServer::Impl {
 public:
  Impl(Render render, MetricsServerOptions options) : shared_{std::move(render), options} {
    io_.emplace(1);
    acceptor_.emplace(*io_);
    retry_.emplace(*io_);
  }

  int bind(const common::ListenAddress& listen) {
    beast::error_code ec;
    const tcp::endpoint endpoint(asio::ip::make_address(listen.host, ec),
                                 static_cast<unsigned short>(listen.port));
    if (!ec) acceptor_->open(endpoint.protocol(), ec);
    if (!ec) acceptor_->set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_->bind(endpoint, ec);
    if (!ec) acceptor_->listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      throw BackendError("cannot serve --metrics-listen on " + listen.toString() + ": " +
                         ec.message() + " (address in use, or not an address of this host?)");
    }
    return acceptor_->local_endpoint().port();
  }

  void start() {
    accept();
    thread_ = std::thread([this] { common::runGuarded("metrics server", [this] { io_->run(); }); });
  }

  void stop() {
    if (!io_) return;
    io_->stop();
    if (thread_.joinable()) thread_.join();
    // With the thread gone, the io_context goes too, and with it the sessions its handlers
    // held: every connection and the listening socket are closed now, not at destruction.
    retry_.reset();
    acceptor_.reset();
    io_.reset();
  }

 private:
  void accept() {
    acceptor_->async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted) return;
      if (ec) {
        retry_->expires_after(kAcceptRetry);
        retry_->async_wait([this](beast::error_code waited) {
          if (!waited) accept();
        });
        return;
      }
      // Past the limit the connection is closed unanswered (the socket goes out of scope).
      if (shared_.open < shared_.options.maxConnections) {
        std::make_shared<Session>(std::move(socket), &shared_)->start();
      }
      accept();
    });
  }

  // Declared in this order: sessions left in io_ at its destruction still reach shared_.
  Shared shared_;
  std::optional<asio::io_context> io_;
  std::optional<tcp::acceptor> acceptor_;
  std::optional<asio::steady_timer> retry_;
  std::thread thread_;
};

MetricsServer::MetricsServer(const common::ListenAddress& listen, Render render,
                             MetricsServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(render), options)) {
  port_ = impl_->bind(listen);
  impl_->start();
}

MetricsServer::~MetricsServer() { stop(); }

void MetricsServer::stop() { impl_->stop(); }

}  // namespace hvd::agent::metrics
