#include "contract/slurm_tasks.h"

#include <cstdlib>

#include "contract/slurm_text.h"
#include "hvd/error.hpp"

namespace hvd::contract {
namespace {

using slurm_text::allDigits;
using slurm_text::fail;
using slurm_text::kMaxNodes;

}  // namespace

std::vector<int> expandTasksPerNode(const std::string& tasks, const std::string& name) {
  const std::string what = name + " '" + tasks + "'";
  std::vector<int> counts;
  size_t start = 0;
  for (;;) {
    const size_t comma = tasks.find(',', start);
    const std::string entry = tasks.substr(start, comma - start);
    std::string count = entry;
    std::string repeat = "1";
    if (const size_t paren = entry.find("(x"); paren != std::string::npos) {
      if (entry.back() != ')') fail(what, entry, "expected N or N(xR)");
      count = entry.substr(0, paren);
      repeat = entry.substr(paren + 2, entry.size() - paren - 3);
    }
    if (!allDigits(count) || !allDigits(repeat) || count.size() > 7 || repeat.size() > 7) {
      fail(what, entry, "expected N or N(xR) with whole numbers");
    }
    const int n = std::atoi(count.c_str());
    const int r = std::atoi(repeat.c_str());
    if (n < 1 || r < 1) fail(what, entry, "counts and repeats start at 1");
    if (counts.size() + static_cast<size_t>(r) > kMaxNodes) fail(what, entry, "too many nodes");
    counts.insert(counts.end(), static_cast<size_t>(r), n);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return counts;
}

}  // namespace hvd::contract
