#include "store/tcp_protocol.h"

#include <limits>

#include "hvd/error.hpp"

namespace hvd::store::protocol {
namespace {

class Writer {
 public:
  Writer() { out_.resize(kFrameHeaderBytes); }

  void u8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  }
  void i64(int64_t v) {
    const auto u = static_cast<uint64_t>(v);
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>((u >> (8 * i)) & 0xFF));
  }
  void str(std::string_view s) {
    if (s.size() > std::numeric_limits<uint32_t>::max()) {
      throw InvalidArgumentError("a store field of " + std::to_string(s.size()) +
                                 " bytes does not fit the protocol's 32-bit length");
    }
    u32(static_cast<uint32_t>(s.size()));
    out_.append(s.data(), s.size());
  }
  void list(const std::vector<std::string>& items) {
    if (items.size() > std::numeric_limits<uint32_t>::max()) {
      throw InvalidArgumentError("too many keys for one store request");
    }
    u32(static_cast<uint32_t>(items.size()));
    for (const auto& item : items) str(item);
  }

  // Fills in the header; throws when the payload is over the limit.
  Bytes finish(Opcode op, size_t maxFrameBytes) {
    const size_t payload = out_.size() - kFrameHeaderBytes;
    if (payload > maxFrameBytes || payload > std::numeric_limits<uint32_t>::max()) {
      throw InvalidArgumentError(std::string("store ") + opcodeName(op) + " message of " +
                                 std::to_string(payload) + " bytes exceeds the frame limit of " +
                                 std::to_string(maxFrameBytes) + " bytes");
    }
    for (size_t i = 0; i < 4; ++i) out_[i] = static_cast<char>((payload >> (8 * i)) & 0xFF);
    return std::move(out_);
  }

 private:
  Bytes out_;
};

// Reads fields from a payload; every read checks the bytes left first, and the first failure
// sticks so that callers can check once at the end.
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  bool atEnd() const { return pos_ == data_.size(); }
  size_t left() const { return data_.size() - pos_; }

  uint8_t u8() {
    if (!need(1, "opcode")) return 0;
    return static_cast<uint8_t>(data_[pos_++]);
  }
  uint32_t u32(const char* what) {
    if (!need(4, what)) return 0;
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      v |= static_cast<uint32_t>(static_cast<unsigned char>(data_[pos_ + i])) << (8 * i);
    }
    pos_ += 4;
    return v;
  }
  int64_t i64(const char* what) {
    if (!need(8, what)) return 0;
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) {
      v |= static_cast<uint64_t>(static_cast<unsigned char>(data_[pos_ + i])) << (8 * i);
    }
    pos_ += 8;
    return static_cast<int64_t>(v);
  }
  std::string str(const char* what) {
    const uint32_t size = u32(what);
    if (!ok()) return {};
    if (size > left()) {
      fail(std::string(what) + " claims " + std::to_string(size) + " bytes but only " +
           std::to_string(left()) + " remain in the frame");
      return {};
    }
    std::string s(data_.substr(pos_, size));
    pos_ += size;
    return s;
  }
  std::vector<std::string> list(const char* what) {
    const uint32_t count = u32(what);
    if (!ok()) return {};
    // Each item takes at least its 4-byte length, which bounds the count by the bytes left.
    if (count > left() / 4) {
      fail(std::string(what) + " claims " + std::to_string(count) + " items but only " +
           std::to_string(left()) + " bytes remain in the frame");
      return {};
    }
    std::vector<std::string> items;
    items.reserve(count);
    for (uint32_t i = 0; i < count && ok(); ++i) items.push_back(str(what));
    return items;
  }

  void fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
  }

 private:
  bool need(size_t bytes, const char* what) {
    if (!ok()) return false;
    if (left() < bytes) {
      fail(std::string("truncated ") + what + ": needs " + std::to_string(bytes) + " bytes, " +
           std::to_string(left()) + " remain");
      return false;
    }
    return true;
  }

  std::string_view data_;
  size_t pos_ = 0;
  std::string error_;
};

bool isRequest(Opcode op) { return op >= Opcode::kHello && op <= Opcode::kGetMany; }
bool isResponse(Opcode op) { return op >= Opcode::kOk && op <= Opcode::kValues; }

// Turns the reader's verdict into the decoder's result.
template <typename T>
std::optional<T> finish(Reader& reader, T value, std::string* error) {
  if (reader.ok() && !reader.atEnd()) {
    reader.fail(std::to_string(reader.left()) + " unexpected bytes after the last field");
  }
  if (!reader.ok()) {
    if (error != nullptr) *error = reader.error();
    return std::nullopt;
  }
  return value;
}

}  // namespace

const char* opcodeName(Opcode op) {
  switch (op) {
    case Opcode::kHello:
      return "HELLO";
    case Opcode::kSet:
      return "SET";
    case Opcode::kGet:
      return "GET";
    case Opcode::kAdd:
      return "ADD";
    case Opcode::kCompareSet:
      return "COMPARE_SET";
    case Opcode::kWait:
      return "WAIT";
    case Opcode::kCheck:
      return "CHECK";
    case Opcode::kErase:
      return "ERASE";
    case Opcode::kGetMany:
      return "GET_MANY";
    case Opcode::kOk:
      return "OK";
    case Opcode::kTimeout:
      return "TIMEOUT";
    case Opcode::kDenied:
      return "DENIED";
    case Opcode::kError:
      return "ERROR";
    case Opcode::kValues:
      return "VALUES";
  }
  return "UNKNOWN";
}

