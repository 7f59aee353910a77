// Adasum through the engine across real processes (LocalJob: each rank its own process, the
// job's store embedded): np 2 and 4 run the balanced tree alone, np 3 folds one extra rank in,
// np 8 runs three levels of vector halving. Each job also runs Adasum on a process set (of 3
// and of 6 ranks at np 4 and 8, so the fold runs inside a set too); hvd-adasum-worker says what
// each rank checks.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/test_support.h"
#include "tools/local_job.h"

namespace {

using namespace std::chrono_literals;

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Param {
  int np;
  const char* processSet;  // HVD_PROCESS_SETS: the worker's set 1
};

class AdasumMp : public ::testing::TestWithParam<Param> {};

TEST_P(AdasumMp, EveryRankMatchesTheReferenceTreeAndRefusesWhatAdasumCannotDo) {
  const Param param = GetParam();
  hvd::test::TempDir dir;
  hvd::test::LocalJobSpec spec;
  spec.np = param.np;
  spec.argv = {HVD_ADASUM_WORKER_PATH};
  spec.env = {{"HVD_TIMEOUT", "30"}, {"HVD_PROCESS_SETS", param.processSet}};
  spec.outputDir = dir.path();
  hvd::test::LocalJob job(spec);
  job.start();
  const bool finished = job.waitAll(150s);
  std::string all;
  std::vector<std::string> outs;
  for (int r = 0; r < param.np; ++r) {
    outs.push_back(readFile(dir.file("rank" + std::to_string(r) + ".out")));
    all += "--- rank " + std::to_string(r) + "\n" + outs.back() +
           readFile(dir.file("rank" + std::to_string(r) + ".err"));
  }
  ASSERT_TRUE(finished) << all;
  for (int r = 0; r < param.np; ++r) {
    EXPECT_EQ(job.exits()[r].status(), 0) << all;
    EXPECT_NE(outs[r].find("adasum ok=1 rank=" + std::to_string(r)), std::string::npos) << all;
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, AdasumMp,
                         ::testing::Values(Param{2, "1"}, Param{3, "1,2"}, Param{4, "0,2,3"},
                                           Param{8, "1,2,3,5,6,7"}),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           return "np" + std::to_string(info.param.np);
                         });

// HVD_CPU_BACKEND=mpi: MPI has no Adasum, so the engine runs it over hvd's own transports while
// the other ops go through MPI; the real mpirun starts the ranks (skipped without it).
TEST(AdasumMpi, UnderTheMpiBackendAdasumStillMatchesTheReferenceTree) {
  if (!HVD_TEST_HAVE_MPI || ::system("command -v mpirun > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "no MPI backend or no mpirun";
  }
  hvd::test::TempDir dir;
  hvd::test::ProcessOptions o;
  o.inheritEnv = false;
  // Under AddressSanitizer the ranks' leak check is off, as for scheduler_env_test's mpirun
  // jobs: Open MPI's own allocations, kept past MPI_Finalize by components it unloads, cannot
  // be told from libhvd's; every other test checks libhvd's leaks.
  o.env = {"PATH=/usr/bin:/bin", "HVD_STORE_FILE=" + dir.path().string(), "HVD_CPU_BACKEND=mpi",
           "HVD_TIMEOUT=30", "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1"};
  if (const char* home = std::getenv("HOME")) o.env.push_back(std::string("HOME=") + home);
  o.output = hvd::test::ProcessOptions::Output::kMerged;
  o.stdinDevNull = true;
  const hvd::test::ProcessResult r =
      hvd::test::runProcess({"/usr/bin/env", "mpirun", "--allow-run-as-root", "--oversubscribe",
                             "-np", "3", "-x", "HVD_STORE_FILE", "-x", "HVD_CPU_BACKEND", "-x",
                             "HVD_TIMEOUT", "-x", "ASAN_OPTIONS", HVD_ADASUM_WORKER_PATH},
                            120s, o);
  ASSERT_FALSE(r.timedOut) << r.out;
  EXPECT_EQ(r.status, 0) << r.out;
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_NE(r.out.find("adasum ok=1 rank=" + std::to_string(rank)), std::string::npos) << r.out;
  }
}

}  // namespace
