// Process sets across real processes (np 4, each rank its own process, the job's store from
// LocalJob): sets used at once from several threads with exact values, the refusals, a
// mismatch named with the set, a member dying, and sets added and removed at run time.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "common/test_support.h"
#include "tools/local_job.h"

namespace {

using namespace std::chrono_literals;
using Env = std::vector<std::pair<std::string, std::string>>;

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Outcome {
  std::vector<int> status;
  std::vector<std::string> out, err;
  bool finished = false;
  std::chrono::steady_clock::duration elapsed{};
  std::string all() const {
    std::string text;
    for (size_t r = 0; r < out.size(); ++r) {
      text += "--- rank " + std::to_string(r) + " (status " + std::to_string(status[r]) + ")\n" +
              out[r] + err[r];
    }
    return text;
  }
};

Outcome runJob(const std::string& mode, Env env, std::chrono::seconds timeout) {
  hvd::test::TempDir dir;
  hvd::test::LocalJobSpec spec;
  spec.np = 4;
  spec.argv = {HVD_PROCESS_SETS_WORKER_PATH, mode};
  env.push_back({"HVD_TIMEOUT", "10"});
  spec.env = std::move(env);
  spec.outputDir = dir.path();
  hvd::test::LocalJob job(spec);
  const auto start = std::chrono::steady_clock::now();
  job.start();
  Outcome o;
  o.finished = job.waitAll(timeout);
  o.elapsed = std::chrono::steady_clock::now() - start;
  for (int r = 0; r < spec.np; ++r) {
    o.status.push_back(job.exits()[r].status());
    o.out.push_back(readFile(dir.file("rank" + std::to_string(r) + ".out")));
    o.err.push_back(readFile(dir.file("rank" + std::to_string(r) + ".err")));
  }
  return o;
}

void expectEveryRankOk(const Outcome& o, const std::string& mode) {
  ASSERT_TRUE(o.finished) << o.all();
  for (size_t r = 0; r < o.status.size(); ++r) {
    EXPECT_EQ(o.status[r], 0) << o.all();
    EXPECT_NE(o.out[r].find("process-sets " + mode + " ok=1 rank=" + std::to_string(r)),
              std::string::npos)
        << o.all();
  }
}

TEST(ProcessSetsMp, OverlappingSetsRunEveryOpKindAtOnceFromSeveralThreadsWithExactValues) {
  const Outcome o = runJob("concurrent", {{"HVD_PROCESS_SETS", "0,1;2,3;1,3;0,1,2,3"}}, 120s);
  expectEveryRankOk(o, "concurrent");
}

TEST(ProcessSetsMp, AMismatchInASetNamesTheTensorTheJobRanksAndTheSet) {
  const Outcome o = runJob("mismatch", {{"HVD_PROCESS_SETS", "1,3"}}, 60s);
  expectEveryRankOk(o, "mismatch");
}

TEST(ProcessSetsMp, AMemberDyingFailsItsSetAndTheJobButNotADisjointSet) {
  const Outcome o = runJob("die", {{"HVD_PROCESS_SETS", "0,1;2,3"}}, 60s);
  ASSERT_TRUE(o.finished) << o.all();
  EXPECT_LT(o.elapsed, 40s) << o.all();
  EXPECT_EQ(o.status[3], 3) << o.all();
  // 10: PeerError, 11: TimeoutError; never a success, never a hang.
  for (int r : {0, 1, 2}) {
    EXPECT_TRUE(o.status[r] == 10 || o.status[r] == 11) << "rank " << r << "\n" << o.all();
  }
  // {0,1} kept working after rank 3 died, before the job's op failed.
  EXPECT_NE(o.out[0].find("set-ok=1 rank=0"), std::string::npos) << o.all();
  EXPECT_NE(o.out[1].find("set-ok=1 rank=1"), std::string::npos) << o.all();
}

TEST(ProcessSetsMp, AMemberFirstUsingItsSetLongAfterInitIsWaitedFor) {
  // Longer apart than the start timeout: the sets connected inside init, as in Horovod.
  const Outcome o =
      runJob("late", {{"HVD_PROCESS_SETS", "0,1;2,3"}, {"HVD_START_TIMEOUT", "2"}}, 60s);
  expectEveryRankOk(o, "late");
}

TEST(ProcessSetsMp, DynamicSetsAreAddedAndRemovedWhileOtherSetsAreBusy) {
  const Outcome o = runJob("dynamic", {{"HVD_DYNAMIC_PROCESS_SETS", "1"}}, 120s);
  expectEveryRankOk(o, "dynamic");
}

TEST(ProcessSetsMp, HorovodsDynamicVariableWorksToo) {
  const Outcome o = runJob("dynamic", {{"HOROVOD_DYNAMIC_PROCESS_SETS", "1"}}, 120s);
  expectEveryRankOk(o, "dynamic");
}

TEST(ProcessSetsMp, AddingASetWithoutDynamicModeIsRefusedSayingHow) {
  const Outcome o = runJob("static-add", {}, 60s);
  expectEveryRankOk(o, "static-add");
}

TEST(ProcessSetsMp, RanksGivenDifferentSetsFailAtInitNamingThem) {
  // LocalJob gives every rank the same environment: rank-specific sets come from a wrapper.
  hvd::test::TempDir dir;
  const std::string script = dir.file("differ.sh");
  {
    std::ofstream s(script);
    s << "#!/bin/sh\nif [ \"$HVD_RANK\" = 2 ]; then export HVD_PROCESS_SETS='0,2'; "
         "else export HVD_PROCESS_SETS='0,1'; fi\nexec \"$@\"\n";
  }
  ASSERT_EQ(::chmod(script.c_str(), 0755), 0);
  hvd::test::LocalJobSpec spec;
  spec.np = 4;
  spec.argv = {script, HVD_PROCESS_SETS_WORKER_PATH, "concurrent"};
  spec.outputDir = dir.path();
  hvd::test::LocalJob job(spec);
  job.start();
  ASSERT_TRUE(job.waitAll(60s));
  for (int r = 0; r < 4; ++r) {
    const std::string err = readFile(dir.file("rank" + std::to_string(r) + ".err"));
    EXPECT_EQ(job.exits()[r].status(), 12) << err;
    EXPECT_NE(err.find("every rank must be given the same process sets"), std::string::npos) << err;
    EXPECT_NE(err.find("rank 2 differ"), std::string::npos) << err;
  }
}

}  // namespace
