// The worker environment end to end inside one process: what the agent writes for a rank
// (agent/node/worker_env.h) is what the runtime reads back (runtime/src/core/config.h), for every
// rank of a placement. Every HVD_ and HOROVOD_ variable the writer emits is either read by the
// runtime's parser or listed below with the reader it is for, so the two cannot drift apart
// unnoticed.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "agent/node/worker_env.h"
#include "common/test_support.h"
#include "contract/placement.h"
#include "core/config.h"

namespace hvd {
namespace {

using agent::node::buildWorkerEnvironment;
using agent::node::groupRankOfHost;
using agent::node::WorkerEnvInput;

// Written for the user's script or another layer, not for hvd::core::parseConfig.
const std::set<std::string> kNotForTheParser = {
    "HVD_GPU",            // the GPUs this rank was granted: for scripts (hvd.torch reads
                          // local_rank, as Horovod's do); CUDA_VISIBLE_DEVICES with --gpu-bind
    "HVD_RESTART_COUNT",  // for scripts that reload a checkpoint (and TORCHELASTIC_*)
    "HVD_MAX_RESTARTS",   // the same
    // What horovodrun sets, for scripts that read them (the runtime reads the HVD_ names).
    "HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE",
    "HOROVOD_CROSS_RANK", "HOROVOD_CROSS_SIZE",
    "HOROVOD_HOSTNAME",  // the host as the job lists it
    "HOROVOD_ELASTIC",   // HVD_ELASTIC's alias, for scripts that test it
};

TEST(WorkerEnvRoundTrip, WhatTheAgentWritesIsWhatTheRuntimeReadsForEveryRank) {
  // Hosts of 3, 1 and 2 slots: uneven local sizes, a host whose only rank is local rank 0.
  const contract::Placement placement =
      contract::placeRanks({{"a", 3}, {"b", 1}, {"c", 2}}, 6, false);
  std::set<std::string> readByTheParser;
  std::set<std::string> written;
  for (int rank = 0; rank < 6; ++rank) {
    WorkerEnvInput in;
    in.placement = placement.ranks.at(rank);
    in.size = 6;
    in.groupRank = groupRankOfHost(placement, in.placement.hostIndex);
    in.hostName = "host" + std::to_string(in.placement.hostIndex);
    in.jobId = "job-7";
    in.storeAddr = "[fd00::1]:29400";
    in.storeToken = "token-of-the-attempt";
    in.masterAddr = "fd00::1";
    in.masterPort = 29500;
    in.hostGpus = {0, 1, 2};
    in.restartCount = 1;
    in.maxRestarts = 3;
    in.elastic = WorkerEnvInput::Elastic{4, 10 + rank, std::chrono::milliseconds(90500)};
    // Engine knobs a user forwards with -x, under both names.
    in.forwarded = {"HVD_TIMEOUT=30", "HOROVOD_FUSION_THRESHOLD=1048576", "HVD_CYCLE_TIME=2.5",
                    "HOROVOD_STALL_CHECK_TIME_SECONDS=7"};
    const std::vector<std::string> env = buildWorkerEnvironment(in);
    const std::map<std::string, std::string> values = test::environmentMap(env);
    for (const auto& [name, value] : values) written.insert(name);

    const core::Config c = core::parseConfig([&](const char* name) -> const char* {
      readByTheParser.insert(name);
      auto it = values.find(name);
      return it == values.end() ? nullptr : it->second.c_str();
    });
    SCOPED_TRACE("rank " + std::to_string(rank));
    const contract::RankPlacement& p = placement.ranks.at(rank);
    EXPECT_EQ(c.rank, rank);
    EXPECT_EQ(c.size, 6);
    EXPECT_EQ(c.localRank, p.localRank);
    EXPECT_EQ(c.localSize, p.localSize);
    EXPECT_EQ(c.crossRank, p.crossRank);
    EXPECT_EQ(c.crossSize, p.crossSize);
    EXPECT_EQ(c.jobId, "job-7");
    EXPECT_EQ(c.storeAddress, "[fd00::1]:29400");
    EXPECT_EQ(c.storeToken, "token-of-the-attempt");
    EXPECT_EQ(c.placementSource, "hvd");
    EXPECT_EQ(c.timeout, std::chrono::milliseconds(30000));
    EXPECT_EQ(c.fusionThreshold, size_t{1} << 20);
    EXPECT_EQ(c.cycleTime, std::chrono::microseconds(2500));
    EXPECT_EQ(c.stallCheckTime, std::chrono::milliseconds(7000));
    EXPECT_TRUE(c.elastic);
    EXPECT_EQ(c.elasticRound, 4);
    EXPECT_EQ(c.workerId, 10 + rank);
    EXPECT_EQ(c.elasticTimeout, std::chrono::milliseconds(90500));
    EXPECT_EQ(values.at("HOROVOD_HOSTNAME"), in.hostName);
  }
  // Every hvd variable written is read by the parser, or is for another reader (listed above).
  std::vector<std::string> unread;
  for (const std::string& name : written) {
    const bool hvdName = name.rfind("HVD_", 0) == 0 || name.rfind("HOROVOD_", 0) == 0;
    if (hvdName && readByTheParser.count(name) == 0 && kNotForTheParser.count(name) == 0) {
      unread.push_back(name);
    }
  }
  EXPECT_TRUE(unread.empty()) << "written by the agent, read by nobody listed: "
                              << ::testing::PrintToString(unread);
  // And the list above holds only names the writer writes.
  for (const std::string& name : kNotForTheParser) {
    EXPECT_EQ(written.count(name), 1u) << name << " is listed but not written";
  }
}

}  // namespace
}  // namespace hvd
