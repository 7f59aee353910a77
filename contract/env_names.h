// The names of the worker environment: what the agents (agent/node/worker_env.h) write into every
// rank's environment and the runtime's config reader (runtime/src/core/config.cc) reads back.
// One list, so that writer and reader cannot drift apart; docs/architecture.md ("Contracts")
// gives the meaning of each.
//
// This header depends on nothing, not even the rest of contract/: the runtime, which sits below
// every other module, includes it (through the hvd_contract_env target) without linking anything
// above itself.
#pragma once

namespace hvd::contract::env {

// The placement of a rank (contract/placement.h) and the job it belongs to.
inline constexpr const char* kRank = "HVD_RANK";
inline constexpr const char* kSize = "HVD_SIZE";
inline constexpr const char* kLocalRank = "HVD_LOCAL_RANK";
inline constexpr const char* kLocalSize = "HVD_LOCAL_SIZE";
inline constexpr const char* kCrossRank = "HVD_CROSS_RANK";
inline constexpr const char* kCrossSize = "HVD_CROSS_SIZE";
inline constexpr const char* kJobId = "HVD_JOB_ID";

// The job store of this attempt: its address and the attempt's bearer token (a secret: never
// logged, see agent/node/worker_env.h's describeForLog).
inline constexpr const char* kStoreAddr = "HVD_STORE_ADDR";
inline constexpr const char* kStoreToken = "HVD_STORE_TOKEN";

// The GPUs this rank was granted by its node's ledger, comma-separated indices.
inline constexpr const char* kGpu = "HVD_GPU";

// Set only for a job that can restart (--max-restarts): which attempt this is (0 first) and the
// job's budget. Scripts read an absent count as 0.
inline constexpr const char* kRestartCount = "HVD_RESTART_COUNT";
inline constexpr const char* kMaxRestarts = "HVD_MAX_RESTARTS";

// The same facts under the names other launchers' users already read: torchrun's
// (torch.distributed's env:// init and torchelastic's restart count) and Horovod's.
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
}  // namespace horovod

}  // namespace hvd::contract::env
