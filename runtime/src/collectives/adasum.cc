// Adasum over a transport Context. The tree is the one adasum.h states; here is how it runs.
//
// Fold (n = p + e ranks, p = 2^k the largest power of two <= n, e < p): rank p + i sends its
// whole buffer to rank i, which combines adasum(x_i, x_{p+i}) per tensor locally, and waits
// for the final result from it. Each extra rank has a partner of its own, so all of them fold
// in one concurrent step, and what follows is the power-of-two tree Horovod's VHDD computes.
// Adasum is not associative, so this pairing is part of the definition of the result
// (docs/allreduce_ops.md states it, and the tests' reference tree follows it).
//
// Vector halving, distance doubling over ranks 0..p-1 (Horovod's VHDD). Each rank holds a range
// of the fused buffer, all of it at first. At distance d = 1, 2, ..., p/2 rank r pairs with
// r ^ d, whose range is the same: the rank with (r & d) == 0 keeps the lower half (floor) and
// sends the upper, its partner the reverse. Both then hold the same element range of two
// vectors: "left" (the combined vector of the block of d ranks below) and "right". For each
// tensor they compute the partial sums a.b, |left|^2, |right|^2 over the part of it inside
// their range, and sum those three scalars per tensor over the 2d ranks that hold the pieces of
// the same two vectors (recursive doubling within the aligned block of 2d ranks: both sides of
// each exchange add the same two numbers, so every rank of the block ends with the same bits).
// With the sums over the whole tensors, each rank applies the rule to its piece. After the
// last distance every rank owns 1/p of the result; distance halving (the exchanges in reverse)
// gathers it back. Each rank sends 2(p-1)/p of the buffer, as the ring allreduce does.
#include "collectives/adasum.h"

#include <algorithm>
#include <cstring>

#include "collectives/agreement.h"
#include "collectives/validate.h"
#include "common/half.h"
#include "hvd/error.hpp"
#include "transport/progress.h"

namespace hvd::coll {
namespace {

using transport::RecvAction;
using transport::Schedule;

// Workspace slots (transport/context.h): 0, 1 and 3 (descriptors) are the other collectives'.
constexpr int kSlotData = 5;
constexpr int kSlotRecv = 6;
constexpr int kSlotSums = 7;

// `widen` turns an element into float64.
template <typename T, typename Widen>
AdasumSums sumsOf(const T* __restrict a, const T* __restrict b, size_t count, Widen widen) {
  // Four independent accumulators of each sum: the loop is bound by the latency of the float64
  // additions otherwise, and the compiler may not reorder them itself.
  double dot[4] = {0, 0, 0, 0}, aa[4] = {0, 0, 0, 0}, bb[4] = {0, 0, 0, 0};
  size_t i = 0;
  for (; i + 4 <= count; i += 4) {
    for (int k = 0; k < 4; ++k) {
      const double x = widen(a[i + k]);
      const double y = widen(b[i + k]);
      dot[k] += x * y;
      aa[k] += x * x;
      bb[k] += y * y;
    }
  }
  for (; i < count; ++i) {
    const double x = widen(a[i]);
    const double y = widen(b[i]);
    dot[0] += x * y;
    aa[0] += x * x;
    bb[0] += y * y;
  }
  AdasumSums s;
  s.dot = (dot[0] + dot[1]) + (dot[2] + dot[3]);
  s.aa = (aa[0] + aa[1]) + (aa[2] + aa[3]);
  s.bb = (bb[0] + bb[1]) + (bb[2] + bb[3]);
  return s;
}

template <typename T>
void scaledAddWide(T* __restrict a, const T* __restrict b, size_t count, double ca, double cb) {
  for (size_t i = 0; i < count; ++i) {
    a[i] = static_cast<T>(ca * static_cast<double>(a[i]) + cb * static_cast<double>(b[i]));
  }
}

template <float (*Load)(uint16_t), uint16_t (*Store)(float)>
void scaledAddHalf(uint16_t* __restrict a, const uint16_t* __restrict b, size_t count, double ca,
                   double cb) {
  const float fa = static_cast<float>(ca);
  const float fb = static_cast<float>(cb);
  for (size_t i = 0; i < count; ++i) a[i] = Store(fa * Load(a[i]) + fb * Load(b[i]));
}

// Runs one exchange with `peer`: send `sendBytes` from `send`, receive `recvBytes` into `recv`.
// Empty directions are skipped (both sides know both sizes).
void exchange(Context& ctx, int peer, const void* send, size_t sendBytes, uint8_t* recv,
              size_t recvBytes, size_t align) {
  Schedule& schedule = scheduleOf(ctx);
  if (sendBytes > 0) schedule.send(peer, send, sendBytes);
  if (recvBytes > 0) {
    RecvAction copy;
    copy.dst = recv;
    schedule.recv(peer, recvBytes, align, copy);
  }
  if (sendBytes > 0 || recvBytes > 0) transport::run(ctx, schedule, "allreduce");
}

// A range of element indices of the fused buffer.
struct Span {
  size_t lo = 0;
  size_t hi = 0;
  size_t size() const { return hi - lo; }
};

// The fused buffer: `data` holds every tensor back to back, tensor t at [bounds[t],
// bounds[t + 1]).
class Fused {
 public:
  Fused(DataType type, uint8_t* data, std::vector<size_t> bounds)
      : type_(type), elem_(dataTypeSize(type)), data_(data), bounds_(std::move(bounds)) {}

