// Process sets below the engine: the table every rank keeps (ids, normalisation, refusals that
// name what is wrong), HVD_PROCESS_SETS, the negotiation naming job ranks and the set, and a
// set's context on its own mesh channel between its members only, beside the job's.
#include "core/process_sets.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <thread>
#include <vector>

#include "collectives/collectives.h"
#include "core/config.h"
#include "engine/controller.h"
#include "engine/mismatch.h"
#include "hvd/error.hpp"
#include "store/memory_store.h"
#include "transport/mesh.h"

namespace hvd {
namespace {

using core::ProcessSetTable;

std::string refusal(const std::function<void()>& body) {
  try {
    body();
  } catch (const InvalidArgumentError& e) {
    return e.what();
  }
  return "(not refused)";
}

TEST(ProcessSetTable, SetsAreSortedRanksWithIdsInOrderThatAreNeverReused) {
  ProcessSetTable table(4);
  EXPECT_EQ(table.ids(), (std::vector<int>{0}));
  EXPECT_EQ(table.ranks(0), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(table.normalize({3, 1}, "t"), (std::vector<int>{1, 3}));
  EXPECT_EQ(table.add({1, 3}, "t"), 1);
  EXPECT_EQ(table.add({0}, "t"), 2);
  EXPECT_EQ(table.find({1, 3}), 1);
  EXPECT_EQ(table.find({0, 1, 2, 3}), 0);
  EXPECT_EQ(table.find({2}), -1);
  EXPECT_EQ(table.describe(1), "process set 1 (ranks 1,3)");
  EXPECT_EQ(table.describe(0), "the global process set");
  EXPECT_TRUE(table.remove(1));
  EXPECT_FALSE(table.remove(1));
  EXPECT_FALSE(table.remove(0));
  EXPECT_EQ(table.add({1, 3}, "t"), 3);  // a removed set's id stays retired
  EXPECT_EQ(table.ids(), (std::vector<int>{0, 2, 3}));
}

TEST(ProcessSetTable, RefusalsNameTheRankTheSetOrTheId) {
  ProcessSetTable table(4);
  table.add({0, 1}, "t");
  EXPECT_EQ(refusal([&] { table.normalize({}, "add_process_set"); }),
            "add_process_set: a process set needs at least one rank");
  EXPECT_EQ(refusal([&] {
              table.normalize({0, 4}, "add_process_set");
            }),
            "add_process_set: rank 4 is not a rank of this job (0..3)");
  EXPECT_EQ(refusal([&] { table.normalize({-1}, "x"); }),
            "x: rank -1 is not a rank of this job (0..3)");
  EXPECT_EQ(refusal([&] {
              table.normalize({2, 1, 2}, "x");
            }),
            "x: rank 2 is given twice in [2,1,2]");
  EXPECT_EQ(refusal([&] {
              table.add({0, 1}, "add_process_set");
            }),
            "add_process_set: a process set with ranks [0,1] exists already: process set 1 "
            "(ranks 0,1)");
  EXPECT_EQ(refusal([&] {
              table.add({0, 1, 2, 3}, "a");
            }),
            "a: a process set with ranks [0,1,2,3] exists already: the global process set");
  EXPECT_EQ(refusal([&] { table.ranks(7); }),
            "there is no process set 7 (it was removed, or never added; sets: 0,1)");
}

TEST(ProcessSetsVariable, ParsesSetsOfRanksAndNamesABadToken) {
  EXPECT_EQ(core::parseProcessSets("0,1;2,3", "V"),
            (std::vector<std::vector<int>>{{0, 1}, {2, 3}}));
  EXPECT_EQ(core::parseProcessSets(" 3 , 1 ;0", "V"), (std::vector<std::vector<int>>{{3, 1}, {0}}));
  EXPECT_EQ(refusal([] { core::parseProcessSets("0,a;1", "V"); }),
            "V='0,a;1': 'a' is not a rank (expected sets of ranks like '0,1;2,3')");
  EXPECT_EQ(refusal([] { core::parseProcessSets("0,,1", "V"); }),
            "V='0,,1': '' is not a rank (expected sets of ranks like '0,1;2,3')");
  EXPECT_EQ(refusal([] { core::parseProcessSets("0;;1", "V"); }),
            "V='0;;1': an empty process set (expected sets of ranks like '0,1;2,3')");
}

TEST(ProcessSetsVariable, ConfigReadsTheSetsAndDynamicModeUnderBothNames) {
  std::map<std::string, std::string> vars{{"HVD_RANK", "0"},
                                          {"HVD_SIZE", "4"},
                                          {"HVD_LOCAL_RANK", "0"},
                                          {"HVD_LOCAL_SIZE", "4"},
                                          {"HVD_CROSS_RANK", "0"},
                                          {"HVD_CROSS_SIZE", "1"},
                                          {"HVD_JOB_ID", "j"},
                                          {"HVD_STORE_ADDR", "127.0.0.1:1"},
                                          {"HVD_STORE_TOKEN", "t"},
                                          {"HVD_PROCESS_SETS", "0,1;2,3"},
                                          {"HOROVOD_DYNAMIC_PROCESS_SETS", "1"}};
  auto reader = [&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
  core::Config c = core::parseConfig(reader);
  EXPECT_EQ(c.processSets, (std::vector<std::vector<int>>{{0, 1}, {2, 3}}));
  EXPECT_TRUE(c.dynamicProcessSets);
  vars["HVD_DYNAMIC_PROCESS_SETS"] = "0";  // the HVD_* name wins
  EXPECT_FALSE(core::parseConfig(reader).dynamicProcessSets);
  vars["HVD_DYNAMIC_PROCESS_SETS"] = "yes";
  EXPECT_NE(refusal([&] { core::parseConfig(reader); }).find("HVD_DYNAMIC_PROCESS_SETS='yes'"),
            std::string::npos);
}

engine::Request allreduce(const std::string& name, Shape shape) {
  engine::Request r;
  r.name = name;
  r.shape = std::move(shape);
  return r;
}

TEST(ProcessSetNegotiation, MessagesNameJobRanksAndTheSet) {
  // A set of job ranks 1 and 3: its engine's ranks 0 and 1.
  const engine::Request a = allreduce("w", {3}), b = allreduce("w", {4});
  EXPECT_EQ(engine::checkAgreement({&a, &b}, {1, 3}),
            "allreduce 'w': shape [3] on rank 1, [4] on rank 3");
  engine::Controller c(0, 2, 8, {1, 3}, "process set 2 (ranks 1,3)");
  engine::BitFlags sent;
  sent.uncached = true;
  c.applyBits(c.makeBits({}, sent));
  c.applyRequests({{a}, {}}, engine::Clock::now());
  ASSERT_EQ(c.waitingOps().size(), 1u);
  EXPECT_EQ(c.waitingOps()[0].missingRanks, (std::vector<int>{3}));
  c.applyRequests({{}, {b}}, engine::Clock::now());
  const auto responses = c.takeResponses();
  ASSERT_EQ(responses.size(), 1u);
  EXPECT_EQ(responses[0].kind, engine::Response::Kind::kError);
  EXPECT_EQ(responses[0].error,
            "allreduce 'w': shape [3] on rank 1, [4] on rank 3 (process set 2 (ranks 1,3))");
}

class SetChannels : public ::testing::TestWithParam<int> {};

TEST_P(SetChannels, SetsGetContextsOfTheirOwnBetweenTheirMembersBesideTheJobs) {
  // 6 ranks on two hosts; sets {1,3,4} and {0,2,5} connect channels of their own while the
  // job's channel 0 runs collectives at once, in a full mesh and beyond it.
  const int n = 6;
  const std::vector<std::vector<int>> sets{{1, 3, 4}, {0, 2, 5}};
  store::MemoryStore store;
  std::vector<std::unique_ptr<transport::Mesh>> meshes(n);
  std::vector<std::unique_ptr<transport::Context>> job(n), mine(n);
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  transport::ContextOptions options;
  options.fullMeshRanks = GetParam();
  options.timeout = std::chrono::seconds(20);
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        transport::MeshConfig config;
        config.rank = r;
        config.size = n;
        config.hostKey = r < 3 ? "host-a" : "host-b";
        config.hostName = r < 3 ? "a" : "b";
        config.shmRingBytes = 64 << 10;
        config.processSets = true;
        config.options = options;
        config.setupTimeout = std::chrono::seconds(20);
        meshes[r] = transport::Mesh::join(store, config);
        job[r] = meshes[r]->connect(0, options, config.setupTimeout);
        const int set = (r == 1 || r == 3 || r == 4) ? 0 : 1;
        std::thread jobWork([&, r] {
          int64_t v = r;
          for (int i = 0; i < 10; ++i) coll::allreduce(*job[r], &v, &v, 1, DataType::kInt64);
        });
        mine[r] = meshes[r]->connectMembers(2 + set, sets[set], options, std::chrono::seconds(20));
        for (int round = 0; round < 5; ++round) {
          const size_t count = round % 2 ? 50000 : 5;
          std::vector<int64_t> data(count, r * 10 + round);
          coll::allreduce(*mine[r], data.data(), data.data(), count, DataType::kInt64);
          int64_t want = 0;
          for (int m : sets[set]) want += m * 10 + round;
          if (data[count - 1] != want) throw std::runtime_error("wrong sum in the set");
        }
        jobWork.join();
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    const int set = (r == 1 || r == 3 || r == 4) ? 0 : 1;
    EXPECT_EQ(mine[r]->size(), 3);
    EXPECT_EQ(mine[r]->rank(), static_cast<int>(std::find(sets[set].begin(), sets[set].end(), r) -
                                                sets[set].begin()));
    // Only links to members, and within the full mesh every one of them.
    EXPECT_LE(mine[r]->openLinkCount(), 2);
    if (GetParam() >= n) {
      EXPECT_EQ(mine[r]->openLinkCount(), 2);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Meshes, SetChannels, ::testing::Values(64, 2),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param == 64 ? std::string("full") : std::string("lazy");
                         });

}  // namespace
}  // namespace hvd
