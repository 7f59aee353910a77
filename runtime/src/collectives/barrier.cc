// Barrier: every rank sends its descriptor (agreement.h) to every other rank and waits for
// theirs. A rank leaves only after it has heard from every rank, which is the barrier, and the
// same round checks that every rank called barrier (and not some other collective). One round
// of n-1 small messages per rank instead of the ceil(log2 n) rounds of a dissemination barrier:
// the descriptors must reach every rank anyway for the check to be exact.
#include "collectives/agreement.h"
#include "collectives/collectives.h"
#include "collectives/validate.h"

namespace hvd::coll {

void barrier(Context& ctx) {
  ctx.checkUsable();
  if (ctx.size() == 1) return;
  agree(ctx, "barrier", describe(CollectiveKind::kBarrier, DataType::kUInt8, 0), "");
}

}  // namespace hvd::coll
