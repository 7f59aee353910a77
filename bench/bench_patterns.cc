#include "bench_patterns.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "common/half.h"

namespace hvd::bench {
namespace {

int64_t inputValue(hvd::ReduceOp op, bool reduction, int k, int r, int salt) {
  // Adasum of equal vectors is the vector itself, exactly in every type (both coefficients
  // are 1/2): so every rank gets the same input. The work per element does not depend on it.
  if (reduction && op == hvd::ReduceOp::kAdasum) r = 0;
  const int64_t x = (static_cast<int64_t>(k) * 7 + static_cast<int64_t>(r) * 13 + salt) % kPeriod;
  return reduction && op == hvd::ReduceOp::kProduct ? 1 + (x & 1) : x;
}

template <typename T>
void storeAs(T value, uint8_t* dst) {
  std::memcpy(dst, &value, sizeof(T));
}

// Stores the small exact integer v as the element type.
void storeInput(hvd::DataType t, int64_t v, uint8_t* dst) {
  switch (t) {
    case hvd::DataType::kInt8:
      return storeAs(static_cast<int8_t>(v), dst);
    case hvd::DataType::kUInt8:
      return storeAs(static_cast<uint8_t>(v), dst);
    case hvd::DataType::kInt16:
      return storeAs(static_cast<int16_t>(v), dst);
    case hvd::DataType::kInt32:
      return storeAs(static_cast<int32_t>(v), dst);
    case hvd::DataType::kInt64:
      return storeAs(static_cast<int64_t>(v), dst);
    case hvd::DataType::kFloat16:
      return storeAs(hvd::floatToHalf(static_cast<float>(v)), dst);
    case hvd::DataType::kBFloat16:
      return storeAs(hvd::floatToBfloat16(static_cast<float>(v)), dst);
    case hvd::DataType::kFloat32:
      return storeAs(static_cast<float>(v), dst);
    case hvd::DataType::kFloat64:
      return storeAs(static_cast<double>(v), dst);
  }
}

// Integer result: sum and product wrap in two's complement like the runtime; the average is the
// wrapped sum divided by n in the element type (truncating toward zero).
template <typename T>
void storeIntResult(hvd::ReduceOp op, uint64_t wrapped, int64_t exact, int n, uint8_t* dst) {
  using U = std::make_unsigned_t<T>;
  T value;
  if (op == hvd::ReduceOp::kMin || op == hvd::ReduceOp::kMax) {
    value = static_cast<T>(exact);
  } else {
    value = static_cast<T>(static_cast<U>(wrapped));
    if (op == hvd::ReduceOp::kAverage) value = static_cast<T>(value / static_cast<T>(n));
  }
  storeAs(value, dst);
}

// Floating-point result: the exact value rounded to the type; the average converts the sum to
// float (double for float64), divides by n and rounds to the type, as the runtime does.
void storeFloatResult(hvd::DataType t, hvd::ReduceOp op, double exact, int n, uint8_t* dst) {
  const bool avg = op == hvd::ReduceOp::kAverage;
  switch (t) {
    case hvd::DataType::kFloat16: {
      uint16_t h = hvd::floatToHalf(static_cast<float>(exact));
      if (avg) h = hvd::floatToHalf(hvd::halfToFloat(h) / static_cast<float>(n));
      return storeAs(h, dst);
    }
    case hvd::DataType::kBFloat16: {
      uint16_t h = hvd::floatToBfloat16(static_cast<float>(exact));
      if (avg) h = hvd::floatToBfloat16(hvd::bfloat16ToFloat(h) / static_cast<float>(n));
      return storeAs(h, dst);
    }
    case hvd::DataType::kFloat32: {
      float f = static_cast<float>(exact);
      if (avg) f = f / static_cast<float>(n);
      return storeAs(f, dst);
    }
    case hvd::DataType::kFloat64: {
      double d = exact;
      if (avg) d = d / static_cast<double>(n);
      return storeAs(d, dst);
    }
    default:
      return;
  }
}

// The pattern rotated so that its element 0 is the one of global index `first`.
Pattern rotated(const Pattern& p, size_t first, size_t es) {
  Pattern out{};
  const size_t phase = first % kPeriod;
  for (size_t k = 0; k < static_cast<size_t>(kPeriod); ++k) {
    std::memcpy(out.bytes + k * es, p.bytes + ((phase + k) % kPeriod) * es, es);
  }
  return out;
}

}  // namespace

Pattern inputPattern(const Options& o, int r, int salt) {
  Pattern p{};
  const size_t es = hvd::dataTypeSize(o.type);
  for (int k = 0; k < kPeriod; ++k) {
    storeInput(o.type, inputValue(o.op, reduces(o.coll), k, r, salt), p.bytes + k * es);
  }
  return p;
}

// Period of the reduction over n ranks.
Pattern reducedPattern(const Options& o, int n, int salt) {
  if (o.op == hvd::ReduceOp::kAdasum) return inputPattern(o, 0, salt);
  Pattern p{};
  const size_t es = hvd::dataTypeSize(o.type);
  for (int k = 0; k < kPeriod; ++k) {
    int64_t exact = inputValue(o.op, true, k, 0, salt);
    uint64_t wrapped = static_cast<uint64_t>(exact);
    double real = static_cast<double>(exact);
    for (int r = 1; r < n; ++r) {
      const int64_t v = inputValue(o.op, true, k, r, salt);
      switch (o.op) {
        case hvd::ReduceOp::kSum:
        case hvd::ReduceOp::kAverage:
          wrapped += static_cast<uint64_t>(v);
          real += static_cast<double>(v);
          break;
        case hvd::ReduceOp::kProduct:
          wrapped *= static_cast<uint64_t>(v);
          real *= static_cast<double>(v);
          break;
        case hvd::ReduceOp::kMin:
          exact = std::min(exact, v);
          break;
        case hvd::ReduceOp::kMax:
          exact = std::max(exact, v);
          break;
        case hvd::ReduceOp::kAdasum:  // returned above
          break;
      }
    }
    if (o.op == hvd::ReduceOp::kMin || o.op == hvd::ReduceOp::kMax) {
      real = static_cast<double>(exact);
    }
    uint8_t* dst = p.bytes + k * es;
    switch (o.type) {
      case hvd::DataType::kInt8:
        storeIntResult<int8_t>(o.op, wrapped, exact, n, dst);
        break;
      case hvd::DataType::kUInt8:
        storeIntResult<uint8_t>(o.op, wrapped, exact, n, dst);
        break;
      case hvd::DataType::kInt16:
        storeIntResult<int16_t>(o.op, wrapped, exact, n, dst);
        break;
      case hvd::DataType::kInt32:
        storeIntResult<int32_t>(o.op, wrapped, exact, n, dst);
        break;
      case hvd::DataType::kInt64:
        storeIntResult<int64_t>(o.op, wrapped, exact, n, dst);
        break;
      default:
        storeFloatResult(o.type, o.op, real, n, dst);
        break;
    }
  }
  return p;
}

void fill(uint8_t* buf, size_t count, size_t first, const Pattern& p, size_t es) {
  if (count == 0) return;
  const Pattern rot = rotated(p, first, es);
  const size_t total = count * es;
  size_t filled = std::min(total, kPeriod * es);
  std::memcpy(buf, rot.bytes, filled);
  while (filled < total) {  // filled is a whole number of periods here
    const size_t n = std::min(filled, total - filled);
    std::memcpy(buf + filled, buf, n);
    filled += n;
  }
}

// Number of elements that differ (bit for bit) from the pattern, indexed as in fill().
long long countWrong(const uint8_t* buf, size_t count, size_t first, const Pattern& p, size_t es) {
  if (count == 0) return 0;
  const Pattern rot = rotated(p, first, es);
  const size_t total = count * es;
  const size_t period = kPeriod * es;
  long long wrong = 0;
  for (size_t off = 0; off < total; off += period) {
    const size_t n = std::min(period, total - off);
    if (std::memcmp(buf + off, rot.bytes, n) == 0) continue;
    for (size_t e = 0; e < n; e += es) wrong += std::memcmp(buf + off + e, rot.bytes + e, es) != 0;
  }
  return wrong;
}

void poison(uint8_t* buf, size_t count, size_t es) {
  if (count > 0) std::memset(buf, 0xff, count * es);
}

}  // namespace hvd::bench
