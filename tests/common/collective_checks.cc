#include "common/collective_checks.h"

#include <cmath>
#include <cstring>
#include <iterator>
#include <sstream>

#include "collectives/host_collectives.h"
#include "common/element.h"
#include "common/half.h"

namespace hvd::test {
namespace {

constexpr DataType kAllTypes[] = {DataType::kInt8,     DataType::kUInt8,   DataType::kInt16,
                                  DataType::kInt32,    DataType::kInt64,   DataType::kFloat16,
                                  DataType::kBFloat16, DataType::kFloat32, DataType::kFloat64};
// A type added to hvd::DataType is checked by every matrix once it is listed here.
static_assert(std::size(kAllTypes) == kNumDataTypes, "kAllTypes must list every DataType");
constexpr ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                                ReduceOp::kProduct};

uint64_t fnv1a(const void* data, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

std::string describe(const char* op, DataType type, ReduceOp reduce, size_t count, bool inPlace,
                     const char* algorithm, int rank, int salt) {
  std::ostringstream out;
  out << op << " " << dataTypeName(type) << " " << reduceOpName(reduce) << " count " << count
      << (inPlace ? " in-place" : " out-of-place") << " " << algorithm << " rank " << rank
      << " salt " << salt;
  return out.str();
}

// Exact combination of the inputs of all ranks as the runtime defines it, then stored as T.
double combine(ReduceOp op, DataType type, int size, size_t i, int salt) {
  double acc = static_cast<double>(inputValue(type, op, 0, i, salt));
  for (int r = 1; r < size; ++r) {
    const double v = static_cast<double>(inputValue(type, op, r, i, salt));
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAverage:
        acc += v;
        break;
      case ReduceOp::kProduct:
        acc *= v;
        break;
      case ReduceOp::kMin:
        acc = std::min(acc, v);
        break;
      case ReduceOp::kMax:
        acc = std::max(acc, v);
        break;
      case ReduceOp::kAdasum:  // not element-wise (tests/unit/adasum_test.cc)
        break;
    }
  }
  return acc;
}

}  // namespace

void storeExpected(DataType type, ReduceOp op, void* base, size_t i, int size, int salt) {
  const double exact = combine(op, type, size, i, salt);
  if (op != ReduceOp::kAverage) {
    storeValue(type, base, i, exact);
    return;
  }
  // Average = the exact sum in the element type, divided as the runtime divides.
  switch (type) {
    case DataType::kInt8:
      static_cast<int8_t*>(base)[i] = static_cast<int8_t>(static_cast<int8_t>(exact) / size);
      return;
    case DataType::kUInt8:
      static_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(static_cast<uint8_t>(exact) / size);
      return;
    case DataType::kInt16:
      static_cast<int16_t*>(base)[i] = static_cast<int16_t>(static_cast<int16_t>(exact) / size);
      return;
    case DataType::kInt32:
      static_cast<int32_t*>(base)[i] = static_cast<int32_t>(exact) / size;
      return;
    case DataType::kInt64:
      static_cast<int64_t*>(base)[i] = static_cast<int64_t>(exact) / size;
      return;
    case DataType::kFloat16:
      static_cast<uint16_t*>(base)[i] = floatToHalf(static_cast<float>(exact) / size);
      return;
    case DataType::kBFloat16:
      static_cast<uint16_t*>(base)[i] = floatToBfloat16(static_cast<float>(exact) / size);
      return;
    case DataType::kFloat32:
      static_cast<float*>(base)[i] = static_cast<float>(exact) / static_cast<float>(size);
      return;
    case DataType::kFloat64:
      static_cast<double*>(base)[i] = exact / size;
      return;
  }
}

