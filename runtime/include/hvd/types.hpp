// Element types and reduction operations of libhvd collectives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace hvd {

enum class DataType : int {
  kInt8 = 0,
  kUInt8 = 1,
  kInt32 = 2,
  kInt64 = 3,
  kFloat16 = 4,
  kBFloat16 = 5,
  kFloat32 = 6,
  kFloat64 = 7,
  // Appended, not placed beside kInt8: the values are wire codes and C ABI values (HVD_INT16).
  kInt16 = 8,
};
constexpr int kNumDataTypes = 9;

enum class ReduceOp : int {
  kSum = 0,
  kAverage = 1,
  kMin = 2,
  kMax = 3,
  kProduct = 4,
  // Adaptive summation (Maheswaran et al., "Adaptive Summation"; Horovod's hvd.Adasum): pairs
  // of vectors a, b combine as (1 - a.b / 2|a|^2) a + (1 - a.b / 2|b|^2) b, recursively over
  // the ranks (docs/allreduce_ops.md has the tree). Allreduce of floating-point types only;
  // every tensor of a call is its own vector.
  kAdasum = 5,
};
constexpr int kNumReduceOps = 6;

// Size of one element in bytes; throws InvalidArgumentError for a value outside the enum.
size_t dataTypeSize(DataType type);
// "float32", "bfloat16", ...
const char* dataTypeName(DataType type);
// "sum", "average", ..., "adasum"
const char* reduceOpName(ReduceOp op);
// Parses the names above (and the aliases float, double, half, int, short, avg, prod); throws
// InvalidArgumentError naming the text and the accepted names.
DataType parseDataType(const std::string& text);
ReduceOp parseReduceOp(const std::string& text);

}  // namespace hvd
