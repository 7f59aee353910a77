// Alltoall with per-destination counts. Every pair exchanges directly and all exchanges run
// concurrently (the progress engine interleaves the links). Each message is preceded by its
// element count so that a sender and receiver that disagree fail with an error naming both
// counts instead of desynchronising the stream.
#include <cstring>

#include "collectives/collectives.h"
#include "collectives/validate.h"

namespace hvd::coll {

using transport::RecvAction;
using transport::Schedule;

void alltoall(Context& ctx, const void* input, const std::vector<size_t>& sendCounts, void* output,
              const std::vector<size_t>& recvCounts, DataType type) {
  const int n = ctx.size();
  const int r = ctx.rank();
  validateAlltoall(input, sendCounts, output, recvCounts, type, r, n);
  ctx.checkUsable();
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

  // The announced counts live in the workspace so the schedule can send from stable memory.
  auto* announced = reinterpret_cast<uint64_t*>(ctx.workspace().get(2, n * sizeof(uint64_t)));
  Schedule& schedule = scheduleOf(ctx);
  for (int k = 1; k < n; ++k) {
    const int peer = (r + k) % n;
    announced[peer] = sendCounts[peer];
    schedule.send(peer, &announced[peer], sizeof(uint64_t));
    schedule.send(peer, in + sendOffset[peer] * elem, sendCounts[peer] * elem);
  }
  for (int k = 1; k < n; ++k) {
    const int peer = (r - k + n) % n;
    RecvAction check;
    check.kind = RecvAction::Kind::kExpectU64;
    check.expected = recvCounts[peer];
    check.what = "alltoall: element count mismatch";
    check.peer = peer;
    schedule.recv(peer, sizeof(uint64_t), sizeof(uint64_t), check);
    RecvAction copy;
    copy.dst = out + recvOffset[peer] * elem;
    schedule.recv(peer, recvCounts[peer] * elem, elem, copy);
  }
  transport::run(ctx, schedule, "alltoall");
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
