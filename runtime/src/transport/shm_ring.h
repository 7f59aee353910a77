// The memory layout shared by the two ends of a same-host link: two single-producer /
// single-consumer byte rings (one per direction) and one "sleeping" flag per end.
//
// Invariants:
//  * tail[d] is written only by the producer of direction d, head[d] only by its consumer; both
//    count bytes since the link was created and never wrap (2^64 bytes is out of reach).
//  * bytes [head, tail) of a ring are valid data; the producer may write [tail, head + capacity).
//  * Each counter sits on its own cache line so producer and consumer never false-share.
//  * sleeping[e] is set by end e just before it blocks in poll(); the other end, after it
//    publishes data or frees space, clears the flag and writes one byte to the wake socket.
//    Both sides place a seq_cst fence between their store and the load of the other side's
//    variable (Dekker), so a wake-up is never lost.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace hvd::transport {

struct alignas(64) PaddedCounter {
  std::atomic<uint64_t> value{0};
  char pad[64 - sizeof(std::atomic<uint64_t>)];
};

struct ShmPairHeader {
  static constexpr uint64_t kMagic = 0x6876642d72696e67ull;  // "hvd-ring"
  uint64_t magic;
  uint64_t capacity;  // bytes per direction, a power of two
  PaddedCounter tail[2];
  PaddedCounter head[2];
  PaddedCounter sleeping[2];
};

static_assert(std::atomic<uint64_t>::is_always_lock_free,
              "cross-process rings need lock-free 64-bit atomics");

// Offset of direction d's data from the start of the region (page aligned).
constexpr size_t kShmDataOffset = 4096;
static_assert(sizeof(ShmPairHeader) <= kShmDataOffset, "header must fit its page");

inline size_t shmRegionBytes(size_t capacity) { return kShmDataOffset + 2 * capacity; }

// Initialises a zeroed region for a pair link.
void initShmPair(void* region, size_t capacity);

}  // namespace hvd::transport