namespace {

void fillInput(DataType type, ReduceOp op, void* base, size_t count, int rank, int salt) {
  for (size_t i = 0; i < count; ++i) {
    storeValue(type, base, i, static_cast<double>(inputValue(type, op, rank, i, salt)));
  }
}

// Compares elements [0, count) and reports the first mismatch.
bool compare(CheckReport& report, const std::string& what, DataType type, const void* got,
             const void* want, size_t count) {
  ++report.checks;
  const size_t elem = dataTypeSize(type);
  for (size_t i = 0; i < count; ++i) {
    if (std::memcmp(static_cast<const uint8_t*>(got) + i * elem,
                    static_cast<const uint8_t*>(want) + i * elem, elem) != 0) {
      report.fail(what + ": element " + std::to_string(i) + " differs");
      return false;
    }
  }
  return true;
}

// Every rank must hold byte-identical results: allgather a hash of them.
void checkIdentical(coll::HostCollectives& ctx, CheckReport& report, const std::string& what,
                    const void* data, size_t bytes) {
  const uint64_t mine = fnv1a(data, bytes);
  std::vector<uint64_t> all(ctx.size());
  std::vector<size_t> ones(ctx.size(), 1);
  ctx.allgather(&mine, 1, all.data(), ones, DataType::kInt64, Algorithm::kDirect);
  ++report.checks;
  for (int r = 0; r < ctx.size(); ++r) {
    if (all[r] != mine) {
      report.fail(what + ": result differs between rank " + std::to_string(ctx.rank()) +
                  " and rank " + std::to_string(r));
      return;
    }
  }
}

struct Buffers {
  std::vector<uint8_t> input, output, expected;
  void resize(size_t bytes) {
    input.assign(bytes + 64, 0xCD);
    output.assign(bytes + 64, 0xCD);
    expected.assign(bytes + 64, 0xCD);
  }
};

void runAllreduce(coll::HostCollectives& ctx, CheckReport& report, DataType type, ReduceOp op,
                  size_t count, bool inPlace, Algorithm algorithm, int salt, Buffers& b) {
  const size_t elem = dataTypeSize(type);
  b.resize(count * elem);
  fillInput(type, op, b.input.data(), count, ctx.rank(), salt);
  for (size_t i = 0; i < count; ++i)
    storeExpected(type, op, b.expected.data(), i, ctx.size(), salt);
  void* out = inPlace ? b.input.data() : b.output.data();
  AllreduceOptions options;
  options.op = op;
  options.algorithm = algorithm;
  ctx.allreduce(b.input.data(), out, count, type, options);
  const std::string what =
      describe("allreduce", type, op, count, inPlace,
               algorithm == Algorithm::kRing ? "ring" : "direct", ctx.rank(), salt);
  compare(report, what, type, out, b.expected.data(), count);
  checkIdentical(ctx, report, what, out, count * elem);
}

void runAllgather(coll::HostCollectives& ctx, CheckReport& report, DataType type, size_t count,
                  bool inPlace, Algorithm algorithm, int salt, Buffers& b) {
  const int n = ctx.size();
  // Uneven: rank r contributes (count + r) % (count + 2) elements, so some ranks give zero.
  std::vector<size_t> counts(n);
  size_t total = 0;
  for (int r = 0; r < n; ++r) {
    counts[r] = count == 0 ? 0 : (count + r * 3) % (count + 2);
    total += counts[r];
  }
  const size_t elem = dataTypeSize(type);
  b.resize(total * elem);
  size_t offset = 0;
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < counts[r]; ++i) {
      storeValue(type, b.expected.data(), offset + i,
                 static_cast<double>(inputValue(type, ReduceOp::kSum, r, i, salt)));
    }
    if (r == ctx.rank()) {
      uint8_t* mine = inPlace ? b.output.data() + offset * elem : b.input.data();
      fillInput(type, ReduceOp::kSum, mine, counts[r], r, salt);
    }
    offset += counts[r];
  }
  size_t myOffset = 0;
  for (int r = 0; r < ctx.rank(); ++r) myOffset += counts[r];
  const void* in = inPlace ? b.output.data() + myOffset * elem : b.input.data();
  const auto gotCounts = ctx.allgatherCounts(counts[ctx.rank()]);
  const std::string what =
      describe("allgather", type, ReduceOp::kSum, count, inPlace,
               algorithm == Algorithm::kRing ? "ring" : "direct", ctx.rank(), salt);
  ++report.checks;
  if (gotCounts != counts) report.fail(what + ": allgatherCounts returned wrong counts");
  ctx.allgather(in, counts[ctx.rank()], b.output.data(), counts, type, algorithm);
  compare(report, what, type, b.output.data(), b.expected.data(), total);
  checkIdentical(ctx, report, what, b.output.data(), total * elem);
}

void runBroadcast(coll::HostCollectives& ctx, CheckReport& report, DataType type, size_t count,
                  int root, Algorithm algorithm, int salt, Buffers& b) {
  const size_t elem = dataTypeSize(type);
  b.resize(count * elem);
  fillInput(type, ReduceOp::kSum, b.expected.data(), count, root, salt);
  if (ctx.rank() == root) fillInput(type, ReduceOp::kSum, b.output.data(), count, root, salt);
  BroadcastOptions options;
  options.root = root;
  options.algorithm = algorithm;
  ctx.broadcast(b.output.data(), count, type, options);
  const std::string what =
      describe("broadcast", type, ReduceOp::kSum, count, true,
               algorithm == Algorithm::kRing ? "chain" : "direct", ctx.rank(), salt) +
      " root " + std::to_string(root);
  compare(report, what, type, b.output.data(), b.expected.data(), count);
  checkIdentical(ctx, report, what, b.output.data(), count * elem);
}

