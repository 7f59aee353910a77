#include "engine/request.h"

#include <cctype>
#include <cstring>
#include <limits>
#include <sstream>

#include "hvd/error.hpp"

namespace hvd::engine {
namespace {

// Wire format of a batch (little-endian host order: peers run the same build on the same
// architecture, like every other frame of the data plane):
//   u32 magic 'HVRQ', u32 count, then per request:
//   u16 nameLength, name, u8 type, u8 dtype, u8 reduceOp, u8 fp16, u8 ndim, i64 dims[ndim],
//   i32 root, f64 prescale, f64 postscale, i32 device, u64 groupId, i32 groupSize,
//   u32 nsplits, i64 splits[nsplits]
constexpr uint32_t kMagic = 0x51525648;                                 // "HVRQ"
constexpr size_t kMinRequestBytes = 2 + 5 + 4 + 8 + 8 + 4 + 8 + 4 + 4;  // empty name, no dims

class Writer {
 public:
  template <typename T>
  void put(T value) {
    const size_t at = out_.size();
    out_.resize(at + sizeof(T));
    std::memcpy(&out_[at], &value, sizeof(T));
  }
  void putBytes(const std::string& s) { out_.append(s); }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  template <typename T>
  T get(const char* what) {
    need(sizeof(T), what);
    T value;
    std::memcpy(&value, data_ + at_, sizeof(T));
    at_ += sizeof(T);
    return value;
  }
  std::string getBytes(size_t n, const char* what) {
    need(n, what);
    std::string s(reinterpret_cast<const char*>(data_ + at_), n);
    at_ += n;
    return s;
  }
  size_t remaining() const { return size_ - at_; }

