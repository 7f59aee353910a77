// The environment of one worker process: the contract of docs/architecture.md ("Worker
// environment") plus the aliases torch.distributed (env://) and Horovod scripts read, plus
// GPU binding. Pure logic, so the numbers users' scripts depend on are pinned down by
// unit tests; the agent passes the result as the child's complete environment (never a shell
// string).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "contract/placement.h"

namespace hvd::agent::node {

// How a rank's GPU is made known to it.
enum class GpuBind {
  // HVD_GPU only; CUDA_VISIBLE_DEVICES stays as forwarded, so scripts that call
  // set_device(local_rank) keep seeing every GPU and keep working (the default).
  kNone,
  // Also CUDA_VISIBLE_DEVICES=<the rank's GPUs> (`--gpu-bind=visible`): inside the worker its
  // first GPU is then CUDA device 0.
  kVisible,
};

struct WorkerEnvInput {
  // "NAME=value" entries forwarded from the user (hvdrun -x, or the client's environment), in
  // order. A name given twice keeps its last value at its first position.
  std::vector<std::string> forwarded;

  contract::RankPlacement placement;  // this rank
  int size = 0;                       // world size
  int groupRank = -1;                 // GROUP_RANK: see groupRankOfHost(); must be set
  std::string hostName;               // as the job lists it: for messages and HOROVOD_HOSTNAME

  std::string jobId;
  std::string storeAddr;   // "host:port" of the job's rendezvous store
  std::string storeToken;  // job-scoped store credential; reaches the worker only through env
  std::string masterAddr;  // torch env:// rendezvous: rank 0's host ...
  int masterPort = 0;      // ... and a port its agent reserved there

  // NVML indices of this host's GPUs, in order (empty: a CPU-only host, no HVD_GPU is set).
  std::vector<int> hostGpus;
  // (index, count) of this rank among the ranks that share hostGpus, when those are not the
  // host's ranks (an elastic round's new workers share their own grant); unset: (local rank,
  // local size).
  std::optional<std::pair<int, int>> gpuSlot;
  int gpusPerRank = 1;
  GpuBind gpuBind = GpuBind::kNone;
  // Lets more GPU ranks than GPUs share them round-robin (hvdrun --oversubscribe).
  bool oversubscribe = false;

  // Restarts so far (HVD_RESTART_COUNT, torchrun's TORCHELASTIC_RESTART_COUNT): a rank of a
  // restarted job reloads its checkpoint when this is above 0. Set only for a job that may
  // restart (maxRestarts > 0) or has.
  int restartCount = 0;
  int maxRestarts = 0;  // TORCHELASTIC_MAX_RESTARTS

  // Elastic mode (contract/elastic.h): the round the worker is started for (storeToken is that
  // round's), its id, and how long it waits for each later round's place.
  struct Elastic {
    int round = 0;
    int worker = 0;
    std::chrono::milliseconds timeout{600000};
  };
  std::optional<Elastic> elastic;
};

// The node index torch calls GROUP_RANK: the position of `hostIndex` among the hosts that got at
// least one rank (equal to the cross rank of that host's local rank 0). Throws
// hvd::InvalidArgumentError when the host is out of range or has no ranks.
int groupRankOfHost(const contract::Placement& placement, int hostIndex);

// The GPUs (NVML indices) of the rank with `localRank` among `localSize` ranks on a host with
// `hostGpus`: `gpusPerRank` consecutive GPUs in local-rank order. Empty when the host has no
// GPUs. Throws hvd::InvalidArgumentError when the host's ranks need more GPUs than it has and
// `oversubscribe` is false (the message names the host, the GPUs available and the ranks
// requested), or when gpusPerRank < 1 or exceeds the host's GPUs.
std::vector<int> assignGpus(const std::string& hostName, const std::vector<int>& hostGpus,
                            int localRank, int localSize, int gpusPerRank, bool oversubscribe);

// The complete environment of one rank as "NAME=value" entries, each name once: the forwarded
// entries first (minus those hvd sets), then HVD_*, the torch aliases, HOROVOD_* and the GPU
// variables. When GPUs are bound and the user forwarded no CUDA_DEVICE_ORDER, it is set to
// PCI_BUS_ID: CUDA's default order is fastest-first, NVML's is PCI order, and only with both in
// PCI order does HVD_GPU (and CUDA_VISIBLE_DEVICES) name the GPU NVML described. Variables hvd sets
// override forwarded ones, because a stale RANK forwarded from the user's shell must never reach a
// worker. Throws hvd::InvalidArgumentError for a forwarded entry without '=' or with an empty name,
// an inconsistent placement, an unset groupRank, a missing job id or store address, a master port
// outside 1..65535, or a GPU shortage (see assignGpus).
std::vector<std::string> buildWorkerEnvironment(const WorkerEnvInput& input);

// The checks of buildWorkerEnvironment without building anything: what the leader runs for each
// rank before the launch goes out, so that a job it cannot start fails as an invalid job there,
// while each agent builds its own ranks' environments (coordinator/rank_environments.h).
void checkWorkerEnvironment(const WorkerEnvInput& input);

// One line for logs: the entries separated by spaces, with the value of HVD_STORE_TOKEN and of
// every variable whose name says it is a secret (contract::isSecretEnvName) replaced by
// <redacted>.
// Use this, never the raw list, whenever an environment is logged.
std::string describeForLog(const std::vector<std::string>& env);

}  // namespace hvd::agent::node
