#include "store/tcp_store_session.h"

#include <algorithm>
#include <optional>
#include <string_view>
#include <utility>

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

}  // namespace

Session::Session(SessionOwner& owner, tcp::socket socket, std::string peer)
    : owner_(owner),
      socket_(std::move(socket)),
      peer_(std::move(peer)),
      timer_(socket_.get_executor()),
      log_(logging::get("store")) {}

void Session::start() {
  timer_.expires_after(owner_.helloTimeout());
  timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    if (ec || self->job_ || self->closed_) return;
    self->drop("no HELLO within " + std::to_string(self->owner_.helloTimeout().count()) + " ms");
  });
  maybeRead();
}

void Session::close() {
  if (closed_) return;
  closed_ = true;
  if (parked_) unpark();
  boost::system::error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  timer_.cancel();
  owner_.forget(this);
}

void Session::onKeyArrived() {
  if (!parked_ || closed_) return;
  listedUnder_.clear();
  if (advanceParked()) {
    answerParked();
    return;
  }
  listUnder(parkedKeys_[parkedPresent_]);
}

bool Session::advanceParked() {
  const auto& data = job_->data;
  while (parkedPresent_ < parkedKeys_.size() && data.count(parkedKeys_[parkedPresent_]) != 0) {
    ++parkedPresent_;
  }
  if (parkedPresent_ < parkedKeys_.size()) return false;
  // One full pass at the end: a key seen earlier may have been erased since.
  for (size_t i = 0; i < parkedKeys_.size(); ++i) {
    if (data.count(parkedKeys_[i]) == 0) {
      parkedPresent_ = i;
      return false;
    }
  }
  return true;
}

void Session::onJobRemoved() {
  if (!parked_ || closed_) return;
  listedUnder_.clear();
  parked_ = false;
  timer_.cancel();
  sendError(ErrorKind::kPeer, "job '" + job_->id + "' was removed from the store");
}

void Session::maybeRead() {
  if (closed_ || reading_ || closeAfterWrite_ || !writes_.empty()) return;
  reading_ = true;
  asio::async_read(socket_, asio::buffer(header_),
                   [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
                     self->onHeader(ec);
                   });
}

void Session::onHeader(const boost::system::error_code& ec) {
  reading_ = false;
  if (closed_) return;
  if (ec) {
    disconnected(ec);
    return;
  }
  if (parked_) {
    drop("it sent a request while its " + std::string(protocol::opcodeName(parkedOp_)) +
         " was still pending");
    return;
  }
  std::string error;
  // The length is checked here, before the payload buffer grows to hold it.
  const std::optional<uint32_t> length = protocol::decodeFrameLength(header_, frameLimit(), &error);
  if (!length) {
    drop(error);
    return;
  }
  payload_.clear();
  payloadExpected_ = *length;
  readPayloadStep();
}

void Session::readPayloadStep() {
  const size_t have = payload_.size();
  if (have == payloadExpected_) {
    onPayload();
    return;
  }
  // The buffer grows by what has arrived so far (at least kFirstStep), never to the announced
  // length at once: an authenticated peer that announces a 16 MiB frame and sends nothing costs
  // the store kFirstStep, not 16 MiB, and a real frame still arrives in log(n) steps.
  constexpr size_t kFirstStep = size_t{64} << 10;
  const size_t step = std::min(payloadExpected_ - have, std::max(kFirstStep, have));
  payload_.resize(have + step);
  reading_ = true;
  asio::async_read(socket_, asio::buffer(&payload_[have], step),
                   [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
                     self->onPayloadStep(ec);
                   });
}

void Session::onPayloadStep(const boost::system::error_code& ec) {
  reading_ = false;
  if (closed_) return;
  if (ec) {
    disconnected(ec);
    return;
  }
  readPayloadStep();
}