bool Request::operator==(const Request& other) const {
  return op == other.op && key == other.key && value == other.value && expected == other.expected &&
         keys == other.keys && number == other.number;
}

bool Response::operator==(const Response& other) const {
  return op == other.op && value == other.value && number == other.number && keys == other.keys &&
         values == other.values;
}

Bytes encodeRequest(const Request& request, size_t maxFrameBytes) {
  if (!isRequest(request.op)) {
    throw InvalidArgumentError(std::string("cannot encode ") + opcodeName(request.op) +
                               " as a store request");
  }
  Writer w;
  w.u8(static_cast<uint8_t>(request.op));
  switch (request.op) {
    case Opcode::kHello:
    case Opcode::kSet:
      w.str(request.key);
      w.str(request.value);
      break;
    case Opcode::kGet:
    case Opcode::kAdd:
      w.str(request.key);
      w.i64(request.number);
      break;
    case Opcode::kCompareSet:
      w.str(request.key);
      w.str(request.expected);
      w.str(request.value);
      break;
    case Opcode::kWait:
    case Opcode::kGetMany:
      w.list(request.keys);
      w.i64(request.number);
      break;
    case Opcode::kCheck:
      w.list(request.keys);
      break;
    case Opcode::kErase:
      w.str(request.key);
      break;
    default:
      break;
  }
  return w.finish(request.op, maxFrameBytes);
}

Bytes encodeResponse(const Response& response, size_t maxFrameBytes) {
  if (!isResponse(response.op)) {
    throw InvalidArgumentError(std::string("cannot encode ") + opcodeName(response.op) +
                               " as a store response");
  }
  Writer w;
  w.u8(static_cast<uint8_t>(response.op));
  switch (response.op) {
    case Opcode::kOk:
      w.str(response.value);
      w.i64(response.number);
      break;
    case Opcode::kTimeout:
      w.list(response.keys);
      break;
    case Opcode::kValues:
      w.list(response.values);
      break;
    case Opcode::kDenied:
      w.str(response.value);
      break;
    case Opcode::kError:
      w.i64(response.number);
      w.str(response.value);
      break;
    default:
      break;
  }
  return w.finish(response.op, maxFrameBytes);
}

std::optional<uint32_t> decodeFrameLength(const unsigned char* header, size_t maxFrameBytes,
                                          std::string* error) {
  const uint32_t length =
      static_cast<uint32_t>(header[0]) | (static_cast<uint32_t>(header[1]) << 8) |
      (static_cast<uint32_t>(header[2]) << 16) | (static_cast<uint32_t>(header[3]) << 24);
  if (length == 0) {
    if (error != nullptr) *error = "empty frame (a payload holds at least an opcode)";
    return std::nullopt;
  }
  if (length > maxFrameBytes) {
    if (error != nullptr) {
      *error = "frame of " + std::to_string(length) + " bytes exceeds the limit of " +
               std::to_string(maxFrameBytes) + " bytes";
    }
    return std::nullopt;
  }
  return length;
}

std::optional<Request> decodeRequest(std::string_view payload, std::string* error) {
  Reader r(payload);
  Request request;
  const uint8_t op = r.u8();
  request.op = static_cast<Opcode>(op);
  if (r.ok() && !isRequest(request.op)) r.fail("unknown request opcode " + std::to_string(op));
  if (r.ok()) {
    switch (request.op) {
      case Opcode::kHello:
        request.key = r.str("job id");
        request.value = r.str("token");
        break;
      case Opcode::kSet:
        request.key = r.str("key");
        request.value = r.str("value");
        break;
      case Opcode::kGet:
        request.key = r.str("key");
        request.number = r.i64("timeout");
        break;
      case Opcode::kAdd:
        request.key = r.str("key");
        request.number = r.i64("delta");
        break;
      case Opcode::kCompareSet:
        request.key = r.str("key");
        request.expected = r.str("expected value");
        request.value = r.str("desired value");
        break;
      case Opcode::kWait:
      case Opcode::kGetMany:
        request.keys = r.list("key list");
        request.number = r.i64("timeout");
        break;
      case Opcode::kCheck:
        request.keys = r.list("key list");
        break;
      case Opcode::kErase:
        request.key = r.str("key");
        break;
      default:
        break;
    }
  }
  return finish(r, std::move(request), error);
}

std::optional<Response> decodeResponse(std::string_view payload, std::string* error) {
  Reader r(payload);
  Response response;
  const uint8_t op = r.u8();
  response.op = static_cast<Opcode>(op);
  if (r.ok() && !isResponse(response.op)) r.fail("unknown response opcode " + std::to_string(op));
  if (r.ok()) {
    switch (response.op) {
      case Opcode::kOk:
        response.value = r.str("value");
        response.number = r.i64("number");
        break;
      case Opcode::kTimeout:
        response.keys = r.list("missing key list");
        break;
      case Opcode::kValues:
        response.values = r.list("value list");
        break;
      case Opcode::kDenied:
        response.value = r.str("reason");
        break;
      case Opcode::kError:
        response.number = r.i64("error kind");
        response.value = r.str("message");
        break;
      default:
        break;
    }
  }
  return finish(r, std::move(response), error);
}

bool constantTimeEquals(std::string_view presented, std::string_view expected) {
  // Walk the expected token in full whatever the presented one holds; fold every difference,
  // including a length difference, into one accumulator and branch only at the end.
  volatile unsigned char diff = presented.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    const unsigned char p = i < presented.size() ? static_cast<unsigned char>(presented[i]) : 0;
    diff = diff | (p ^ static_cast<unsigned char>(expected[i]));
  }
  return diff == 0;
}

}  // namespace hvd::store::protocol
