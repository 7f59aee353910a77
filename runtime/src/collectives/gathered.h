// The collectives of a context beyond ContextOptions::fullMeshRanks, where no rank talks to
// every other. Every collective starts with agreeGathered: each rank's descriptor reaches every
// rank through gatherBlocks, and every rank runs the checks of agreement.h on the same n
// descriptors, so a mismatch is the same error everywhere and nothing but fixed-size
// descriptors has moved when it is thrown. The small (direct) allreduce, allgather and
// broadcast then move their data through gatherBlocks too; the ring and chain algorithms, and
// alltoall, run as they do in a full mesh.
//
// gatherBlocks is Bruck et al.'s allgather ("Efficient algorithms for all-to-all
// communications in multiport message-passing systems", 1997): in round k = 0, 1, ... with
// d = 2^k < n, rank r sends the m = min(d, n - d) blocks r, r+1, ..., r+m-1 (mod n) it holds to
// rank r - d and receives blocks r+d, ..., r+d+m-1 from rank r + d; after ceil(log2 n) rounds
// it holds all n. Each rank touches 2 ceil(log2 n) peers and sends each block once per round
// it holds it in: (n - 1) blocks in all, the minimum.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "collectives/agreement.h"
#include "transport/context.h"

namespace hvd::coll {

// Every rank's block to every rank: block p is the bytes [offsets[p], offsets[p + 1]) of `out`
// (offsets has n + 1 entries, the same on every rank); this rank's own block must be in place.
// `align` is the element size the receives keep pieces aligned to.
void gatherBlocks(transport::Context& ctx, const char* opName, uint8_t* out,
                  const std::vector<size_t>& offsets, size_t align);

// agree() beyond the full mesh: throws what Framing::check would, on every rank alike.
void agreeGathered(transport::Context& ctx, const char* opName, const Descriptor& mine,
                   const std::string& localError);

}  // namespace hvd::coll
