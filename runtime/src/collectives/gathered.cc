#include "collectives/gathered.h"

#include <algorithm>
#include <cstring>

#include "collectives/validate.h"
#include "transport/progress.h"

namespace hvd::coll {

using transport::RecvAction;
using transport::Schedule;

void gatherBlocks(transport::Context& ctx, const char* opName, uint8_t* out,
                  const std::vector<size_t>& offsets, size_t align) {
  const int n = ctx.size();
  const int r = ctx.rank();
  // The blocks first, first + 1, ..., first + m - 1 (mod n): at most two byte ranges of `out`.
  auto ranges = [&](int first, int m, auto&& each) {
    const int end = first + m;
    if (end <= n) {
      each(offsets[first], offsets[end] - offsets[first]);
    } else {
      each(offsets[first], offsets[n] - offsets[first]);
      each(offsets[0], offsets[end - n] - offsets[0]);
    }
  };
  for (int d = 1; d < n; d *= 2) {
    const int m = std::min(d, n - d);
    const int to = (r - d + n) % n;
    const int from = (r + d) % n;
    Schedule& schedule = scheduleOf(ctx);
    ranges(r, m, [&](size_t at, size_t bytes) {
      if (bytes > 0) schedule.send(to, out + at, bytes);
    });
    ranges(from, m, [&](size_t at, size_t bytes) {
      if (bytes == 0) return;
      RecvAction copy;
      copy.dst = out + at;
      schedule.recv(from, bytes, align, copy);
    });
    transport::run(ctx, schedule, opName);
  }
}

void agreeGathered(transport::Context& ctx, const char* opName, const Descriptor& mine,
                   const std::string& localError) {
  const int n = ctx.size();
  const int r = ctx.rank();
  auto* all = reinterpret_cast<Descriptor*>(ctx.workspace().get(4, n * sizeof(Descriptor)));
  all[r] = mine;
  std::vector<size_t> offsets(n + 1);
  for (int p = 0; p <= n; ++p) offsets[p] = p * sizeof(Descriptor);
  gatherBlocks(ctx, opName, reinterpret_cast<uint8_t*>(all), offsets, sizeof(uint64_t));
  for (int p = 0; p < n; ++p) {
    if (all[p].magic != kDescriptorMagic) {
      // Fixed-size blocks keep the streams in step whatever the ranks called, so this is a
      // peer of another version or a corrupted stream: nothing after it can be trusted.
      const std::string reason = std::string(opName) + ": rank " + std::to_string(p) +
                                 " sent no collective descriptor (mixed hvd versions?)";
      ctx.markBroken(reason);
      throw InternalError(reason);
    }
  }
  checkDescriptors(opName, std::vector<Descriptor>(all, all + n), r, localError);
}

}  // namespace hvd::coll
