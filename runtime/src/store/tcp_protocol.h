// The wire protocol of the TCP store: compact, binary, and checked before it allocates.
//
// Frame    = u32 payload length (little-endian) + payload.
// Payload  = u8 opcode + the opcode's fields, in order, and nothing after them.
// Fields   : str = u32 length + bytes; i64 = 8 bytes little-endian two's complement;
//            list = u32 count + that many str.
//
// Requests (client -> server), one at a time per connection, each answered by one response:
//   HELLO       str jobId, str token        must be the first frame of every connection
//   SET         str key, str value
//   GET         str key, i64 timeoutMs      parked by the server until the key exists
//   ADD         str key, i64 delta
//   COMPARE_SET str key, str expected, str desired
//   WAIT        list keys, i64 timeoutMs    parked by the server until every key exists
//   CHECK       list keys
//   ERASE       str key
//   GET_MANY    list keys, i64 timeoutMs    parked until every key exists; answered by VALUES
// Responses (server -> client):
//   OK          str value, i64 number       GET/COMPARE_SET: value; ADD: number; CHECK: 0 or 1
//   TIMEOUT     list missing                a GET/WAIT deadline passed; the keys still absent
//   DENIED      str reason                  HELLO refused (or missing); the server then closes
//   ERROR       i64 kind, str message       kind is an hvd::ErrorKind value
//   VALUES      list values                 GET_MANY: the values, in the order of its keys
//
// Every length read from the wire is checked against what can still be there (the frame limit
// for the frame, the bytes left in the frame for a string or a list) before any allocation, so
// a hostile or corrupt peer costs at most one frame of memory. The functions here are pure, so
// tests can feed them arbitrary byte buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/store.h"

namespace hvd::store::protocol {

inline constexpr size_t kFrameHeaderBytes = 4;
inline constexpr size_t kDefaultMaxFrameBytes = size_t{16} << 20;
// Room a response adds around a stored value (opcode, lengths, number). The server accepts a
// value only if it is this much below its frame limit, and readers of responses allow this much
// above it, so that any value stored can be returned.
inline constexpr size_t kResponseOverheadBytes = 64;

enum class Opcode : uint8_t {
  kHello = 0x01,
  kSet = 0x02,
  kGet = 0x03,
  kAdd = 0x04,
  kCompareSet = 0x05,
  kWait = 0x06,
  kCheck = 0x07,
  kErase = 0x08,
  kGetMany = 0x09,
  kOk = 0x81,
  kTimeout = 0x82,
  kDenied = 0x83,
  kError = 0x84,
  kValues = 0x85,
};

const char* opcodeName(Opcode op);

// One request. Which fields travel depends on `op` (see the table above); the others are
// ignored by the encoder and left empty by the decoder.
struct Request {
  Opcode op = Opcode::kHello;
  std::string key;                // HELLO: the job id
  Bytes value;                    // HELLO: the token; SET: the value; COMPARE_SET: desired
  Bytes expected;                 // COMPARE_SET
  std::vector<std::string> keys;  // WAIT, CHECK, GET_MANY
  int64_t number = 0;             // GET, WAIT, GET_MANY: timeout in ms; ADD: delta

  bool operator==(const Request& other) const;
};

struct Response {
  Opcode op = Opcode::kOk;
  Bytes value;                    // OK: the value; DENIED: the reason; ERROR: the message
  int64_t number = 0;             // OK: the counter or check result; ERROR: the ErrorKind
  std::vector<std::string> keys;  // TIMEOUT: the keys still missing
  std::vector<Bytes> values;      // VALUES: one per key of the GET_MANY

  bool operator==(const Response& other) const;
};

// Encode a whole frame (header included). Throws hvd::InvalidArgumentError when the payload
// would exceed `maxFrameBytes`, naming the opcode and sizes, or when `op` is not a request
// (respectively response) opcode.
Bytes encodeRequest(const Request& request, size_t maxFrameBytes = kDefaultMaxFrameBytes);
Bytes encodeResponse(const Response& response, size_t maxFrameBytes = kDefaultMaxFrameBytes);

// Reads a frame header (kFrameHeaderBytes bytes). Returns the payload length, or nullopt with
// `error` set when it is zero or above `maxFrameBytes`: the caller must not allocate then.
std::optional<uint32_t> decodeFrameLength(const unsigned char* header, size_t maxFrameBytes,
                                          std::string* error);

// Decode one payload (the bytes after the header). Return nullopt with `error` set when the
// payload is malformed: unknown opcode, truncated field, a length beyond the payload's end, or
// trailing bytes.
std::optional<Request> decodeRequest(std::string_view payload, std::string* error);
std::optional<Response> decodeResponse(std::string_view payload, std::string* error);

// Compares a presented credential with the expected one in time that depends only on the
// expected one's length, so a remote peer cannot learn a token byte by byte from timing.
bool constantTimeEquals(std::string_view presented, std::string_view expected);

}  // namespace hvd::store::protocol