  size_t tensors() const { return bounds_.size() - 1; }
  size_t total() const { return bounds_.back(); }
  size_t elem() const { return elem_; }
  uint8_t* at(size_t i) const { return data_ + i * elem_; }

  // Calls each(t, lo, hi) for every tensor t with elements in `span`, [lo, hi) its part there.
  template <typename Each>
  void forEachPiece(const Span& span, Each&& each) const {
    for (size_t t = 0; t < tensors(); ++t) {
      const size_t lo = std::max(span.lo, bounds_[t]);
      const size_t hi = std::min(span.hi, bounds_[t + 1]);
      if (lo < hi) each(t, lo, hi);
    }
  }

  // data[span] = adasum(data[span], other[0 .. span.size()) per tensor, given the sums over
  // the whole tensors (3 per tensor: a.b, |a|^2, |b|^2 with a the data, b the other).
  void combine(const Span& span, const uint8_t* other, const double* sums) const {
    forEachPiece(span, [&](size_t t, size_t lo, size_t hi) {
      AdasumSums s;
      s.dot = sums[3 * t];
      s.aa = sums[3 * t + 1];
      s.bb = sums[3 * t + 2];
      adasumScaledAdd(type_, at(lo), other + (lo - span.lo) * elem_, hi - lo,
                      adasumCoefficients(s));
    });
  }

  // The partial sums over `span` per tensor, 3 per tensor (zeros for those outside it), with
  // the norms in the order (left, right): `left` says whether data holds the left vector.
  void partialSums(const Span& span, const uint8_t* other, bool left, double* sums) const {
    std::fill(sums, sums + 3 * tensors(), 0.0);
    forEachPiece(span, [&](size_t t, size_t lo, size_t hi) {
      const AdasumSums s = adasumSums(type_, at(lo), other + (lo - span.lo) * elem_, hi - lo);
      sums[3 * t] = s.dot;
      sums[3 * t + 1] = left ? s.aa : s.bb;
      sums[3 * t + 2] = left ? s.bb : s.aa;
    });
  }

