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
//
// Adasum (ReduceOp::kAdasum) is not element-wise: it has an algorithm of its own (adasum.h), in
// which every segment of allreduceSegments is its own vector.
//
// Agreement (agreement.h): the direct algorithm's inputs travel behind each rank's descriptor;
// the ring starts only after a round of descriptors. Either way every rank has checked every
// rank's call before it uses a byte of their data.
#include <algorithm>
#include <cstring>
#include <vector>

#include "collectives/adasum.h"
#include "collectives/agreement.h"
#include "collectives/collectives.h"
#include "collectives/gathered.h"
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

Descriptor describeAllreduce(size_t count, DataType type, ReduceOp op) {
  Descriptor d = describe(CollectiveKind::kAllreduce, type, count);
  d.op = static_cast<uint8_t>(op);
  return d;
}

// The n inputs (rank p's at from(p)) reduced in rank order: the same bits on every rank.
template <typename From>
void reduceInRankOrder(uint8_t* out, size_t count, int n, DataType type, ReduceOp op, From&& from) {
  reduceTo(op, type, out, from(0), from(1), count);
  for (int p = 2; p < n; ++p) reduceInto(op, type, out, from(p), count);
  if (op == ReduceOp::kAverage) finishAverage(type, out, count, n);
}

// The direct algorithm beyond the full mesh: the inputs reach every rank through gatherBlocks.
void allreduceGathered(Context& ctx, const uint8_t* in, uint8_t* out, size_t count, DataType type,
                       ReduceOp op) {
  const int n = ctx.size();
  const int r = ctx.rank();
  const size_t elem = dataTypeSize(type);
  const size_t bytes = count * elem;
  Descriptor mine = describeAllreduce(count, type, op);
  mine.algorithm = kAlgorithmDirect;
  agreeGathered(ctx, "allreduce", mine, "");
  if (count == 0) return;
  uint8_t* gathered = ctx.workspace().get(0, bytes * n);
  std::memcpy(gathered + r * bytes, in, bytes);
  std::vector<size_t> offsets(n + 1);
  for (int p = 0; p <= n; ++p) offsets[p] = p * bytes;
  gatherBlocks(ctx, "allreduce", gathered, offsets, elem);
  reduceInRankOrder(out, count, n, type, op,
                    [&](int p) -> const uint8_t* { return gathered + p * bytes; });
}

void allreduceDirect(Context& ctx, const uint8_t* in, uint8_t* out, size_t count, DataType type,
                     ReduceOp op) {
  if (!ctx.fullMesh()) {
    allreduceGathered(ctx, in, out, count, type, op);
    return;
  }
  const int n = ctx.size();
  const int r = ctx.rank();
  const size_t elem = dataTypeSize(type);
  const size_t bytes = count * elem;
  uint8_t* gathered = ctx.workspace().get(0, bytes * n);
  Descriptor mine = describeAllreduce(count, type, op);
  mine.algorithm = kAlgorithmDirect;
  Framing framing(ctx, mine);
  Schedule& schedule = scheduleOf(ctx);
  for (int k = 1; k < n; ++k) framing.send(schedule, (r + k) % n, in, bytes);
  for (int k = 1; k < n; ++k) {
    const int peer = (r - k + n) % n;
    RecvAction copy;
    copy.kind = RecvAction::Kind::kCopy;
    copy.dst = gathered + peer * bytes;
    framing.recv(schedule, peer, bytes, elem, copy);
  }
  transport::run(ctx, schedule, "allreduce");
  framing.check("allreduce");
  if (count == 0) return;
  // This rank's own contribution: the copy packed behind its descriptor when there is one
  // (not `in`, which may be `out`), else a copy into its slot.
  const uint8_t* own = framing.packedCopy(in, bytes);
  if (own == nullptr) {
    std::memcpy(gathered + r * bytes, in, bytes);
    own = gathered + r * bytes;
  }
  reduceInRankOrder(out, count, n, type, op,
                    [&](int p) -> const uint8_t* { return p == r ? own : gathered + p * bytes; });
}

// One part of a ring chunk that lies inside one segment.
struct Piece {
  const uint8_t* in;
  uint8_t* out;
  size_t bytes;
};