void runReducescatter(coll::HostCollectives& ctx, CheckReport& report, DataType type, ReduceOp op,
                      size_t count, bool inPlace, int salt, Buffers& b) {
  const int n = ctx.size();
  const int r = ctx.rank();
  const size_t elem = dataTypeSize(type);
  const auto counts = coll::reducescatterCounts(count, n, 1);
  size_t offset = 0;
  for (int p = 0; p < r; ++p) offset += counts[p];
  b.resize(count * elem);
  fillInput(type, op, b.input.data(), count, r, salt);
  for (size_t i = 0; i < count; ++i) storeExpected(type, op, b.expected.data(), i, n, salt);
  uint8_t* out = inPlace ? b.input.data() + offset * elem : b.output.data();
  ReducescatterOptions options;
  options.op = op;
  ctx.reducescatter(b.input.data(), out, count, type, options);
  const std::string what = describe("reducescatter", type, op, count, inPlace, "auto", r, salt);
  compare(report, what, type, out, b.expected.data() + offset * elem, counts[r]);
}

void runAlltoall(coll::HostCollectives& ctx, CheckReport& report, DataType type, size_t count,
                 int salt, Buffers& b) {
  const int n = ctx.size();
  const int r = ctx.rank();
  // Rank r sends (count + r + 2p) % (count + 1) elements to rank p: uneven, some zero.
  auto elements = [&](int from, int to) { return (count + from + 2 * to) % (count + 1); };
  std::vector<size_t> send(n), recv(n);
  size_t sendTotal = 0, recvTotal = 0;
  for (int p = 0; p < n; ++p) {
    send[p] = elements(r, p);
    recv[p] = elements(p, r);
    sendTotal += send[p];
    recvTotal += recv[p];
  }
  const size_t elem = dataTypeSize(type);
  b.resize(std::max(sendTotal, recvTotal) * elem);
  size_t offset = 0;
  for (int p = 0; p < n; ++p) {
    for (size_t i = 0; i < send[p]; ++i) {
      storeValue(type, b.input.data(), offset + i,
                 static_cast<double>(inputValue(type, ReduceOp::kSum, r, i + 5 * p, salt)));
    }
    offset += send[p];
  }
  offset = 0;
  for (int p = 0; p < n; ++p) {
    for (size_t i = 0; i < recv[p]; ++i) {
      storeValue(type, b.expected.data(), offset + i,
                 static_cast<double>(inputValue(type, ReduceOp::kSum, p, i + 5 * r, salt)));
    }
    offset += recv[p];
  }
  const std::string what =
      describe("alltoall", type, ReduceOp::kSum, count, false, "direct", r, salt);
  ++report.checks;
  if (ctx.alltoallCounts(send) != recv) report.fail(what + ": alltoallCounts is wrong");
  ctx.alltoall(b.input.data(), send, b.output.data(), recv, type);
  compare(report, what, type, b.output.data(), b.expected.data(), recvTotal);
}

// Sets piece/threshold knobs for the checks and restores them after. Only hvd's ring backend
// has them; MPI picks its algorithms itself.
class ScopedOptions {
 public:
  ScopedOptions(coll::HostCollectives& c, size_t pieceBytes, size_t smallBytes) {
    auto* ring = dynamic_cast<coll::RingCollectives*>(&c);
    if (ring == nullptr) return;
    ctx_ = &ring->context();
    saved_ = ctx_->options();
    ctx_->mutableOptions().pieceBytes = pieceBytes;
    ctx_->mutableOptions().smallMessageBytes = smallBytes;
    ctx_->mutableOptions().smallMessageBytesTcp = smallBytes;
  }
  ~ScopedOptions() {
    if (ctx_ != nullptr) ctx_->mutableOptions() = saved_;
  }

 private:
  transport::Context* ctx_ = nullptr;
  transport::ContextOptions saved_;
};

}  // namespace

void CheckReport::fail(const std::string& message) {
  ++failures;
  if (messages.size() < 10) messages.push_back(message);
}

std::string CheckReport::summary() const {
  std::ostringstream out;
  out << checks << " checks, " << failures << " failures";
  for (const auto& m : messages) out << "\n  " << m;
  return out.str();
}

