// Real processes on one host, over real TCP and shared memory, launched by LocalJob with an
// embedded store: the correctness matrix, injected faults, re-init and bad environments.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/test_support.h"
#include "tools/local_job.h"

namespace hvd {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

std::string workerPath() { return fs::path(HVD_BIN_DIR) / "hvd-test-worker"; }

using test::TempDir;

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct JobResult {
  std::vector<test::RankExit> exits;
  std::vector<std::string> stderrs;
  std::chrono::milliseconds elapsed;
  bool finished;
};

JobResult runJob(int np, std::vector<std::string> args,
                 std::vector<std::pair<std::string, std::string>> env,
                 std::chrono::milliseconds limit, int stoppedRank = -1) {
  TempDir dir;
  test::LocalJobSpec spec;
  spec.np = np;
  spec.argv = {workerPath()};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.env = std::move(env);
  spec.outputDir = dir.path();
  test::LocalJob job(spec);
  const auto start = std::chrono::steady_clock::now();
  job.start();
  JobResult result;
  if (stoppedRank >= 0) {
    // Every rank but the stopped one must finish by itself; then release the stopped one.
    const auto deadline = start + limit;
    result.finished = false;
    while (std::chrono::steady_clock::now() < deadline) {
      job.waitAll(50ms);
      bool othersDone = true;
      for (int r = 0; r < np; ++r)
        othersDone = othersDone && (r == stoppedRank || job.exits()[r].exited);
      if (othersDone) {
        result.finished = true;
        break;
      }
    }
    result.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - start);
    job.signalRank(stoppedRank, SIGKILL);
    job.waitAll(5s);
  } else {
    result.finished = job.waitAll(limit);
    result.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - start);
  }
  result.exits = job.exits();
  for (int r = 0; r < np; ++r) {
    result.stderrs.push_back(readFile(dir.file("rank" + std::to_string(r) + ".err")) +
                             readFile(dir.file("rank" + std::to_string(r) + ".out")));
  }
  return result;
}

std::string describe(const JobResult& result) {
  std::ostringstream out;
  for (size_t r = 0; r < result.exits.size(); ++r) {
    out << "rank " << r << ": status " << result.exits[r].status() << " (exited "
        << result.exits[r].exited << ")\n"
        << result.stderrs[r] << "\n";
  }
  return out.str();
}

struct MatrixParam {
  int np;
  const char* transport;
  int fullMeshRanks = 0;  // HVD_FULL_MESH_RANKS when set: links open on first use beyond it
};

class ProcessMatrix : public ::testing::TestWithParam<MatrixParam> {};

