// Broadcast from any root.
//
// Small messages: the root sends to every rank directly (one hop). Large messages: a pipelined
// chain root -> root+1 -> ... -> root-1; each rank forwards pieces as they arrive (its send is
// chained to its receive), so the time is about one transfer plus n-1 piece latencies.
#include "collectives/collectives.h"
#include "collectives/validate.h"

namespace hvd::coll {

using transport::RecvAction;
using transport::Schedule;

void broadcast(Context& ctx, void* buffer, size_t count, DataType type,
               const BroadcastOptions& options) {
  validateBuffers("broadcast", buffer, buffer, count, type);
  validateRank("broadcast", "root", options.root, ctx.size());
  ctx.checkUsable();
  const int n = ctx.size();
  const int r = ctx.rank();
  const size_t elem = dataTypeSize(type);
  const size_t bytes = count * elem;
  if (n == 1 || count == 0) return;
  auto* data = static_cast<uint8_t*>(buffer);
  const int root = options.root;

  Schedule& schedule = scheduleOf(ctx);
  const bool direct =
      options.algorithm == Algorithm::kDirect ||
      (options.algorithm == Algorithm::kAuto && bytes <= ctx.smallMessageThreshold());
  RecvAction copy;
  copy.dst = data;
  if (direct) {
    if (r == root) {
      for (int k = 1; k < n; ++k) schedule.send((root + k) % n, data, bytes);
    } else {
      schedule.recv(root, bytes, elem, copy);
    }
  } else {
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
