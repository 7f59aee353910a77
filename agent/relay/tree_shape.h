// The shape of the relay tree (docs/scale.md "Launch"): the leader calls at most `width` hosts
// itself, and each of those relays to the hosts of its branch the same way, as Slurm's daemons
// forward a message over TreeWidth children. The hosts of a call are split into at most `width`
// contiguous branches of near-equal size; a branch's first host is the child that is called, the
// others its subtree, which it splits again. Contiguous branches keep -H order: a child always
// comes before its subtree, so the first failing host in -H order is still the one reported.
#pragma once

#include <cstddef>
#include <vector>

namespace hvd::agent::relay {

// Up to this many hosts the leader calls every host itself (a star). 64 agents answered a star
// of Describe, Reserve and Launch within ~0.9 s on the 2-core machine (bench/scale.sh); a wider
// star costs the leader one stream-reading thread and one channel per host.
inline constexpr int kDefaultTreeWidth = 64;

// Hosts [first, first + count) of the list being split.
struct Branch {
  size_t first = 0;
  size_t count = 0;

  bool operator==(const Branch& o) const { return first == o.first && count == o.count; }
};

// Splits `count` hosts into min(count, width) branches; sizes differ by at most one, the larger
// ones first. width < 1 counts as 1.
std::vector<Branch> splitBranches(size_t count, int width);

// Hops from the caller to the deepest of `count` hosts: 0 for none, 1 when count <= width.
int treeDepth(size_t count, int width);

}  // namespace hvd::agent::relay
