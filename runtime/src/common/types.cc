#include "hvd/types.hpp"

#include "hvd/error.hpp"

namespace hvd {
namespace {

struct TypeInfo {
  const char* name;
  size_t size;
};

constexpr TypeInfo kTypes[kNumDataTypes] = {
    {"int8", 1},     {"uint8", 1},   {"int32", 4},   {"int64", 8}, {"float16", 2},
    {"bfloat16", 2}, {"float32", 4}, {"float64", 8}, {"int16", 2},
};

constexpr const char* kOps[kNumReduceOps] = {"sum", "average", "min", "max", "product", "adasum"};

[[noreturn]] __attribute__((noinline, cold)) void throwUnknownType(int index) {
  throw InvalidArgumentError("unknown data type " + std::to_string(index) +
                             " (valid: 0..8: int8, uint8, int32, int64, float16, bfloat16, "
                             "float32, float64, int16)");
}

// The check inline and the throw out of line: dataTypeSize is on every collective's path,
// several times.
inline int checkedType(DataType type) {
  const int index = static_cast<int>(type);
  if (index < 0 || index >= kNumDataTypes) throwUnknownType(index);
  return index;
}

}  // namespace

size_t dataTypeSize(DataType type) { return kTypes[checkedType(type)].size; }

const char* dataTypeName(DataType type) { return kTypes[checkedType(type)].name; }

const char* reduceOpName(ReduceOp op) {
  const int index = static_cast<int>(op);
  if (index < 0 || index >= kNumReduceOps) {
    throw InvalidArgumentError("unknown reduce op " + std::to_string(index) +
                               " (valid: sum, average, min, max, product, adasum)");
  }
  return kOps[index];
}

DataType parseDataType(const std::string& text) {
  for (int i = 0; i < kNumDataTypes; ++i) {
    if (text == kTypes[i].name) return static_cast<DataType>(i);
  }
  if (text == "float" || text == "fp32") return DataType::kFloat32;
  if (text == "double" || text == "fp64") return DataType::kFloat64;
  if (text == "half" || text == "fp16") return DataType::kFloat16;
  if (text == "bf16") return DataType::kBFloat16;
  if (text == "int") return DataType::kInt32;
  if (text == "char") return DataType::kInt8;
  if (text == "short") return DataType::kInt16;
  throw InvalidArgumentError("unknown data type '" + text +
                             "' (expected int8, uint8, int16, int32, int64, float16, bfloat16, "
                             "float32 or float64)");
}

ReduceOp parseReduceOp(const std::string& text) {
  for (int i = 0; i < kNumReduceOps; ++i) {
    if (text == kOps[i]) return static_cast<ReduceOp>(i);
  }
  if (text == "avg" || text == "mean") return ReduceOp::kAverage;
  if (text == "prod") return ReduceOp::kProduct;
  throw InvalidArgumentError("unknown reduce op '" + text +
                             "' (expected sum, average, min, max, product or adasum)");
}

}  // namespace hvd
