// The loops below are written so that GCC/Clang auto-vectorise them at -O3 (checked with
// objdump for addps on float32 sum): one simple loop per (type, op), __restrict pointers, no
// calls inside the loop. float16/bfloat16 go through float32 with scalar conversion.
#include "collectives/reduce.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common/half.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#endif
#include "hvd/error.hpp"

namespace hvd::coll {
namespace {

// Unsigned types narrower than int promote to (signed) int, where uint16 * uint16 can overflow:
// their arithmetic is done in unsigned int, which wraps, and truncated back.
template <typename T>
using Arith =
    std::conditional_t<std::is_unsigned_v<T> && sizeof(T) < sizeof(unsigned), unsigned, T>;

struct Sum {
  template <typename T>
  static T apply(T a, T b) {
    return static_cast<T>(static_cast<Arith<T>>(a) + static_cast<Arith<T>>(b));
  }
};
struct Prod {
  template <typename T>
  static T apply(T a, T b) {
    return static_cast<T>(static_cast<Arith<T>>(a) * static_cast<Arith<T>>(b));
  }
};
struct Min {
  template <typename T>
  static T apply(T a, T b) {
    return b < a ? b : a;
  }
};
struct Max {
  template <typename T>
  static T apply(T a, T b) {
    return a < b ? b : a;
  }
};

// Integer sums wrap like the hardware does (unsigned arithmetic avoids signed-overflow UB).
template <typename T>
struct Wrapping {
  using U = std::make_unsigned_t<T>;
};

// The received operand may sit at any byte address (a ring or socket buffer position after
// traffic of other sizes), so it is read through memcpy: no alignment assumption, and the
// compiler still emits (unaligned) vector loads.
template <typename T>
inline T loadAt(const void* base, size_t i) {
  T value;
  std::memcpy(&value, static_cast<const uint8_t*>(base) + i * sizeof(T), sizeof(T));
  return value;
}

template <typename Op, typename T>
void into(T* __restrict acc, const void* __restrict in, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] = Op::apply(acc[i], loadAt<T>(in, i));
}

template <typename Op, typename T>
void to(T* __restrict out, const T* __restrict a, const void* __restrict b, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = Op::apply(a[i], loadAt<T>(b, i));
}

// Signed integer sum/product go through the unsigned type (two's complement wrap).
template <typename Op, typename T>
void dispatchInt(void* acc, const void* a, const void* b, size_t n) {
  using U = typename Wrapping<T>::U;
  constexpr bool kWrap = std::is_same_v<Op, Sum> || std::is_same_v<Op, Prod>;
  using V = std::conditional_t<kWrap, U, T>;
  if (b == nullptr) {
    into<Op, V>(static_cast<V*>(acc), a, n);
  } else {
    to<Op, V>(static_cast<V*>(acc), static_cast<const V*>(a), b, n);
  }
}

template <typename Op, typename T>
void dispatchFloat(void* acc, const void* a, const void* b, size_t n) {
  if (b == nullptr) {
    into<Op, T>(static_cast<T*>(acc), a, n);
  } else {
    to<Op, T>(static_cast<T*>(acc), static_cast<const T*>(a), b, n);
  }
}

template <typename Op, float (*Load)(uint16_t), uint16_t (*Store)(float)>
void dispatchHalf(void* acc, const void* a, const void* b, size_t n) {
  auto* out = static_cast<uint16_t*>(acc);
  const auto* x = static_cast<const uint16_t*>(b == nullptr ? acc : a);
  const void* y = b == nullptr ? a : b;
  for (size_t i = 0; i < n; ++i)
    out[i] = Store(Op::apply(Load(x[i]), Load(loadAt<uint16_t>(y, i))));
}

template <typename Op>
void dispatchType(DataType type, void* acc, const void* a, const void* b, size_t n) {
  switch (type) {
    case DataType::kInt8:
      return dispatchInt<Op, int8_t>(acc, a, b, n);
    case DataType::kUInt8:
      return dispatchInt<Op, uint8_t>(acc, a, b, n);
    case DataType::kInt16:
      return dispatchInt<Op, int16_t>(acc, a, b, n);
    case DataType::kInt32:
      return dispatchInt<Op, int32_t>(acc, a, b, n);
    case DataType::kInt64:
      return dispatchInt<Op, int64_t>(acc, a, b, n);
    case DataType::kFloat16:
      return dispatchHalf<Op, halfToFloat, floatToHalf>(acc, a, b, n);
    case DataType::kBFloat16:
      return dispatchHalf<Op, bfloat16ToFloat, floatToBfloat16>(acc, a, b, n);
    case DataType::kFloat32:
      return dispatchFloat<Op, float>(acc, a, b, n);
    case DataType::kFloat64:
      return dispatchFloat<Op, double>(acc, a, b, n);
  }
  throw InvalidArgumentError("unknown data type " + std::to_string(static_cast<int>(type)));
}

void dispatch(ReduceOp op, DataType type, void* acc, const void* a, const void* b, size_t n) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
      return dispatchType<Sum>(type, acc, a, b, n);
    case ReduceOp::kProduct:
      return dispatchType<Prod>(type, acc, a, b, n);
    case ReduceOp::kMin:
      return dispatchType<Min>(type, acc, a, b, n);
    case ReduceOp::kMax:
      return dispatchType<Max>(type, acc, a, b, n);
    case ReduceOp::kAdasum:
      // Not element-wise: the collective itself applies it (collectives/adasum.h).
      throw InvalidArgumentError("reduce: adasum has no element-wise kernel");
  }
  throw InvalidArgumentError("unknown reduce op " + std::to_string(static_cast<int>(op)));
}