void Session::onPayload() {
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

void Session::handle(const Request& request) {
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
      put(request.key, request.value);
      notify(request.key);
      sendOk();
      break;
    case Opcode::kGet:
    case Opcode::kWait:
    case Opcode::kGetMany: {
      std::vector<std::string> keys =
          request.op == Opcode::kGet ? std::vector<std::string>{request.key} : request.keys;
      if (missingKeys(keys).empty()) {
        answer(request.op, keys);
      } else {
        park(request.op, std::move(keys), request.number);
      }
      break;
    }
    case Opcode::kAdd: {
      auto it = job.data.find(request.key);
      const int64_t sum =
          addToCounter(request.key, it == job.data.end() ? nullptr : &it->second, request.number);
      put(request.key, std::to_string(sum));
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
      put(request.key, request.value);
      notify(request.key);
      sendOk(request.value);
      break;
    }
    case Opcode::kCheck:
      sendOk(Bytes(), missingKeys(request.keys).empty() ? 1 : 0);
      break;
    case Opcode::kErase:
      if (auto it = job.data.find(request.key); it != job.data.end()) {
        job.bytes -= it->first.size() + it->second.size();
        job.data.erase(it);
      }
      sendOk();
      break;
    default:
      drop(std::string("unexpected ") + protocol::opcodeName(request.op));
      break;
  }
}

