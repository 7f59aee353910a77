// Reducescatter with uneven splits: the buffer is divided into rows of `rowElements`; rank p
// receives rows/n rows, and the first rows % n ranks one more.
//
// Ring: at step s (0..n-2) rank r sends partial chunk (r-s-1) to r+1 and receives chunk
// (r-s-2) from r-1, reducing it with its own input into a workspace; the last step receives
// chunk r and reduces straight into the output. Each rank sends (n-1)/n of the buffer. Sends
// are chained to the previous receive (the partial sum forwarded is the one just computed).
// Direct (small): every rank sends each peer its chunk; each rank reduces the n contributions
// to its own chunk in rank order.
// Agreement (agreement.h): count, op and rowElements travel in each rank's descriptor, the
// direct algorithm's chunks behind it; the ring starts after a round of descriptors.
#include <cstring>

#include "collectives/agreement.h"
#include "collectives/collectives.h"
#include "collectives/reduce.h"
#include "collectives/validate.h"

namespace hvd::coll {

using transport::RecvAction;
using transport::Schedule;

std::vector<size_t> reducescatterCounts(size_t count, int size, size_t rowElements) {
  if (rowElements == 0) throw InvalidArgumentError("reducescatter: rowElements must be >= 1");
  if (count % rowElements != 0) {
    throw InvalidArgumentError("reducescatter: count " + std::to_string(count) +
                               " is not a multiple of rowElements " + std::to_string(rowElements));
  }
  if (size < 1) throw InvalidArgumentError("reducescatter: size must be >= 1");
  const size_t rows = count / rowElements;
  std::vector<size_t> counts(size);
  for (int p = 0; p < size; ++p) {
    counts[p] = (rows / size + (static_cast<size_t>(p) < rows % size)) * rowElements;
  }
  return counts;
}

void reducescatter(Context& ctx, const void* input, void* output, size_t count, DataType type,
                   const ReducescatterOptions& options) {
  ctx.checkUsable();
  const int n = ctx.size();
  const int r = ctx.rank();
  std::vector<size_t> counts;
  const std::string invalid = localError([&] {
    validateBuffers("reducescatter", input, output, count, type);
    validateOp("reducescatter", options.op);
    counts = reducescatterCounts(count, n, options.rowElements);
  });
  Descriptor mine = describe(CollectiveKind::kReducescatter, type, count);
  mine.op = static_cast<uint8_t>(options.op);
  mine.extra = options.rowElements;
  if (!invalid.empty()) {
    mine.flags = kInvalid;
    if (n > 1) agree(ctx, "reducescatter", mine, invalid);
    throw InvalidArgumentError(invalid);
  }
  const size_t elem = dataTypeSize(type);
  std::vector<size_t> offset(n + 1, 0);
  for (int p = 0; p < n; ++p) offset[p + 1] = offset[p] + counts[p];
  const auto* in = static_cast<const uint8_t*>(input);
  auto* out = static_cast<uint8_t*>(output);
  const ReduceOp op = options.op;
  if (n == 1) {
    if (count > 0 && out != in) std::memmove(out, in, count * elem);
    return;
  }

  // Beyond the full mesh the ring serves small messages too (its zero-length chunks move
  // nothing).
  const bool direct = count * elem <= ctx.smallMessageThreshold() && ctx.fullMesh();
  if (direct) {
    mine.algorithm = kAlgorithmDirect;
    Framing framing(ctx, mine);
    Schedule& schedule = scheduleOf(ctx);
    const size_t own = counts[r] * elem;
    uint8_t* gathered = ctx.workspace().get(0, own * n);
    if (own > 0) std::memcpy(gathered + r * own, in + offset[r] * elem, own);
    for (int k = 1; k < n; ++k) {
      const int peer = (r + k) % n;
      framing.send(schedule, peer, in + offset[peer] * elem, counts[peer] * elem);
    }
    for (int k = 1; k < n; ++k) {
      const int peer = (r - k + n) % n;
      RecvAction copy;
      copy.dst = gathered + peer * own;
      framing.recv(schedule, peer, own, elem, copy);
    }
    transport::run(ctx, schedule, "reducescatter");
    framing.check("reducescatter", "");
    if (counts[r] == 0) return;
    reduceTo(op, type, out, gathered, gathered + own, counts[r]);
    for (int p = 2; p < n; ++p) reduceInto(op, type, out, gathered + p * own, counts[r]);
    if (op == ReduceOp::kAverage) finishAverage(type, out, counts[r], n);
    return;
  }

  mine.algorithm = kAlgorithmRing;
  agree(ctx, "reducescatter", mine, "");
  Schedule& schedule = scheduleOf(ctx);
  uint8_t* partial = ctx.workspace().get(0, count * elem);
  // The output may be this rank's own chunk of the input (in place). Any other overlap with
  // the input would overwrite data still being sent, so the result is staged instead.
  uint8_t* target = out;
  const uint8_t* ownChunk = in + offset[r] * elem;
  const bool overlaps = out < in + count * elem && in < out + counts[r] * elem;
  if (overlaps && out != ownChunk) target = ctx.workspace().get(1, counts[r] * elem);
  const int next = (r + 1) % n;
  const int prev = (r - 1 + n) % n;
  auto mod = [n](int x) { return ((x % n) + n) % n; };
  int lastRecv = -1;
  for (int s = 0; s < n - 1; ++s) {
    const int sendChunk = mod(r - s - 1);
    const int recvChunk = mod(r - s - 2);
    const uint8_t* source = (s == 0 ? in : partial) + offset[sendChunk] * elem;
    schedule.send(next, source, counts[sendChunk] * elem, lastRecv, /*forwards=*/s > 0);
    RecvAction reduce;
    reduce.kind = RecvAction::Kind::kReduceTo;
    reduce.op = op;
    reduce.type = type;
    reduce.src = in + offset[recvChunk] * elem;
    if (s == n - 2) {
      reduce.dst = target;  // recvChunk == r
      if (target == reduce.src) reduce.kind = RecvAction::Kind::kReduceInto;
      if (op == ReduceOp::kAverage) reduce.averageDivisor = n;
    } else {
      reduce.dst = partial + offset[recvChunk] * elem;
      reduce.resultNeeded = false;  // a partial sum: only forwarded
    }
    lastRecv = schedule.recv(prev, counts[recvChunk] * elem, elem, reduce);
  }
  transport::run(ctx, schedule, "reducescatter");
  if (target != out) std::memcpy(out, target, counts[r] * elem);
}

}  // namespace hvd::coll