// The ring over the concatenation of `segments` (`count` elements in all): chunk boundaries
// are those of one buffer of `count` elements, and a chunk that spans several segments moves
// as one send and one receive per part. With one segment this is the plain ring.
void allreduceRing(Context& ctx, const std::vector<AllreduceSegment>& segments, size_t count,
                   DataType type, ReduceOp op) {
  Descriptor mine = describeAllreduce(count, type, op);
  mine.algorithm = kAlgorithmRing;
  agree(ctx, "allreduce", mine, "");
  const int n = ctx.size();
  const int r = ctx.rank();
  const size_t elem = dataTypeSize(type);
  const int next = (r + 1) % n;
  const int prev = (r - 1 + n) % n;
  auto chunkCount = [&](int c) { return count / n + (static_cast<size_t>(c) < count % n); };
  auto chunkOffset = [&](int c) { return (count / n) * c + std::min<size_t>(c, count % n); };
  auto mod = [n](int x) { return ((x % n) + n) % n; };

  // pieces[c]: the parts of chunk c, in segment order (the same on every rank).
  std::vector<std::vector<Piece>> pieces(n);
  size_t seg = 0;
  size_t segStart = 0;  // element index of segments[seg] in the concatenation
  for (int c = 0; c < n; ++c) {
    size_t at = chunkOffset(c);
    const size_t end = at + chunkCount(c);
    while (at < end) {
      while (segStart + segments[seg].count <= at) segStart += segments[seg++].count;
      const size_t take = std::min(end, segStart + segments[seg].count) - at;
      const size_t skip = (at - segStart) * elem;
      pieces[c].push_back({static_cast<const uint8_t*>(segments[seg].input) + skip,
                           static_cast<uint8_t*>(segments[seg].output) + skip, take * elem});
      at += take;
    }
  }
  const bool large = count * elem >= kStreamingBytes;

  Schedule& schedule = scheduleOf(ctx);
  // The receives of the chunk received last, one per piece: the next step forwards that chunk,
  // piece by piece.
  std::vector<int> lastRecvs;
  std::vector<int> recvs;
  for (int s = 0; s < n - 1; ++s) {
    const auto& sendPieces = pieces[mod(r - s)];
    for (size_t k = 0; k < sendPieces.size(); ++k) {
      const Piece& p = sendPieces[k];
      schedule.send(next, s == 0 ? p.in : p.out, p.bytes, s == 0 ? -1 : lastRecvs[k],
                    /*forwards=*/s > 0);
    }
    recvs.clear();
    for (const Piece& p : pieces[mod(r - s - 1)]) {
      RecvAction reduce;
      reduce.op = op;
      reduce.type = type;
      reduce.dst = p.out;
      if (p.in == p.out) {
        reduce.kind = RecvAction::Kind::kReduceInto;
      } else {
        reduce.kind = RecvAction::Kind::kReduceTo;
        reduce.src = p.in;
      }
      if (op == ReduceOp::kAverage && s == n - 2) reduce.averageDivisor = n;
      // Partial sums of earlier steps are overwritten by the allgather phase: only forwarded.
      reduce.resultNeeded = s == n - 2;
      // The final reduced chunk is forwarded from the ring (progress.cc), so its copy in the
      // output is not read again: stream it when large.
      reduce.streaming = reduce.resultNeeded && large;
      recvs.push_back(schedule.recv(prev, p.bytes, elem, reduce));
    }
    lastRecvs.swap(recvs);
  }
  for (int t = 0; t < n - 1; ++t) {
    const auto& sendPieces = pieces[mod(r + 1 - t)];
    for (size_t k = 0; k < sendPieces.size(); ++k) {
      schedule.send(next, sendPieces[k].out, sendPieces[k].bytes, lastRecvs[k], /*forwards=*/true);
    }
    recvs.clear();
    for (const Piece& p : pieces[mod(r - t)]) {
      RecvAction copy;
      // Chunks received in the allgather phase are final: nobody reads them again during the
      // collective, so large ones bypass the cache.
      copy.kind = RecvAction::Kind::kCopy;
      copy.streaming = large;
      copy.dst = p.out;
      recvs.push_back(schedule.recv(prev, p.bytes, elem, copy));
    }
    lastRecvs.swap(recvs);
  }
  transport::run(ctx, schedule, "allreduce");
}

