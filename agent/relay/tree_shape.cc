#include "agent/relay/tree_shape.h"

#include <algorithm>

namespace hvd::agent::relay {

std::vector<Branch> splitBranches(size_t count, int width) {
  const size_t w = static_cast<size_t>(std::max(1, width));
  const size_t branches = std::min(count, w);
  std::vector<Branch> out;
  out.reserve(branches);
  size_t first = 0;
  for (size_t b = 0; b < branches; ++b) {
    const size_t size = count / branches + (b < count % branches ? 1 : 0);
    out.push_back({first, size});
    first += size;
  }
  return out;
}

int treeDepth(size_t count, int width) {
  // The first branch is the largest, so it is the deepest.
  const std::vector<Branch> branches = splitBranches(count, width);
  return branches.empty() ? 0 : 1 + treeDepth(branches.front().count - 1, width);
}

}  // namespace hvd::agent::relay
