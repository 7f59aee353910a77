// The names of the worker environment that the runtime does not read: what the agents
// (agent/node/worker_env.h) write into every rank's environment for the user's script. The
// variables the runtime reads (the rank's place, the job, its store, every knob) are the table of
// contract/worker_variables.h. One list each, so that writer and reader cannot drift apart;
// docs/architecture.md ("Contracts") gives the meaning of each.
//
// This header depends on nothing, not even the rest of contract/: the runtime, which sits below
// every other module, may include it (through the hvd_contract_env target) without linking
// anything above itself.
#pragma once

namespace hvd::contract::env {

// The GPUs this rank was granted by its node's ledger, comma-separated indices.
inline constexpr const char* kGpu = "HVD_GPU";

// Set only for a job that can restart (--max-restarts): which attempt this is (0 first) and the
// job's budget. Scripts read an absent count as 0.
inline constexpr const char* kRestartCount = "HVD_RESTART_COUNT";
inline constexpr const char* kMaxRestarts = "HVD_MAX_RESTARTS";

// The table's facts under the names other launchers' users already read: torchrun's
// (torch.distributed's env:// init and torchelastic's restart count) and Horovod's (which the
// runtime does not read: it reads the HVD_* names).
namespace torch {
inline constexpr const char* kRank = "RANK";
inline constexpr const char* kWorldSize = "WORLD_SIZE";
inline constexpr const char* kLocalRank = "LOCAL_RANK";
inline constexpr const char* kLocalWorldSize = "LOCAL_WORLD_SIZE";
inline constexpr const char* kGroupRank = "GROUP_RANK";
inline constexpr const char* kMasterAddr = "MASTER_ADDR";
inline constexpr const char* kMasterPort = "MASTER_PORT";
inline constexpr const char* kRestartCount = "TORCHELASTIC_RESTART_COUNT";
inline constexpr const char* kMaxRestarts = "TORCHELASTIC_MAX_RESTARTS";
}  // namespace torch

namespace horovod {
inline constexpr const char* kRank = "HOROVOD_RANK";
inline constexpr const char* kSize = "HOROVOD_SIZE";
inline constexpr const char* kLocalRank = "HOROVOD_LOCAL_RANK";
inline constexpr const char* kLocalSize = "HOROVOD_LOCAL_SIZE";
inline constexpr const char* kCrossRank = "HOROVOD_CROSS_RANK";
inline constexpr const char* kCrossSize = "HOROVOD_CROSS_SIZE";
// The rank's host as the job lists it (-H, the hostfile, the discovery script).
inline constexpr const char* kHostname = "HOROVOD_HOSTNAME";
}  // namespace horovod

}  // namespace hvd::contract::env
