#include "hvd_support/tcp_store_server.h"

#include <boost/asio.hpp>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hvd/error.hpp"
#include "hvd_support/logging.h"
#include "store/tcp_protocol.h"
#include "store/tcp_store_session.h"

namespace hvd::store {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;

// After accept fails for lack of descriptors, retrying at once would spin the io thread.
constexpr std::chrono::milliseconds kAcceptRetry{50};

std::string endpointText(const tcp::endpoint& endpoint) {
  const auto address = endpoint.address();
  const std::string host = address.is_v6() ? "[" + address.to_string() + "]" : address.to_string();
  return host + ":" + std::to_string(endpoint.port());
}

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
      job->bytes = 0;
    });
  }

  void set(const std::string& jobId, const std::string& key, const std::string& value) {
    std::shared_ptr<Job> job = findJob(jobId);
    if (!job) throw InvalidArgumentError("store job '" + jobId + "' is not registered");
    onIoThread([&] {
      if (job->removed.load()) return;
      auto it = job->data.find(key);
      const size_t before = it == job->data.end() ? 0 : key.size() + it->second.size();
      job->bytes = job->bytes - before + key.size() + value.size();
      job->data[key] = value;
      notifyWaiters(*job, key);
    });
  }

  std::optional<std::string> value(const std::string& jobId, const std::string& key) {
    std::shared_ptr<Job> job = findJob(jobId);
    if (!job) return std::nullopt;
    std::optional<std::string> out;
    onIoThread([&] {
      auto it = job->data.find(key);
      if (it != job->data.end()) out = it->second;
    });
    return out;
  }

  std::shared_ptr<Job> findJob(const std::string& id) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = jobs_.find(id);
    return it == jobs_.end() ? nullptr : it->second;
  }

  void forget(Session* session) override { sessions_.erase(session); }

  size_t maxFrameBytes() const override { return options_.maxFrameBytes; }
  size_t maxJobBytes() const override { return options_.maxJobBytes; }
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

  // Runs `work` on the io thread, which owns every job's data, and waits for it; at once when
  // the server is not running (nothing else touches the data then).
  void onIoThread(const std::function<void()>& work) {
    std::promise<void> done;
    {
      // Posted under the lock: a stop() that follows still runs it before its io thread ends.
      std::lock_guard<std::mutex> lock(mutex_);
      if (state_ != State::kRunning) {
        work();
        return;
      }
      asio::post(io_, [&] {
        try {
          work();
          done.set_value();
        } catch (...) {
          done.set_exception(std::current_exception());
        }
      });
    }
    done.get_future().get();
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
void TcpStoreServer::set(const std::string& jobId, const std::string& key,
                         const std::string& value) {
  impl_->set(jobId, key, value);
}
std::optional<std::string> TcpStoreServer::value(const std::string& jobId, const std::string& key) {
  return impl_->value(jobId, key);
}

}  // namespace hvd::store
