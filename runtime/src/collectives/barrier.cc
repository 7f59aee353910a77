// Barrier: the dissemination algorithm. In round k (distance 2^k < n) rank r signals r + 2^k
// and waits for r - 2^k; a signal is only sent after the previous round's signal arrived, so
// after ceil(log2 n) rounds every rank has transitively heard from every other rank.
#include "collectives/collectives.h"
#include "collectives/validate.h"

namespace hvd::coll {

using transport::RecvAction;
using transport::Schedule;

void barrier(Context& ctx) {
  ctx.checkUsable();
  const int n = ctx.size();
  const int r = ctx.rank();
  if (n == 1) return;
  static const uint8_t kToken = 1;
  Schedule& schedule = scheduleOf(ctx);
  RecvAction discard;
  discard.kind = RecvAction::Kind::kDiscard;
  int lastRecv = -1;
  for (int distance = 1; distance < n; distance *= 2) {
    schedule.send((r + distance) % n, &kToken, 1, lastRecv);
    lastRecv = schedule.recv((r - distance + n) % n, 1, 1, discard);
  }
  transport::run(ctx, schedule, "barrier");
}

}  // namespace hvd::coll
