// One element of a typed buffer, read or written as a double: for the places that treat values
// generically (the engine's scaling and fp16 compression, tests that build inputs and expected
// results for every type). Not for bulk arithmetic: the reduce kernels (collectives/reduce.h)
// are the fast path. Integers go through int64, so values written are truncated toward zero and
// wrap as the narrower type would.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/half.h"
#include "hvd/types.hpp"

namespace hvd {

inline double loadElement(DataType type, const void* base, size_t i) {
  switch (type) {
    case DataType::kInt8:
      return static_cast<const int8_t*>(base)[i];
    case DataType::kUInt8:
      return static_cast<const uint8_t*>(base)[i];
    case DataType::kInt16:
      return static_cast<const int16_t*>(base)[i];
    case DataType::kInt32:
      return static_cast<const int32_t*>(base)[i];
    case DataType::kInt64:
      return static_cast<double>(static_cast<const int64_t*>(base)[i]);
    case DataType::kFloat16:
      return halfToFloat(static_cast<const uint16_t*>(base)[i]);
    case DataType::kBFloat16:
      return bfloat16ToFloat(static_cast<const uint16_t*>(base)[i]);
    case DataType::kFloat32:
      return static_cast<const float*>(base)[i];
    case DataType::kFloat64:
      return static_cast<const double*>(base)[i];
  }
  return 0;
}

inline void storeElement(DataType type, void* base, size_t i, double v) {
  switch (type) {
    case DataType::kInt8:
      static_cast<int8_t*>(base)[i] = static_cast<int8_t>(static_cast<int64_t>(v));
      return;
    case DataType::kUInt8:
      static_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(static_cast<int64_t>(v));
      return;
    case DataType::kInt16:
      static_cast<int16_t*>(base)[i] = static_cast<int16_t>(static_cast<int64_t>(v));
      return;
    case DataType::kInt32:
      static_cast<int32_t*>(base)[i] = static_cast<int32_t>(static_cast<int64_t>(v));
      return;
    case DataType::kInt64:
      static_cast<int64_t*>(base)[i] = static_cast<int64_t>(v);
      return;
    case DataType::kFloat16:
      static_cast<uint16_t*>(base)[i] = floatToHalf(static_cast<float>(v));
      return;
    case DataType::kBFloat16:
      static_cast<uint16_t*>(base)[i] = floatToBfloat16(static_cast<float>(v));
      return;
    case DataType::kFloat32:
      static_cast<float*>(base)[i] = static_cast<float>(v);
      return;
    case DataType::kFloat64:
      static_cast<double*>(base)[i] = v;
      return;
  }
}

}  // namespace hvd