int64_t inputValue(DataType type, ReduceOp op, int rank, size_t index, int salt) {
  const int64_t base = static_cast<int64_t>((index * 7 + rank * 13 + salt * 5) % 17);
  // 1 or 2, and 2 only on the first 7 ranks: a product is at most 2^7 whatever the size, exact
  // in every type (and the same wrap in int8 for the runtime and the expected value). With a 2
  // on every rank that drew one, 512 ranks made 2^241, which no integer type holds.
  if (op == ReduceOp::kProduct) return rank < 7 ? 1 + base % 2 : 1;
  if (type == DataType::kUInt8) return base;  // 0..16: sums of 7 ranks fit
  return base - 8;                            // -8..8
}

void storeValue(DataType type, void* base, size_t i, double v) { storeElement(type, base, i, v); }

std::vector<size_t> matrixCounts(int size) {
  return {0, 1, 2, 3, static_cast<size_t>(size - 1), static_cast<size_t>(size + 1), 1023, 4099};
}

void checkMatrix(coll::HostCollectives& ctx, CheckReport& report) {
  ScopedOptions scoped(ctx, 4096, 256);
  Buffers b;
  const auto counts = matrixCounts(ctx.size());
  for (DataType type : kAllTypes) {
    for (size_t count : counts) {
      for (bool inPlace : {false, true}) {
        for (ReduceOp op : kAllOps) {
          for (Algorithm a : {Algorithm::kRing, Algorithm::kDirect}) {
            runAllreduce(ctx, report, type, op, count, inPlace, a, 1, b);
          }
          runReducescatter(ctx, report, type, op, count, inPlace, 2, b);
        }
        for (Algorithm a : {Algorithm::kRing, Algorithm::kDirect}) {
          runAllgather(ctx, report, type, count, inPlace, a, 3, b);
        }
      }
      for (int root = 0; root < ctx.size(); ++root) {
        for (Algorithm a : {Algorithm::kRing, Algorithm::kDirect}) {
          runBroadcast(ctx, report, type, count, root, a, 4, b);
        }
      }
      runAlltoall(ctx, report, type, count, 5, b);
    }
  }
  // Reducescatter's direct path (small messages) and uneven rows, under the default threshold.
  {
    ScopedOptions direct(ctx, 4096, 1 << 20);
    for (size_t count : counts) {
      runReducescatter(ctx, report, DataType::kFloat32, ReduceOp::kSum, count, false, 6, b);
      runReducescatter(ctx, report, DataType::kInt32, ReduceOp::kAverage, count, true, 6, b);
    }
  }
  ctx.barrier();
}

void checkAllreduceMatrix(coll::HostCollectives& ctx, CheckReport& report) {
  ScopedOptions scoped(ctx, 4096, 256);
  Buffers b;
  const size_t counts[] = {1, static_cast<size_t>(ctx.size()) + 1, 4099};
  const size_t types = std::size(kAllTypes);
  const size_t ops = std::size(kAllOps);
  for (size_t t = 0; t < types; ++t) {
    for (size_t k = 0; k < 2; ++k) {
      const size_t i = t + k;
      runAllreduce(ctx, report, kAllTypes[t], kAllOps[i % ops], counts[i % 3], i % 2 == 0,
                   k == 0 ? Algorithm::kRing : Algorithm::kDirect, static_cast<int>(2 * t + k), b);
    }
  }
  ctx.barrier();
}

void checkIterations(coll::HostCollectives& ctx, CheckReport& report, int iterations) {
  ScopedOptions scoped(ctx, 4096, 256);
  Buffers b;
  for (int it = 0; it < iterations; ++it) {
    const size_t count = 4099 + (it % 3);
    runAllreduce(ctx, report, DataType::kFloat32, ReduceOp::kSum, count, it % 2 == 0,
                 it % 4 < 2 ? Algorithm::kRing : Algorithm::kDirect, it, b);
    runAllreduce(ctx, report, DataType::kInt32, ReduceOp::kMax, 37, false, Algorithm::kRing, it, b);
    runAllgather(ctx, report, DataType::kFloat64, 1023, it % 2 == 1, Algorithm::kRing, it, b);
    runBroadcast(ctx, report, DataType::kFloat16, 2049, it % ctx.size(), Algorithm::kRing, it, b);
    runReducescatter(ctx, report, DataType::kBFloat16, ReduceOp::kSum, 1031, it % 2 == 0, it, b);
    runAlltoall(ctx, report, DataType::kInt8, 301, it, b);
    ctx.barrier();
  }
}

void checkMatrix(transport::Context& ctx, CheckReport& report) {
  coll::RingCollectives ring(ctx);
  checkMatrix(ring, report);
}

void checkIterations(transport::Context& ctx, CheckReport& report, int iterations) {
  coll::RingCollectives ring(ctx);
  checkIterations(ring, report, iterations);
}

}  // namespace hvd::test