// In a type that holds the divisor: as T, 128 ranks would divide an int8 by -128 and 256 by
// zero.
template <typename T>
void divideInt(T* data, size_t n, int divisor) {
  const int64_t d = divisor;
  for (size_t i = 0; i < n; ++i) data[i] = static_cast<T>(static_cast<int64_t>(data[i]) / d);
}

template <typename T>
void divideFloat(T* __restrict data, size_t n, int divisor) {
  const T d = static_cast<T>(divisor);
  for (size_t i = 0; i < n; ++i) data[i] = data[i] / d;
}

}  // namespace

void reduceInto(ReduceOp op, DataType type, void* acc, const void* in, size_t count) {
  if (count == 0) return;
  dispatch(op, type, acc, in, nullptr, count);
}

void reduceTo(ReduceOp op, DataType type, void* out, const void* a, const void* b, size_t count) {
  if (count == 0) return;
  dispatch(op, type, out, a, b, count);
}

void copyStreaming(void* dst, const void* src, size_t bytes) {
#if defined(__x86_64__)
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  // Head: plain copy up to 16-byte alignment of the destination.
  const size_t head = std::min(bytes, (16 - (reinterpret_cast<uintptr_t>(d) & 15)) & 15);
  std::memcpy(d, s, head);
  d += head;
  s += head;
  bytes -= head;
  size_t i = 0;
  for (; i + 64 <= bytes; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
  }
  std::memcpy(d + i, s + i, bytes - i);
#else
  std::memcpy(dst, src, bytes);
#endif
}

void streamingFence() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

void finishAverage(DataType type, void* data, size_t count, int divisor) {
  if (divisor == 1 || count == 0) return;
  switch (type) {
    case DataType::kInt8:
      return divideInt(static_cast<int8_t*>(data), count, divisor);
    case DataType::kUInt8:
      return divideInt(static_cast<uint8_t*>(data), count, divisor);
    case DataType::kInt16:
      return divideInt(static_cast<int16_t*>(data), count, divisor);
    case DataType::kInt32:
      return divideInt(static_cast<int32_t*>(data), count, divisor);
    case DataType::kInt64:
      return divideInt(static_cast<int64_t*>(data), count, divisor);
    case DataType::kFloat16: {
      auto* h = static_cast<uint16_t*>(data);
      for (size_t i = 0; i < count; ++i) h[i] = floatToHalf(halfToFloat(h[i]) / divisor);
      return;
    }
    case DataType::kBFloat16: {
      auto* h = static_cast<uint16_t*>(data);
      for (size_t i = 0; i < count; ++i) {
        h[i] = floatToBfloat16(bfloat16ToFloat(h[i]) / divisor);
      }
      return;
    }
    case DataType::kFloat32:
      return divideFloat(static_cast<float*>(data), count, divisor);
    case DataType::kFloat64:
      return divideFloat(static_cast<double*>(data), count, divisor);
  }
  throw InvalidArgumentError("unknown data type " + std::to_string(static_cast<int>(type)));
}

}  // namespace hvd::coll