 private:
  DataType type_;
  size_t elem_;
  uint8_t* data_;
  std::vector<size_t> bounds_;
};

// Sums `count` doubles over the aligned block of `width` ranks (a power of two) around this
// rank, by recursive doubling; every rank of the block ends with the same bits.
void blockSum(Context& ctx, double* values, size_t count, int width) {
  const int r = ctx.rank();
  const size_t bytes = count * sizeof(double);
  auto* theirs = reinterpret_cast<double*>(ctx.workspace().get(kSlotSums, bytes));
  for (int j = 1; j < width; j <<= 1) {
    exchange(ctx, r ^ j, values, bytes, reinterpret_cast<uint8_t*>(theirs), bytes, sizeof(double));
    for (size_t i = 0; i < count; ++i) values[i] += theirs[i];
  }
}

// Vector halving, distance doubling over ranks 0..p-1 (this rank < p), then distance halving.
void vhdd(Context& ctx, const Fused& fused, int p) {
  const int r = ctx.rank();
  const size_t elem = fused.elem();
  uint8_t* recv = ctx.workspace().get(kSlotRecv, (fused.total() - fused.total() / 2) * elem + 1);
  std::vector<double> sums(3 * fused.tensors());
  std::vector<Span> held;  // the range before each distance, for the way back
  Span mine{0, fused.total()};
  for (int d = 1; d < p; d <<= 1) {
    held.push_back(mine);
    const bool left = (r & d) == 0;  // this rank keeps the lower half
    const size_t half = mine.size() / 2;
    const Span lower{mine.lo, mine.lo + half};
    const Span upper{mine.lo + half, mine.hi};
    const Span keep = left ? lower : upper;
    const Span give = left ? upper : lower;
    exchange(ctx, r ^ d, fused.at(give.lo), give.size() * elem, recv, keep.size() * elem, elem);
    mine = keep;
    fused.partialSums(mine, recv, left, sums.data());
    blockSum(ctx, sums.data(), sums.size(), 2 * d);
    if (!left) {
      // Put this rank's own vector first: sums hold (left, right) norms.
      for (size_t t = 0; t < fused.tensors(); ++t) std::swap(sums[3 * t + 1], sums[3 * t + 2]);
    }
    fused.combine(mine, recv, sums.data());
  }
  for (int d = p >> 1; d >= 1; d >>= 1) {
    const Span whole = held.back();
    held.pop_back();
    const bool left = (r & d) == 0;
    const Span theirs = left ? Span{mine.hi, whole.hi} : Span{whole.lo, mine.lo};
    exchange(ctx, r ^ d, fused.at(mine.lo), mine.size() * elem, fused.at(theirs.lo),
             theirs.size() * elem, elem);
    mine = whole;
  }
}

}  // namespace

bool adasumSupports(DataType type) {
  return type == DataType::kFloat16 || type == DataType::kBFloat16 || type == DataType::kFloat32 ||
         type == DataType::kFloat64;
}

AdasumSums adasumSums(DataType type, const void* a, const void* b, size_t count) {
  auto wide = [](auto x) { return static_cast<double>(x); };
  switch (type) {
    case DataType::kFloat32:
      return sumsOf(static_cast<const float*>(a), static_cast<const float*>(b), count, wide);
    case DataType::kFloat64:
      return sumsOf(static_cast<const double*>(a), static_cast<const double*>(b), count, wide);
    case DataType::kFloat16:
      return sumsOf(static_cast<const uint16_t*>(a), static_cast<const uint16_t*>(b), count,
                    [](uint16_t h) { return static_cast<double>(halfToFloat(h)); });
    case DataType::kBFloat16:
      return sumsOf(static_cast<const uint16_t*>(a), static_cast<const uint16_t*>(b), count,
                    [](uint16_t h) { return static_cast<double>(bfloat16ToFloat(h)); });
    default:
      throw InvalidArgumentError(std::string("adasum: no ") + dataTypeName(type) +
                                 " kernel (floating-point types only)");
  }
}

AdasumCoefficients adasumCoefficients(const AdasumSums& s) {
  AdasumCoefficients c;
  if (s.aa >= kAdasumZeroNormSq) c.a = 1.0 - s.dot / s.aa * 0.5;
  if (s.bb >= kAdasumZeroNormSq) c.b = 1.0 - s.dot / s.bb * 0.5;
  return c;
}

void adasumScaledAdd(DataType type, void* a, const void* b, size_t count,
                     const AdasumCoefficients& c) {
  switch (type) {
    case DataType::kFloat32:
      return scaledAddWide(static_cast<float*>(a), static_cast<const float*>(b), count, c.a, c.b);
    case DataType::kFloat64:
      return scaledAddWide(static_cast<double*>(a), static_cast<const double*>(b), count, c.a, c.b);
    case DataType::kFloat16:
      return scaledAddHalf<halfToFloat, floatToHalf>(
          static_cast<uint16_t*>(a), static_cast<const uint16_t*>(b), count, c.a, c.b);
    case DataType::kBFloat16:
      return scaledAddHalf<bfloat16ToFloat, floatToBfloat16>(
          static_cast<uint16_t*>(a), static_cast<const uint16_t*>(b), count, c.a, c.b);
    default:
      throw InvalidArgumentError(std::string("adasum: no ") + dataTypeName(type) +
                                 " kernel (floating-point types only)");
  }
}

void adasumPair(DataType type, void* a, const void* b, size_t count) {
  adasumScaledAdd(type, a, b, count, adasumCoefficients(adasumSums(type, a, b, count)));
}

void adasumAllreduce(Context& ctx, const std::vector<AllreduceSegment>& segments, size_t count,
                     DataType type) {
  const int n = ctx.size();
  const int r = ctx.rank();
  if (n > 1) {
    Descriptor mine = describe(CollectiveKind::kAllreduce, type, count);
    mine.op = static_cast<uint8_t>(ReduceOp::kAdasum);
    mine.algorithm = kAlgorithmAdasum;
    agree(ctx, "allreduce", mine, "");
  }
  const size_t elem = dataTypeSize(type);
  // Work in the output of a lone tensor, else in a packed copy of all of them.
  uint8_t* data;
  if (segments.size() == 1) {
    data = static_cast<uint8_t*>(segments[0].output);
    if (count > 0 && segments[0].input != data) std::memmove(data, segments[0].input, count * elem);
  } else {
    data = ctx.workspace().get(kSlotData, count * elem + 1);
    size_t at = 0;
    for (const AllreduceSegment& s : segments) {
      if (s.count > 0) std::memcpy(data + at * elem, s.input, s.count * elem);
      at += s.count;
    }
  }
  std::vector<size_t> bounds{0};
  for (const AllreduceSegment& s : segments) bounds.push_back(bounds.back() + s.count);
  const Fused fused(type, data, std::move(bounds));

  if (n > 1 && count > 0) {
    int p = 1;
    while (p * 2 <= n) p *= 2;
    const int extra = n - p;
    const size_t bytes = count * elem;
    if (r >= p) {
      // One step: the whole vector to rank r - p, the result back from it into the same
      // buffer (the result comes only after rank r - p has received every byte sent).
      Schedule& schedule = scheduleOf(ctx);
      schedule.send(r - p, data, bytes);
      RecvAction copy;
      copy.dst = data;
      schedule.recv(r - p, bytes, elem, copy);
      transport::run(ctx, schedule, "allreduce");
    } else {
      if (r < extra) {
        uint8_t* other = ctx.workspace().get(kSlotRecv, bytes);
        exchange(ctx, r + p, nullptr, 0, other, bytes, elem);
        fused.forEachPiece({0, count}, [&](size_t, size_t lo, size_t hi) {
          adasumPair(type, fused.at(lo), other + lo * elem, hi - lo);
        });
      }
      vhdd(ctx, fused, p);
      if (r < extra) exchange(ctx, r + p, data, bytes, nullptr, 0, elem);
    }
  }
  if (segments.size() > 1) {
    size_t at = 0;
    for (const AllreduceSegment& s : segments) {
      if (s.count > 0) std::memcpy(s.output, data + at * elem, s.count * elem);
      at += s.count;
    }
  }
}

}  // namespace hvd::coll