void Session::hello(const Request& request) {
  if (request.op != Opcode::kHello) {
    deny(std::string("its first request was ") + protocol::opcodeName(request.op) + ", not HELLO");
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

void Session::deny(const std::string& reason) {
  log_->warn("refused connection from {}: {}", peer_, reason);
  Response response;
  response.op = Opcode::kDenied;
  response.value = "the store refused the credentials";
  send(response);
  closeAfterWrite_ = true;
}

size_t Session::frameLimit() const {
  return job_ ? owner_.maxFrameBytes() : std::min(owner_.maxFrameBytes(), kMaxHelloFrameBytes);
}

void Session::put(const std::string& key, Bytes value) {
  Job& job = *job_;
  auto it = job.data.find(key);
  const size_t before = it == job.data.end() ? 0 : key.size() + it->second.size();
  const size_t after = job.bytes - before + key.size() + value.size();
  if (after > owner_.maxJobBytes() && after > job.bytes) {
    throw InvalidArgumentError("job '" + job.id + "' would hold " + std::to_string(after) +
                               " bytes in the store, above its limit of " +
                               std::to_string(owner_.maxJobBytes()) + " bytes per job (key '" +
                               key + "' not set)");
  }
  job.bytes = after;
  if (it == job.data.end()) {
    job.data.emplace(key, std::move(value));
  } else {
    it->second = std::move(value);
  }
}

void Session::checkValueSize(const Bytes& value) const {
  const size_t limit = owner_.maxFrameBytes() > protocol::kResponseOverheadBytes
                           ? owner_.maxFrameBytes() - protocol::kResponseOverheadBytes
                           : 0;
  if (value.size() > limit) {
    throw InvalidArgumentError("a store value of " + std::to_string(value.size()) +
                               " bytes exceeds the limit of " + std::to_string(limit) + " bytes");
  }
}

std::vector<std::string> Session::missingKeys(const std::vector<std::string>& keys) const {
  std::vector<std::string> missing;
  for (const auto& key : keys) {
    if (job_->data.count(key) == 0) missing.push_back(key);
  }
  return missing;
}

void notifyWaiters(Job& job, const std::string& key) {
  auto it = job.waiters.find(key);
  if (it == job.waiters.end()) return;
  std::vector<std::weak_ptr<Session>> listed = std::move(it->second);
  job.waiters.erase(it);
  for (auto& weak : listed) {
    if (auto session = weak.lock()) session->onKeyArrived();
  }
}

void Session::notify(const std::string& key) { notifyWaiters(*job_, key); }

void Session::park(Opcode op, std::vector<std::string> keys, int64_t timeoutMs) {
  timeoutMs = std::clamp<int64_t>(timeoutMs, 0, kMaxWaitMs);
  if (timeoutMs == 0) {
    sendTimeout(missingKeys(keys));
    return;
  }
  parked_ = true;
  parkedOp_ = op;
  parkedKeys_ = std::move(keys);
  parkedPresent_ = 0;
  const uint64_t generation = ++parkGeneration_;
  advanceParked();  // the caller saw a key missing, so this stops at one
  listUnder(parkedKeys_[parkedPresent_]);
  timer_.expires_after(std::chrono::milliseconds(timeoutMs));
  timer_.async_wait([self = shared_from_this(), generation](const boost::system::error_code& ec) {
    // A timer that expired just as the keys arrived may still run; the generation tells.
    if (ec || !self->parked_ || self->closed_ || self->parkGeneration_ != generation) return;
    self->unpark();
    self->sendTimeout(self->missingKeys(self->parkedKeys_));
  });
}

void Session::listUnder(const std::string& key) {
  listedUnder_ = key;
  job_->waiters[key].push_back(weak_from_this());
}

void Session::unpark() {
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

void Session::answerParked() {
  parked_ = false;
  timer_.cancel();
  answer(parkedOp_, parkedKeys_);
}

void Session::answer(Opcode op, const std::vector<std::string>& keys) {
  if (op == Opcode::kGet) {
    sendOk(job_->data[keys.front()]);
    return;
  }
  if (op != Opcode::kGetMany) {
    sendOk();
    return;
  }
  Response response;
  response.op = Opcode::kValues;
  response.values.reserve(keys.size());
  // Each value is below the frame limit, but many together may not be: say so, keep the
  // connection.
  size_t bytes = 0;
  for (const auto& key : keys) {
    response.values.push_back(job_->data[key]);
    bytes += 4 + response.values.back().size();
  }
  if (bytes + protocol::kResponseOverheadBytes > owner_.maxFrameBytes()) {
    sendError(ErrorKind::kInvalidArgument,
              "the values of the " + std::to_string(keys.size()) + " keys asked for total " +
                  std::to_string(bytes) + " bytes, above the store's frame limit of " +
                  std::to_string(owner_.maxFrameBytes()) + " bytes: ask for fewer at a time");
    return;
  }
  send(response);
}

void Session::sendOk(const Bytes& value, int64_t number) {
  Response response;
  response.op = Opcode::kOk;
  response.value = value;
  response.number = number;
  send(response);
}

void Session::sendTimeout(std::vector<std::string> missing) {
  Response response;
  response.op = Opcode::kTimeout;
  response.keys = std::move(missing);
  send(response);
}

void Session::sendError(ErrorKind kind, const std::string& message) {
  Response response;
  response.op = Opcode::kError;
  response.number = static_cast<int64_t>(kind);
  response.value = message;
  send(response);
}

void Session::send(const Response& response) {
  if (closed_) return;
  // Limit plus overhead: values were checked on the way in, so this cannot refuse a value
  // the server stored.
  writes_.push_back(protocol::encodeResponse(
      response, owner_.maxFrameBytes() + protocol::kResponseOverheadBytes));
  if (writes_.size() == 1) writeFront();
}

void Session::writeFront() {
  asio::async_write(socket_, asio::buffer(writes_.front()),
                    [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
                      self->onWritten(ec);
                    });
}

void Session::onWritten(const boost::system::error_code& ec) {
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

void Session::disconnected(const boost::system::error_code& ec) {
  if (ec == asio::error::eof || ec == asio::error::connection_reset) {
    log_->debug("{} disconnected", peer_);
  } else if (ec != asio::error::operation_aborted) {
    log_->info("connection from {} failed: {}", peer_, ec.message());
  }
  close();
}

void Session::drop(const std::string& reason) {
  log_->warn("dropping connection from {}: {}", peer_, reason);
  close();
}
}  // namespace hvd::store
