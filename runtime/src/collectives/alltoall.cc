// Alltoall with per-destination counts. Every pair exchanges directly and all exchanges run
// concurrently (the progress engine interleaves the links). Each message is framed by its
// sender's descriptor (agreement.h), which announces the element count, so that a sender and
// receiver that disagree fail with an error naming both counts, on every rank, instead of
// desynchronising the stream.
#include <cstring>

#include "collectives/agreement.h"
#include "collectives/collectives.h"
#include "collectives/gathered.h"
#include "collectives/validate.h"

namespace hvd::coll {

using transport::RecvAction;
using transport::Schedule;

void alltoall(Context& ctx, const void* input, const std::vector<size_t>& sendCounts, void* output,
              const std::vector<size_t>& recvCounts, DataType type) {
  const int n = ctx.size();
  const int r = ctx.rank();
  ctx.checkUsable();
  size_t sendTotal = 0;
  const std::string invalid = localError([&] {
    sendTotal = validateAlltoall(input, sendCounts, output, recvCounts, type, r, n).first;
  });
  Descriptor mine = describe(CollectiveKind::kAlltoall, type, sendTotal);
  mine.algorithm = kAlgorithmDirect;
  if (!invalid.empty()) {
    mine.flags = kInvalid;
    if (n > 1) agree(ctx, "alltoall", mine, invalid);
    throw InvalidArgumentError(invalid);
  }
  for (int p = 0; p < n; ++p) {
    mine.extra += sendCounts[p] * countWeight(r, p);
    mine.extra2 += recvCounts[p] * countWeight(p, r);
  }
  const size_t elem = dataTypeSize(type);
  std::vector<size_t> sendOffset(n + 1, 0), recvOffset(n + 1, 0);
  for (int p = 0; p < n; ++p) {
    sendOffset[p + 1] = sendOffset[p] + sendCounts[p];
    recvOffset[p + 1] = recvOffset[p] + recvCounts[p];
  }
  const auto* in = static_cast<const uint8_t*>(input);
  auto* out = static_cast<uint8_t*>(output);
  if (sendCounts[r] > 0) {
    std::memmove(out + recvOffset[r] * elem, in + sendOffset[r] * elem, sendCounts[r] * elem);
  }
  if (n == 1) return;

  // Beyond the full mesh the descriptors are checked first (the ranks' streams stay in step
  // whatever each called); the exchange itself talks to every peer, as alltoall must.
  if (!ctx.fullMesh()) agreeGathered(ctx, "alltoall", mine, "");
  Framing framing(ctx, mine);
  Schedule& schedule = scheduleOf(ctx);
  for (int k = 1; k < n; ++k) {
    const int peer = (r + k) % n;
    framing.send(schedule, peer, in + sendOffset[peer] * elem, sendCounts[peer] * elem,
                 sendCounts[peer]);
  }
  for (int k = 1; k < n; ++k) {
    const int peer = (r - k + n) % n;
    RecvAction copy;
    copy.dst = out + recvOffset[peer] * elem;
    framing.recv(schedule, peer, recvCounts[peer] * elem, elem, copy);
  }
  transport::run(ctx, schedule, "alltoall");
  framing.check("alltoall", "", &recvCounts);
}

std::vector<size_t> alltoallCounts(Context& ctx, const std::vector<size_t>& sendCounts) {
  const int n = ctx.size();
  validateCountsPerRank("alltoall", "sendCounts", sendCounts, n);
  std::vector<uint64_t> send(sendCounts.begin(), sendCounts.end());
  std::vector<uint64_t> recv(n);
  std::vector<size_t> ones(n, 1);
  alltoall(ctx, send.data(), ones, recv.data(), ones, DataType::kInt64);
  return std::vector<size_t>(recv.begin(), recv.end());
}

}  // namespace hvd::coll