TEST_P(ProcessMatrix, EveryCollectiveIsExactAndIdenticalAcrossProcesses) {
  std::vector<std::pair<std::string, std::string>> env = {{"HVD_TRANSPORT", GetParam().transport},
                                                          {"HVD_TIMEOUT", "60"}};
  if (GetParam().fullMeshRanks > 0) {
    env.emplace_back("HVD_FULL_MESH_RANKS", std::to_string(GetParam().fullMeshRanks));
  }
  const auto result = runJob(GetParam().np, {"matrix", "200"}, env, 240s);
  ASSERT_TRUE(result.finished) << describe(result);
  for (size_t r = 0; r < result.exits.size(); ++r) {
    EXPECT_EQ(result.exits[r].status(), 0) << describe(result);
    EXPECT_NE(result.stderrs[r].find("0 failures"), std::string::npos) << describe(result);
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, ProcessMatrix,
                         ::testing::Values(MatrixParam{1, "auto"}, MatrixParam{2, "auto"},
                                           MatrixParam{3, "auto"}, MatrixParam{4, "auto"},
                                           MatrixParam{5, "auto"}, MatrixParam{7, "auto"},
                                           MatrixParam{2, "tcp"}, MatrixParam{3, "tcp"},
                                           MatrixParam{4, "tcp"}, MatrixParam{6, "auto", 2},
                                           MatrixParam{5, "tcp", 2}),
                         [](const auto& info) {
                           return "np" + std::to_string(info.param.np) + "_" +
                                  info.param.transport +
                                  (info.param.fullMeshRanks > 0 ? "_on_demand" : "");
                         });

class Faults : public ::testing::TestWithParam<const char*> {};

constexpr int kTimeoutSeconds = 4;

std::vector<std::pair<std::string, std::string>> faultEnv(const char* transport) {
  return {{"HVD_TRANSPORT", transport}, {"HVD_TIMEOUT", std::to_string(kTimeoutSeconds)}};
}

TEST_P(Faults, SigkilledRankMakesTheOthersRaiseAPeerErrorWithinTwiceTheTimeout) {
  const auto result =
      runJob(3, {"loop", "100000", "262144", "1", "20", "kill"}, faultEnv(GetParam()), 60s);
  ASSERT_TRUE(result.finished) << describe(result);
  EXPECT_EQ(result.exits[1].signal, SIGKILL) << describe(result);
  for (int r : {0, 2}) {
    EXPECT_EQ(result.exits[r].status(), 10) << describe(result);
    EXPECT_NE(result.stderrs[r].find("peer failure"), std::string::npos) << describe(result);
  }
  EXPECT_LT(result.elapsed, std::chrono::seconds(2 * kTimeoutSeconds + 5)) << describe(result);
}

TEST_P(Faults, StoppedRankMakesTheOthersRaiseATimeoutError) {
  const auto result = runJob(3, {"loop", "100000", "262144", "1", "20", "stop"},
                             faultEnv(GetParam()), 60s, /*stoppedRank=*/1);
  ASSERT_TRUE(result.finished) << describe(result);
  for (int r : {0, 2}) {
    EXPECT_EQ(result.exits[r].status(), 11) << describe(result);
    EXPECT_NE(result.stderrs[r].find("timeout"), std::string::npos) << describe(result);
  }
  EXPECT_GE(result.elapsed, std::chrono::seconds(kTimeoutSeconds)) << describe(result);
  EXPECT_LT(result.elapsed, std::chrono::seconds(2 * kTimeoutSeconds + 5)) << describe(result);
}

TEST_P(Faults, RankThatExitsZeroEarlyStillFailsTheOthers) {
  const auto result =
      runJob(3, {"loop", "100000", "262144", "1", "20", "exit0"}, faultEnv(GetParam()), 60s);
  ASSERT_TRUE(result.finished) << describe(result);
  EXPECT_EQ(result.exits[1].status(), 0) << describe(result);
  for (int r : {0, 2}) {
    EXPECT_EQ(result.exits[r].status(), 10) << describe(result);
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, Faults, ::testing::Values("auto", "tcp"));

TEST(Lifecycle, ShutdownThenInitAgainWorks) {
  const auto result = runJob(3, {"reinit"}, {}, 60s);
  ASSERT_TRUE(result.finished) << describe(result);
  for (const auto& e : result.exits) EXPECT_EQ(e.status(), 0) << describe(result);
}

// Elastic workers shut down and init again at every round: 20 cycles leak nothing.
TEST(Lifecycle, TwentyInitShutdownCyclesLeakNoThreadDescriptorOrSharedMemory) {
  const auto result = runJob(3, {"reinit", "20"}, {}, 120s);
  ASSERT_TRUE(result.finished) << describe(result);
  for (const auto& e : result.exits) EXPECT_EQ(e.status(), 0) << describe(result);
}

TEST(Lifecycle, LoopWithoutFaultsSucceeds) {
  const auto result = runJob(4, {"loop", "30", "100003"}, {}, 60s);
  ASSERT_TRUE(result.finished) << describe(result);
  for (const auto& e : result.exits) EXPECT_EQ(e.status(), 0) << describe(result);
}

TEST(BadEnvironment, MalformedRankVariableIsNamed) {
  const auto result = runJob(2, {"init"}, {{"HVD_RANK", "one"}}, 30s);
  ASSERT_TRUE(result.finished) << describe(result);
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(result.exits[r].status(), 12) << describe(result);
    EXPECT_NE(result.stderrs[r].find("HVD_RANK='one' is not an integer"), std::string::npos)
        << describe(result);
  }
}

TEST(BadEnvironment, WrongStoreTokenIsRefused) {
  const auto result = runJob(2, {"init"}, {{"HVD_STORE_TOKEN", "not-the-token"}}, 30s);
  ASSERT_TRUE(result.finished) << describe(result);
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(result.exits[r].status(), 12) << describe(result);
    EXPECT_NE(result.stderrs[r].find("credentials"), std::string::npos) << describe(result);
  }
}

}  // namespace
}  // namespace hvd