 private:
  void need(size_t n, const char* what) {
    if (n > size_ - at_) {
      throw InternalError(std::string("engine: truncated request batch (") + what + " needs " +
                          std::to_string(n) + " bytes, " + std::to_string(size_ - at_) + " left)");
    }
  }
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

}  // namespace

const char* opTypeName(OpType type) {
  switch (type) {
    case OpType::kAllreduce:
      return "allreduce";
    case OpType::kAllgather:
      return "allgather";
    case OpType::kBroadcast:
      return "broadcast";
    case OpType::kReducescatter:
      return "reducescatter";
    case OpType::kAlltoall:
      return "alltoall";
    case OpType::kBarrier:
      return "barrier";
    case OpType::kJoin:
      return "join";
  }
  return "unknown";
}

std::string opTypeUpper(OpType type) {
  std::string s = opTypeName(type);
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

int64_t Request::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t Request::rowElements() const {
  int64_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

size_t Request::bytes() const { return static_cast<size_t>(elements()) * dataTypeSize(dtype); }

bool sameMetadata(const Request& a, const Request& b) {
  return a.name == b.name && a.type == b.type && a.dtype == b.dtype && a.shape == b.shape &&
         a.reduceOp == b.reduceOp && a.root == b.root && a.prescale == b.prescale &&
         a.postscale == b.postscale && a.fp16 == b.fp16 && a.device == b.device &&
         a.groupId == b.groupId && a.groupSize == b.groupSize && a.splits == b.splits;
}

bool cacheable(const Request& r) {
  return r.groupSize == 0 && (r.type == OpType::kAllreduce || r.type == OpType::kBroadcast ||
                              r.type == OpType::kReducescatter);
}

std::string formatShape(const Shape& shape) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? "," : "") << shape[i];
  out << "]";
  return out.str();
}

std::string serializeRequests(const std::vector<Request>& requests) {
  Writer w;
  w.put<uint32_t>(kMagic);
  w.put<uint32_t>(static_cast<uint32_t>(requests.size()));
  for (const Request& r : requests) {
    if (r.name.size() > std::numeric_limits<uint16_t>::max() || r.shape.size() > 255) {
      throw InternalError("engine: request '" + r.name + "' is too large to serialise");
    }
    w.put<uint16_t>(static_cast<uint16_t>(r.name.size()));
    w.putBytes(r.name);
    w.put<uint8_t>(static_cast<uint8_t>(r.type));
    w.put<uint8_t>(static_cast<uint8_t>(r.dtype));
    w.put<uint8_t>(static_cast<uint8_t>(r.reduceOp));
    w.put<uint8_t>(r.fp16 ? 1 : 0);
    w.put<uint8_t>(static_cast<uint8_t>(r.shape.size()));
    for (int64_t d : r.shape) w.put<int64_t>(d);
    w.put<int32_t>(r.root);
    w.put<double>(r.prescale);
    w.put<double>(r.postscale);
    w.put<int32_t>(r.device);
    w.put<uint64_t>(r.groupId);
    w.put<int32_t>(r.groupSize);
    w.put<uint32_t>(static_cast<uint32_t>(r.splits.size()));
    for (int64_t s : r.splits) w.put<int64_t>(s);
  }
  return w.take();
}

std::vector<Request> parseRequests(const uint8_t* data, size_t size) {
  Reader in(data, size);
  if (in.get<uint32_t>("magic") != kMagic) {
    throw InternalError("engine: request batch has a bad magic number");
  }
  const uint32_t count = in.get<uint32_t>("count");
  // Each request takes at least kMinRequestBytes: refuse a count the buffer cannot hold before
  // reserving anything.
  if (count > in.remaining() / kMinRequestBytes) {
    throw InternalError("engine: request batch claims " + std::to_string(count) + " requests in " +
                        std::to_string(in.remaining()) + " bytes");
  }
  std::vector<Request> out;
  out.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    Request r;
    const uint16_t nameLength = in.get<uint16_t>("name length");
    r.name = in.getBytes(nameLength, "name");
    const uint8_t type = in.get<uint8_t>("type");
    const uint8_t dtype = in.get<uint8_t>("dtype");
    const uint8_t op = in.get<uint8_t>("reduce op");
    if (type >= kNumOpTypes || dtype >= kNumDataTypes || op >= kNumReduceOps) {
      throw InternalError("engine: request '" + r.name + "' has an invalid type/dtype/op code");
    }
    r.type = static_cast<OpType>(type);
    r.dtype = static_cast<DataType>(dtype);
    r.reduceOp = static_cast<ReduceOp>(op);
    r.fp16 = in.get<uint8_t>("fp16") != 0;
    const uint8_t ndim = in.get<uint8_t>("ndim");
    r.shape.resize(ndim);
    for (auto& d : r.shape) d = in.get<int64_t>("dimension");
    r.root = in.get<int32_t>("root");
    r.prescale = in.get<double>("prescale");
    r.postscale = in.get<double>("postscale");
    r.device = in.get<int32_t>("device");
    r.groupId = in.get<uint64_t>("group id");
    r.groupSize = in.get<int32_t>("group size");
    const uint32_t nsplits = in.get<uint32_t>("split count");
    if (nsplits > in.remaining() / sizeof(int64_t)) {
      throw InternalError("engine: request '" + r.name + "' claims " + std::to_string(nsplits) +
                          " splits in " + std::to_string(in.remaining()) + " bytes");
    }
    r.splits.resize(nsplits);
    for (auto& s : r.splits) s = in.get<int64_t>("split");
    out.push_back(std::move(r));
  }
  if (in.remaining() != 0) {
    throw InternalError("engine: " + std::to_string(in.remaining()) +
                        " trailing bytes after a request batch");
  }
  return out;
}

uint64_t groupIdOf(const std::vector<std::string>& names) {
  uint64_t h = 1469598103934665603ull;
  for (const auto& name : names) {
    for (unsigned char c : name) {
      h ^= c;
      h *= 1099511628211ull;
    }
    h ^= 0xff;  // separator: {"ab","c"} differs from {"a","bc"}
    h *= 1099511628211ull;
  }
  return h == 0 ? 1 : h;
}

}  // namespace hvd::engine