bool useDirect(const Context& ctx, size_t count, size_t bytes, Algorithm algorithm) {
  return algorithm == Algorithm::kDirect ||
         (algorithm == Algorithm::kAuto &&
          (bytes <= ctx.smallMessageThreshold() || count < static_cast<size_t>(ctx.size())));
}

}  // namespace

// With bad arguments on this rank: throws its error, after telling the peers (if any) so
// that they fail too instead of waiting for it.
void failAllreduce(Context& ctx, size_t count, DataType type, ReduceOp op,
                   const std::string& error) {
  if (ctx.size() > 1) {
    Descriptor mine = describeAllreduce(count, type, op);
    mine.flags = kInvalid;
    agree(ctx, "allreduce", mine, error);
  }
  throw InvalidArgumentError(error);
}

void allreduce(Context& ctx, const void* input, void* output, size_t count, DataType type,
               const AllreduceOptions& options) {
  ctx.checkUsable();
  const std::string invalid = localError([&] {
    validateBuffers("allreduce", input, output, count, type);
    validateAllreduceOp("allreduce", options.op, type);
  });
  if (!invalid.empty()) failAllreduce(ctx, count, type, options.op, invalid);
  if (options.op == ReduceOp::kAdasum) {
    adasumAllreduce(ctx, {{input, output, count}}, count, type);
    return;
  }
  const auto* in = static_cast<const uint8_t*>(input);
  auto* out = static_cast<uint8_t*>(output);
  const size_t bytes = count * dataTypeSize(type);
  if (ctx.size() == 1) {
    if (count > 0 && out != in) std::memcpy(out, in, bytes);
    return;
  }
  if (useDirect(ctx, count, bytes, options.algorithm)) {
    allreduceDirect(ctx, in, out, count, type, options.op);
  } else {
    allreduceRing(ctx, {{input, output, count}}, count, type, options.op);
  }
}

void allreduceSegments(Context& ctx, const std::vector<AllreduceSegment>& segments, DataType type,
                       const AllreduceOptions& options) {
  ctx.checkUsable();
  size_t count = 0;
  const std::string invalid = localError([&] {
    for (const AllreduceSegment& s : segments) {
      validateBuffers("allreduce", s.input, s.output, s.count, type);
      count += s.count;
    }
    validateAllreduceOp("allreduce", options.op, type);
  });
  if (!invalid.empty()) failAllreduce(ctx, count, type, options.op, invalid);
  if (options.op == ReduceOp::kAdasum) {
    // Every segment is its own vector: Adasum of the concatenation would be another result.
    adasumAllreduce(ctx, segments, count, type);
    return;
  }
  const size_t elem = dataTypeSize(type);
  if (segments.empty()) {
    allreduce(ctx, nullptr, nullptr, 0, type, options);  // still agrees with the peers
    return;
  }
  if (segments.size() == 1) {
    allreduce(ctx, segments[0].input, segments[0].output, count, type, options);
    return;
  }
  if (ctx.size() == 1) {
    for (const AllreduceSegment& s : segments) {
      if (s.output != s.input) std::memcpy(s.output, s.input, s.count * elem);
    }
    return;
  }
  if (!useDirect(ctx, count, count * elem, options.algorithm)) {
    allreduceRing(ctx, segments, count, type, options.op);
    return;
  }
  // Small: the direct algorithm wants one buffer, and packing a small one costs little.
  uint8_t* packed = ctx.workspace().get(1, count * elem);
  size_t at = 0;
  for (const AllreduceSegment& s : segments) {
    std::memcpy(packed + at, s.input, s.count * elem);
    at += s.count * elem;
  }
  allreduceDirect(ctx, packed, packed, count, type, options.op);
  at = 0;
  for (const AllreduceSegment& s : segments) {
    std::memcpy(s.output, packed + at, s.count * elem);
    at += s.count * elem;
  }
}

}  // namespace hvd::coll
