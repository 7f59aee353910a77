#include "contract/slurm_hosts.h"

#include <cstdlib>

#include "contract/slurm_tasks.h"
#include "contract/slurm_text.h"
#include "hvd/error.hpp"

namespace hvd::contract {
namespace {

using slurm_text::allDigits;
using slurm_text::fail;
using slurm_text::kMaxNodes;

// Splits on commas outside brackets.
std::vector<std::string> splitTopLevel(const std::string& text, const std::string& what) {
  std::vector<std::string> parts;
  std::string current;
  int depth = 0;
  for (char c : text) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0 || depth > 1) fail(what, text, "unbalanced or nested brackets");
    if (c == ',' && depth == 0) {
      parts.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  if (depth != 0) fail(what, text, "a '[' without its ']'");
  parts.push_back(current);
  return parts;
}

// "01-04,07" -> {"01","02","03","04","07"}
std::vector<std::string> expandRanges(const std::string& inside, const std::string& token,
                                      const std::string& what) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t comma = inside.find(',', start);
    const std::string range = inside.substr(start, comma - start);
    const size_t dash = range.find('-');
    const std::string lo = range.substr(0, dash);
    const std::string hi = dash == std::string::npos ? lo : range.substr(dash + 1);
    if (!allDigits(lo) || !allDigits(hi) || lo.size() > 9 || hi.size() > 9) {
      fail(what, token, "expected [N], [N-M] or a comma list of them inside brackets");
    }
    const long first = std::atol(lo.c_str());
    const long last = std::atol(hi.c_str());
    if (last < first) fail(what, token, "range " + range + " runs backwards");
    if (static_cast<size_t>(last - first) + out.size() >= kMaxNodes) {
      fail(what, token, "more than " + std::to_string(kMaxNodes) + " hosts");
    }
    for (long n = first; n <= last; ++n) {
      std::string digits = std::to_string(n);
      if (digits.size() < lo.size()) digits.insert(0, lo.size() - digits.size(), '0');
      out.push_back(digits);
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// One top-level token, brackets expanded left to right (a product when there are several).
void expandToken(const std::string& token, const std::string& whole, const std::string& what,
                 std::vector<std::string>* out) {
  const size_t open = token.find('[');
  if (open == std::string::npos) {
    if (token.find(']') != std::string::npos) fail(what, whole, "a ']' without its '['");
    out->push_back(token);
    return;
  }
  const size_t close = token.find(']', open);
  const std::string prefix = token.substr(0, open);
  const std::string rest = token.substr(close + 1);
  for (const std::string& n : expandRanges(token.substr(open + 1, close - open - 1), token, what)) {
    expandToken(prefix + n + rest, whole, what, out);
    if (out->size() > kMaxNodes)
      fail(what, whole, "more than " + std::to_string(kMaxNodes) + " hosts");
  }
}

}  // namespace

std::vector<std::string> expandHostlist(const std::string& hostlist) {
  const std::string what = "SLURM_JOB_NODELIST '" + hostlist + "'";
  if (hostlist.empty()) throw InvalidArgumentError("SLURM_JOB_NODELIST is empty");
  std::vector<std::string> hosts;
  for (const std::string& token : splitTopLevel(hostlist, what)) {
    if (token.empty()) fail(what, hostlist, "an empty host name (two commas in a row?)");
    if (token.front() == '[') fail(what, token, "a host name before '['");
    expandToken(token, token, what, &hosts);
  }
  return hosts;
}

std::optional<std::vector<HostSlots>> slurmAllocationHosts(const EnvReader& getenv) {
  const char* job = getenv("SLURM_JOB_ID");
  if (job == nullptr || *job == '\0') return std::nullopt;
  const char* nodelist = getenv("SLURM_JOB_NODELIST");
  if (nodelist == nullptr) nodelist = getenv("SLURM_NODELIST");
  if (nodelist == nullptr || *nodelist == '\0') {
    throw InvalidArgumentError("SLURM_JOB_ID=" + std::string(job) +
                               " is set but SLURM_JOB_NODELIST is not: give -H or --hostfile");
  }
  const std::vector<std::string> names = expandHostlist(nodelist);
  std::vector<int> slots;
  if (const char* tasks = getenv("SLURM_TASKS_PER_NODE"); tasks != nullptr && *tasks != '\0') {
    slots = expandTasksPerNode(tasks);
    if (slots.size() != names.size()) slots.clear();  // a step's view: leave slots to the GPUs
  }
  std::vector<HostSlots> hosts;
  for (size_t i = 0; i < names.size(); ++i) {
    HostSlots h{names[i], std::nullopt};
    if (!slots.empty()) h.slots = slots[i];
    hosts.push_back(h);
  }
  return hosts;
}

}  // namespace hvd::contract
