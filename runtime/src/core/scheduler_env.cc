#include "core/scheduler_env.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "contract/slurm_tasks.h"
#include "hvd/error.hpp"

namespace hvd::core {
namespace {

bool allDigits(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

// A required non-negative integer variable of `source`, at most `max`.
int integer(const contract::EnvReader& getenv, const char* name, const std::string& source,
            long long max) {
  const char* value = getenv(name);
  if (value == nullptr || *value == '\0') {
    throw InvalidArgumentError(std::string(name) + " is not set, but " + source +
                               " variables are: cannot tell this worker's place");
  }
  const std::string text = value;
  if (!allDigits(text) || text.size() > 9 || std::atoll(text.c_str()) > max) {
    throw InvalidArgumentError(std::string(name) + "='" + text + "' is not an integer in 0.." +
                               std::to_string(max));
  }
  return std::atoi(text.c_str());
}

std::string text(const contract::EnvReader& getenv, const char* name) {
  const char* value = getenv(name);
  return value != nullptr ? value : "";
}

SchedulerPlacement fromOpenMpi(const contract::EnvReader& getenv) {
  SchedulerPlacement p;
  p.source = "mpirun";
  p.size = integer(getenv, "OMPI_COMM_WORLD_SIZE", p.source, 1 << 20);
  if (p.size < 1) throw InvalidArgumentError("OMPI_COMM_WORLD_SIZE=0");
  p.rank = integer(getenv, "OMPI_COMM_WORLD_RANK", p.source, p.size - 1);
  p.localSize = integer(getenv, "OMPI_COMM_WORLD_LOCAL_SIZE", p.source, p.size);
  if (p.localSize < 1) throw InvalidArgumentError("OMPI_COMM_WORLD_LOCAL_SIZE=0");
  p.localRank = integer(getenv, "OMPI_COMM_WORLD_LOCAL_RANK", p.source, p.localSize - 1);
  std::string job = text(getenv, "OMPI_MCA_ess_base_jobid");
  if (job.empty()) job = text(getenv, "PMIX_NAMESPACE");
  p.jobId = "ompi-" + (job.empty() ? std::string("job") : job);
  return p;
}

SchedulerPlacement fromSlurm(const contract::EnvReader& getenv) {
  SchedulerPlacement p;
  p.source = "srun";
  const char* ntasks = getenv("SLURM_NTASKS") != nullptr ? "SLURM_NTASKS" : "SLURM_NPROCS";
  p.size = integer(getenv, ntasks, p.source, 1 << 20);
  if (p.size < 1) throw InvalidArgumentError(std::string(ntasks) + "=0");
  p.rank = integer(getenv, "SLURM_PROCID", p.source, p.size - 1);
  p.localRank = integer(getenv, "SLURM_LOCALID", p.source, p.size - 1);
  const char* countsName = getenv("SLURM_STEP_TASKS_PER_NODE") != nullptr
                               ? "SLURM_STEP_TASKS_PER_NODE"
                               : "SLURM_TASKS_PER_NODE";
  const std::string countsText = text(getenv, countsName);
  if (countsText.empty()) {
    throw InvalidArgumentError(
        "SLURM_PROCID is set but neither SLURM_STEP_TASKS_PER_NODE nor SLURM_TASKS_PER_NODE is: "
        "cannot tell how many tasks share this node");
  }
  const std::vector<int> counts = contract::expandTasksPerNode(countsText, countsName);
  const int node =
      integer(getenv, "SLURM_NODEID", p.source, static_cast<long long>(counts.size()) - 1);
  p.localSize = counts[node];
  long long total = 0;
  for (int c : counts) total += c;
  if (total != p.size || p.localRank >= p.localSize) {
    throw InvalidArgumentError(std::string(countsName) + "='" + countsText + "' does not match " +
                               ntasks + "=" + std::to_string(p.size) +
                               " and SLURM_LOCALID=" + std::to_string(p.localRank));
  }
  const auto [crossRank, crossSize] = crossPlacement(counts, node, p.localRank);
  p.crossRank = crossRank;
  p.crossSize = crossSize;
  const std::string job = text(getenv, "SLURM_JOB_ID");
  const std::string step = text(getenv, "SLURM_STEP_ID");
  p.jobId = "slurm-" + (job.empty() ? std::string("job") : job) + "." + (step.empty() ? "0" : step);
  return p;
}

}  // namespace

std::pair<int, int> crossPlacement(const std::vector<int>& tasksPerNode, int node, int localRank) {
  int crossRank = 0;
  int crossSize = 0;
  for (size_t n = 0; n < tasksPerNode.size(); ++n) {
    if (tasksPerNode[n] <= localRank) continue;
    if (static_cast<int>(n) < node) ++crossRank;
    ++crossSize;
  }
  return {crossRank, crossSize};
}

std::pair<int, int> crossFromHostKeys(const std::vector<std::string>& hostKeys, int rank,
                                      int localRank, int localSize) {
  std::vector<std::string> nodes;  // host keys in the order of their lowest rank
  std::vector<int> tasksPerNode;
  int node = -1;
  for (int r = 0; r < static_cast<int>(hostKeys.size()); ++r) {
    auto it = std::find(nodes.begin(), nodes.end(), hostKeys[r]);
    if (it == nodes.end()) {
      nodes.push_back(hostKeys[r]);
      tasksPerNode.push_back(0);
      it = nodes.end() - 1;
    }
    const int n = static_cast<int>(it - nodes.begin());
    if (r == rank) node = n;
    ++tasksPerNode[n];
  }
  if (node < 0) throw InvalidArgumentError("rank " + std::to_string(rank) + " is not in the job");
  if (tasksPerNode[node] != localSize) {
    throw InvalidArgumentError("this host runs " + std::to_string(tasksPerNode[node]) +
                               " ranks of the job but the launcher's local size is " +
                               std::to_string(localSize));
  }
  return crossPlacement(tasksPerNode, node, localRank);
}

std::optional<SchedulerPlacement> placementFromScheduler(const contract::EnvReader& getenv) {
  // mpirun first: an mpirun inside a Slurm allocation leaves SLURM_* of the allocation around.
  if (getenv("OMPI_COMM_WORLD_RANK") != nullptr) return fromOpenMpi(getenv);
  if (getenv("SLURM_PROCID") != nullptr) return fromSlurm(getenv);
  return std::nullopt;
}

}  // namespace hvd::core
