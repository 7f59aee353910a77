#include "transport/shm_sizing.h"

#include <algorithm>

namespace hvd::transport {
namespace {

constexpr size_t kSmallestRing = 4096;

size_t floorPowerOfTwo(size_t value) {
  size_t result = 1;
  while (result <= value / 2) result *= 2;
  return result;
}

}  // namespace

ShmRingSize shmRingSize(int rank, int peer, int size, int localPeers, size_t ringBytes,
                        size_t peerBudgetBytes) {
  const int distance = rank > peer ? rank - peer : peer - rank;
  if (distance == 1 || distance == size - 1) return {ringBytes, true};
  const size_t share = peerBudgetBytes / static_cast<size_t>(std::max(localPeers, 1));
  if (share >= ringBytes) return {ringBytes, true};
  return {std::min(ringBytes, std::max(kSmallestRing, floorPowerOfTwo(share))), false};
}

}  // namespace hvd::transport
