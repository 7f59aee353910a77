// Allgather with a different count on every rank (zero allowed).
//
// Ring: at step g (0..n-2) rank r sends block (r-g) to r+1 and receives block (r-g-1) from r-1;
// the block forwarded at g+1 is the one received at g, so sends are chained to receives and the
// ring streams. Direct (small totals): every rank sends its block to every other rank.
// Agreement (agreement.h): each rank's count and a checksum of its counts[] travel in its
// descriptor, behind which the direct algorithm sends its block.
#include <cstring>

#include "collectives/agreement.h"
#include "collectives/collectives.h"
#include "collectives/gathered.h"
#include "collectives/validate.h"

namespace hvd::coll {

using transport::RecvAction;
using transport::Schedule;

void allgather(Context& ctx, const void* input, size_t count, void* output,
               const std::vector<size_t>& counts, DataType type, Algorithm algorithm) {
  const int n = ctx.size();
  const int r = ctx.rank();
  ctx.checkUsable();
  size_t total = 0;
  const std::string invalid =
      localError([&] { total = validateAllgather(input, count, output, counts, type, r, n); });
  Descriptor mine = describe(CollectiveKind::kAllgather, type, count);
  mine.extra = countsChecksum(counts);
  if (!invalid.empty()) {
    mine.flags = kInvalid;
    if (n > 1) agree(ctx, "allgather", mine, invalid);
    throw InvalidArgumentError(invalid);
  }
  const size_t elem = dataTypeSize(type);
  std::vector<size_t> offset(n + 1, 0);
  for (int p = 0; p < n; ++p) offset[p + 1] = offset[p] + counts[p];
  auto* out = static_cast<uint8_t*>(output);
  uint8_t* block = out + offset[r] * elem;
  if (count > 0 && block != input) std::memmove(block, input, count * elem);
  if (n == 1) return;

  const bool direct =
      algorithm == Algorithm::kDirect ||
      (algorithm == Algorithm::kAuto && total * elem <= ctx.smallMessageThreshold());
  if (direct && !ctx.fullMesh()) {
    mine.algorithm = kAlgorithmDirect;
    agreeGathered(ctx, "allgather", mine, "");
    std::vector<size_t> bytes(n + 1);
    for (int p = 0; p <= n; ++p) bytes[p] = offset[p] * elem;
    gatherBlocks(ctx, "allgather", out, bytes, elem);
  } else if (direct) {
    mine.algorithm = kAlgorithmDirect;
    Framing framing(ctx, mine);
    Schedule& schedule = scheduleOf(ctx);
    for (int k = 1; k < n; ++k) framing.send(schedule, (r + k) % n, block, count * elem);
    for (int k = 1; k < n; ++k) {
      const int peer = (r - k + n) % n;
      RecvAction copy;
      copy.dst = out + offset[peer] * elem;
      framing.recv(schedule, peer, counts[peer] * elem, elem, copy);
    }
    transport::run(ctx, schedule, "allgather");
    framing.check("allgather", "");
  } else {
    mine.algorithm = kAlgorithmRing;
    agree(ctx, "allgather", mine, "");
    if (total == 0) return;
    Schedule& schedule = scheduleOf(ctx);
    const int next = (r + 1) % n;
    const int prev = (r - 1 + n) % n;
    int lastRecv = -1;
    for (int g = 0; g < n - 1; ++g) {
      const int sendBlock = ((r - g) % n + n) % n;
      const int recvBlock = ((r - g - 1) % n + n) % n;
      schedule.send(next, out + offset[sendBlock] * elem, counts[sendBlock] * elem, lastRecv,
                    /*forwards=*/g > 0);
      RecvAction copy;
      copy.dst = out + offset[recvBlock] * elem;
      lastRecv = schedule.recv(prev, counts[recvBlock] * elem, elem, copy);
    }
    transport::run(ctx, schedule, "allgather");
  }
}

std::vector<size_t> allgatherCounts(Context& ctx, size_t count) {
  std::vector<uint64_t> all(ctx.size());
  const uint64_t mine = count;
  std::vector<size_t> ones(ctx.size(), 1);
  allgather(ctx, &mine, 1, all.data(), ones, DataType::kInt64, Algorithm::kDirect);
  return std::vector<size_t>(all.begin(), all.end());
}

}  // namespace hvd::coll
