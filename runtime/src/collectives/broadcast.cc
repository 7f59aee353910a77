// Broadcast from any root.
//
// Small messages: the root sends to every rank directly (one hop). Large messages: a pipelined
// chain root -> root+1 -> ... -> root-1; each rank forwards pieces as they arrive (its send is
// chained to its receive), so the time is about one transfer plus n-1 piece latencies.
// Agreement (agreement.h): every rank sends every other its descriptor, the root's followed by
// the data on the direct path; the chain starts after the descriptors are checked.
#include "collectives/agreement.h"
#include "collectives/collectives.h"
#include "collectives/gathered.h"
#include "collectives/validate.h"

namespace hvd::coll {

using transport::RecvAction;
using transport::Schedule;

void broadcast(Context& ctx, void* buffer, size_t count, DataType type,
               const BroadcastOptions& options) {
  ctx.checkUsable();
  const int n = ctx.size();
  const int r = ctx.rank();
  const std::string invalid = localError([&] {
    validateBuffers("broadcast", buffer, buffer, count, type);
    validateRank("broadcast", "root", options.root, n);
  });
  Descriptor mine = describe(CollectiveKind::kBroadcast, type, count);
  mine.root = options.root;
  if (!invalid.empty()) {
    mine.flags = kInvalid;
    if (n > 1) agree(ctx, "broadcast", mine, invalid);
    throw InvalidArgumentError(invalid);
  }
  const size_t elem = dataTypeSize(type);
  const size_t bytes = count * elem;
  if (n == 1) return;
  auto* data = static_cast<uint8_t*>(buffer);
  const int root = options.root;

  const bool direct =
      options.algorithm == Algorithm::kDirect ||
      (options.algorithm == Algorithm::kAuto && bytes <= ctx.smallMessageThreshold());
  RecvAction copy;
  copy.dst = data;
  if (direct && !ctx.fullMesh()) {
    // The root's block is the only one with bytes: it reaches every rank in ceil(log2 n) rounds.
    mine.algorithm = kAlgorithmDirect;
    agreeGathered(ctx, "broadcast", mine, "");
    std::vector<size_t> offsets(n + 1);
    for (int p = 0; p <= n; ++p) offsets[p] = p > root ? bytes : 0;
    gatherBlocks(ctx, "broadcast", data, offsets, elem);
    return;
  }
  if (direct) {
    mine.algorithm = kAlgorithmDirect;
    Framing framing(ctx, mine);
    Schedule& schedule = scheduleOf(ctx);
    for (int k = 1; k < n; ++k) {
      framing.send(schedule, (r + k) % n, data, r == root ? bytes : 0);
    }
    for (int k = 1; k < n; ++k) {
      const int peer = (r - k + n) % n;
      framing.recv(schedule, peer, peer == root ? bytes : 0, elem, copy);
    }
    transport::run(ctx, schedule, "broadcast");
    framing.check("broadcast", "");
    return;
  }
  mine.algorithm = kAlgorithmRing;
  agree(ctx, "broadcast", mine, "");
  if (count == 0) return;
  Schedule& schedule = scheduleOf(ctx);
  {
    const int position = (r - root + n) % n;
    const int next = (r + 1) % n;
    const int prev = (r - 1 + n) % n;
    if (position == 0) {
      schedule.send(next, data, bytes);
    } else {
      const int received = schedule.recv(prev, bytes, elem, copy);
      if (position < n - 1) schedule.send(next, data, bytes, received, /*forwards=*/true);
    }
  }
  transport::run(ctx, schedule, "broadcast");
}

}  // namespace hvd::coll
