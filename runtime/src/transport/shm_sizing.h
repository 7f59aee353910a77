// How much shared memory each same-host pair of ranks gets. Every pair on a host has a ring pair
// of its own, so the memory grows with the square of the local ranks: 1 MiB rings at 128 ranks
// on one host are 16 GiB of /dev/shm, and faulting them in at set-up took 30 s. Bulk data moves
// only between ring neighbours (rank +/- 1: the ring and chain algorithms); the other pairs
// carry the direct algorithms' small messages, the collectives' agreement and alltoall, which
// flow control serves from a smaller ring.
#pragma once

#include <cstddef>

namespace hvd::transport {

struct ShmRingSize {
  size_t capacity;  // bytes per direction, a power of two
  bool populate;    // fault the pages in at set-up (else on first use)
};

// The ring of the pair (rank, peer) in a job of `size` ranks with `localPeers` other ranks on
// this host. Ring neighbours get `ringBytes`, populated. The others share `peerBudgetBytes` per
// rank: `ringBytes` while localPeers * ringBytes fits in it, else the largest power of two that
// does (at least 4 KiB), left unpopulated so that only the pages a pair uses cost memory. Both
// ends of a pair compute the same answer.
ShmRingSize shmRingSize(int rank, int peer, int size, int localPeers, size_t ringBytes,
                        size_t peerBudgetBytes);

}  // namespace hvd::transport
