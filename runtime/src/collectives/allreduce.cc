// Allreduce.
//
// Ring (bandwidth-optimal, for large messages). The buffer is cut into `n` chunks (the first
// count % n chunks one element longer). Rank r sends to r+1 and receives from r-1:
//   reduce-scatter, steps s = 0..n-2: send chunk (r-s), receive chunk (r-s-1) and reduce it
//     into the output. After n-1 steps rank r holds chunk (r+1) fully reduced.
//   allgather, steps t = 0..n-2: send chunk (r+1-t), receive chunk (r-t) and copy it.
// Each rank sends 2(n-1)/n of the buffer, the minimum. The chunk sent at step g+1 is the one
// received at step g, so the schedule chains each send to the previous receive and the whole
// ring streams in pieces (progress.h) instead of moving chunk by chunk.
// Every chunk's final value is computed once (by the last rank of its reduction chain, which
// also applies the average) and then copied, so all ranks end bit-identical.
//
// Direct (latency-optimal, for small messages): every rank sends its whole input to every
// other rank and reduces the n inputs itself in rank order 0..n-1; the same inputs in the same
// order give the same bits everywhere. One communication round instead of 2(n-1).
#include <cstring>

#include "collectives/collectives.h"
#include "collectives/reduce.h"
#include "collectives/validate.h"
#include "transport/progress.h"

namespace hvd::coll {
namespace {

using transport::RecvAction;
using transport::Schedule;

// Above this many bytes a buffer no longer fits in cache beside its peers' (L2 is 0.5-2 MiB per
// core); below it, results stay cache-resident for the caller.
constexpr size_t kStreamingBytes = 4 << 20;

void allreduceDirect(Context& ctx, const uint8_t* in, uint8_t* out, size_t count, DataType type,
                     ReduceOp op) {
  const int n = ctx.size();
  const int r = ctx.rank();
  const size_t elem = dataTypeSize(type);
  const size_t bytes = count * elem;
  uint8_t* gathered = ctx.workspace().get(0, bytes * n);
  std::memcpy(gathered + r * bytes, in, bytes);
  Schedule& schedule = scheduleOf(ctx);
  for (int k = 1; k < n; ++k) {
    const int peer = (r + k) % n;
    schedule.send(peer, in, bytes);
  }
  for (int k = 1; k < n; ++k) {
    const int peer = (r - k + n) % n;
    RecvAction copy;
    copy.kind = RecvAction::Kind::kCopy;
    copy.dst = gathered + peer * bytes;
    schedule.recv(peer, bytes, elem, copy);
  }
  transport::run(ctx, schedule, "allreduce");
  reduceTo(op, type, out, gathered, gathered + bytes, count);
  for (int p = 2; p < n; ++p) reduceInto(op, type, out, gathered + p * bytes, count);
  if (op == ReduceOp::kAverage) finishAverage(type, out, count, n);
}

void allreduceRing(Context& ctx, const uint8_t* in, uint8_t* out, size_t count, DataType type,
                   ReduceOp op) {
  const int n = ctx.size();
  const int r = ctx.rank();
  const size_t elem = dataTypeSize(type);
  const int next = (r + 1) % n;
  const int prev = (r - 1 + n) % n;
  auto chunkCount = [&](int c) { return count / n + (static_cast<size_t>(c) < count % n); };
  auto chunkOffset = [&](int c) { return (count / n) * c + std::min<size_t>(c, count % n); };
  auto mod = [n](int x) { return ((x % n) + n) % n; };

  Schedule& schedule = scheduleOf(ctx);
  int lastRecv = -1;
  for (int s = 0; s < n - 1; ++s) {
    const int sendChunk = mod(r - s);
    const int recvChunk = mod(r - s - 1);
    const uint8_t* source = (s == 0 ? in : out) + chunkOffset(sendChunk) * elem;
    schedule.send(next, source, chunkCount(sendChunk) * elem, lastRecv, /*forwards=*/s > 0);
    RecvAction reduce;
    reduce.op = op;
    reduce.type = type;
    reduce.dst = out + chunkOffset(recvChunk) * elem;
    if (in == out) {
      reduce.kind = RecvAction::Kind::kReduceInto;
    } else {
      reduce.kind = RecvAction::Kind::kReduceTo;
      reduce.src = in + chunkOffset(recvChunk) * elem;
    }
    if (op == ReduceOp::kAverage && s == n - 2) reduce.averageDivisor = n;
    // Partial sums of earlier steps are overwritten by the allgather phase: only forwarded.
    reduce.resultNeeded = s == n - 2;
    // The final reduced chunk is forwarded from the ring (progress.cc), so its copy in the
    // output is not read again: stream it when large.
    reduce.streaming = reduce.resultNeeded && count * elem >= kStreamingBytes;
    lastRecv = schedule.recv(prev, chunkCount(recvChunk) * elem, elem, reduce);
  }
  for (int t = 0; t < n - 1; ++t) {
    const int sendChunk = mod(r + 1 - t);
    const int recvChunk = mod(r - t);
    schedule.send(next, out + chunkOffset(sendChunk) * elem, chunkCount(sendChunk) * elem, lastRecv,
                  /*forwards=*/true);
    RecvAction copy;
    // Chunks received in the allgather phase are final: nobody reads them again during the
    // collective, so large ones bypass the cache.
    copy.kind = RecvAction::Kind::kCopy;
    copy.streaming = count * elem >= kStreamingBytes;
    copy.dst = out + chunkOffset(recvChunk) * elem;
    lastRecv = schedule.recv(prev, chunkCount(recvChunk) * elem, elem, copy);
  }
  transport::run(ctx, schedule, "allreduce");
}

}  // namespace

void allreduce(Context& ctx, const void* input, void* output, size_t count, DataType type,
               const AllreduceOptions& options) {
  validateBuffers("allreduce", input, output, count, type);
  validateOp("allreduce", options.op);
  ctx.checkUsable();
  const auto* in = static_cast<const uint8_t*>(input);
  auto* out = static_cast<uint8_t*>(output);
  const size_t bytes = count * dataTypeSize(type);
  if (count == 0) return;
  if (ctx.size() == 1) {
    if (out != in) std::memcpy(out, in, bytes);
    return;
  }
  const bool direct =
      options.algorithm == Algorithm::kDirect ||
      (options.algorithm == Algorithm::kAuto &&
       (bytes <= ctx.smallMessageThreshold() || count < static_cast<size_t>(ctx.size())));
  if (direct) {
    allreduceDirect(ctx, in, out, count, type, options.op);
  } else {
    allreduceRing(ctx, in, out, count, type, options.op);
  }
}

}  // namespace hvd::coll
