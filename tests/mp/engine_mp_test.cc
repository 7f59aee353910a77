// The engine across real processes, launched by the real hvdrun: mixed async ops at np 2 and 4,
// the stall scenario end to end (a warning naming the rank and the tensor, then every rank
// fails and hvdrun exits non-zero in time), and a rank dying under a pending op.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/test_support.h"
#include "tools/local_job.h"

namespace {

using namespace std::chrono_literals;

hvd::test::ProcessResult hvdrun(std::vector<std::string> args, std::chrono::seconds timeout) {
  args.insert(args.begin(), HVDRUN_PATH);
  return hvd::test::runProcess(args, timeout);
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class EngineMixed : public ::testing::TestWithParam<int> {};

TEST_P(EngineMixed, AsyncOpsOfEveryKindAreCorrectAcrossProcesses) {
  const int np = GetParam();
  const auto r = hvdrun(
      {"-np", std::to_string(np), "-x", "HVD_TIMEOUT=30", "--", HVD_ENGINE_WORKER_PATH, "mixed"},
      120s);
  ASSERT_FALSE(r.timedOut) << r.out << r.err;
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(count(r.out, "engine mixed ok=1"), static_cast<size_t>(np)) << r.out << r.err;
  // join() returned the same rank everywhere, and a rank of the job: one of 0..np-1 was
  // printed by all np ranks and no other value by any.
  EXPECT_EQ(count(r.out, "last-joined="), static_cast<size_t>(np)) << r.out;
  int agreed = 0;
  for (int last = 0; last < np; ++last) {
    const size_t n = count(r.out, "last-joined=" + std::to_string(last) + "\n");
    EXPECT_TRUE(n == 0 || n == static_cast<size_t>(np)) << r.out;
    agreed += n == static_cast<size_t>(np) ? 1 : 0;
  }
  EXPECT_EQ(agreed, 1) << r.out;
}

INSTANTIATE_TEST_SUITE_P(Ranks, EngineMixed, ::testing::Values(2, 4));

TEST(EngineStall, MissingRankIsNamedThenEveryRankFailsAndHvdrunExitsNonZeroWithin15s) {
  const auto start = std::chrono::steady_clock::now();
  const auto r = hvdrun({"-np", "3", "-x", "HVD_STALL_CHECK_TIME=1", "-x",
                         "HVD_STALL_SHUTDOWN_TIME=3", "--", HVD_ENGINE_WORKER_PATH, "stall"},
                        60s);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  const std::string all = r.out + r.err;
  ASSERT_FALSE(r.timedOut) << all;
  EXPECT_NE(r.status, 0) << all;
  EXPECT_LT(elapsed, 15s) << all;
  // Both ops may be reported in one warning, in either order, or in two.
  bool warnedW = false, warnedRank2Only = false;
  std::istringstream lines(all);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("stalled ops: ") == std::string::npos) continue;
    warnedW = warnedW || line.find("'w' waits on rank 2") != std::string::npos;
    warnedRank2Only =
        warnedRank2Only || line.find("'rank2.only' waits on ranks 0,1") != std::string::npos;
  }
  EXPECT_TRUE(warnedW) << all;
  EXPECT_TRUE(warnedRank2Only) << all;
  // The first rank to fail ends the job (hvdrun stops the rest, possibly before their output
  // is through): every rank failing is checked without hvdrun below.
  EXPECT_NE(all.find("rank error (timeout): stall:"), std::string::npos) << all;
  EXPECT_EQ(all.find("the stalled op completed"), std::string::npos) << all;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(EngineStall, EveryRankFailsItsPendingOpWithTheStallError) {
  hvd::test::TempDir dir;
  hvd::test::LocalJobSpec spec;
  spec.np = 3;
  spec.argv = {HVD_ENGINE_WORKER_PATH, "stall"};
  spec.env = {{"HVD_STALL_CHECK_TIME", "1"}, {"HVD_STALL_SHUTDOWN_TIME", "3"}};
  spec.outputDir = dir.path();
  hvd::test::LocalJob job(spec);
  job.start();
  ASSERT_TRUE(job.waitAll(30s));
  for (int r = 0; r < 3; ++r) {
    const std::string err = readFile(dir.file("rank" + std::to_string(r) + ".err"));
    EXPECT_EQ(job.exits()[r].status(), 11) << "rank " << r << ":\n" << err;
    EXPECT_NE(err.find("rank error (timeout): stall: ops waited more than 3 s"), std::string::npos)
        << err;
    EXPECT_NE(err.find("'w' waits on rank 2"), std::string::npos) << err;
  }
}

TEST(EngineFailure, ARankDyingFailsThePendingOpInsteadOfHanging) {
  const auto r =
      hvdrun({"-np", "2", "-x", "HVD_TIMEOUT=5", "--", HVD_ENGINE_WORKER_PATH, "die"}, 60s);
  const std::string all = r.out + r.err;
  ASSERT_FALSE(r.timedOut) << all;
  EXPECT_NE(r.status, 0) << all;
  // Rank 0 either saw the engine fail (peer or timeout error) or was stopped by hvdrun when
  // rank 1 failed first; it never completes the op.
  EXPECT_EQ(all.find("rank 0: the stalled op completed"), std::string::npos) << all;
}

TEST(EngineFailure, WithoutALauncherStoppingItThePendingOpFailsWithAPeerError) {
  hvd::test::TempDir dir;
  hvd::test::LocalJobSpec spec;
  spec.np = 2;
  spec.argv = {HVD_ENGINE_WORKER_PATH, "die"};
  spec.env = {{"HVD_TIMEOUT", "5"}};
  spec.outputDir = dir.path();
  hvd::test::LocalJob job(spec);
  const auto start = std::chrono::steady_clock::now();
  job.start();
  ASSERT_TRUE(job.waitAll(30s));
  const std::string err = readFile(dir.file("rank0.err"));
  EXPECT_EQ(job.exits()[1].status(), 3);
  // 10: PeerError (the connection dropped), 11: TimeoutError; never a hang or a success.
  EXPECT_TRUE(job.exits()[0].status() == 10 || job.exits()[0].status() == 11) << err;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 15s);
}

// Every "autotune: after cycle N: ..." line of one rank's log, in order.
std::vector<std::string> tuningChanges(const std::string& log) {
  std::vector<std::string> out;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    const size_t at = line.find("autotune: after cycle ");
    if (at != std::string::npos) out.push_back(line.substr(at));
  }
  return out;
}

TEST(EngineAutotune, HvdrunsAutotuneFlagsTuneEveryRankAlikeWithinTheBudgetAndTheLogParses) {
  constexpr int np = 3;
  hvd::test::TempDir dir;
  const std::string csv = dir.file("autotune.csv");
  const auto r = hvdrun({"-np",
                         std::to_string(np),
                         "--autotune",
                         "--autotune-log-file",
                         csv,
                         "--autotune-warmup-samples",
                         "1",
                         "--autotune-steps-per-sample",
                         "2",
                         "--autotune-bayes-opt-max-samples",
                         "8",
                         "--output-filename",
                         dir.path(),
                         "-x",
                         "HVD_LOG_LEVEL=info",
                         "-x",
                         "HVD_LOG_SUBSYS=engine",
                         "--",
                         HVD_ENGINE_WORKER_PATH,
                         "autotune",
                         "80"},
                        240s);
  ASSERT_FALSE(r.timedOut) << r.out << r.err;
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(count(r.out, "engine autotune ok=1 steps=80"), static_cast<size_t>(np)) << r.out;
  std::vector<std::vector<std::string>> changes;
  for (int rank = 0; rank < np; ++rank) {
    changes.push_back(
        tuningChanges(readFile(dir.file("rank." + std::to_string(rank) + "/stderr"))));
  }
  // Every rank applied the same parameters after the same cycle, change by change.
  ASSERT_GE(changes[0].size(), 2u) << r.err;
  for (int rank = 1; rank < np; ++rank) EXPECT_EQ(changes[rank], changes[0]) << "rank " << rank;
  // The search ended within its budget: 1 warm-up + 8 Bayesian + 2 for the response cache.
  const std::string rank0 = readFile(dir.file("rank.0/stderr"));
  EXPECT_NE(rank0.find("autotune: done after"), std::string::npos) << rank0;
  EXPECT_LE(changes[0].size(), 11u);
  // Horovod's columns: the header, one row per scored sample after the warm-up (at most 10),
  // then the chosen configuration, which is the last one applied.
  std::istringstream rows(readFile(csv));
  std::vector<std::vector<double>> table;
  std::string header;
  std::getline(rows, header);
  EXPECT_EQ(header,
            "hierarchical_allreduce,hierarchical_allgather,torus_allreduce,cache_enabled,"
            "cycle_time_ms,tensor_fusion_threshold,score");
  for (std::string row; std::getline(rows, row);) {
    std::vector<double> fields;
    std::istringstream in(row);
    for (std::string field; std::getline(in, field, ',');) fields.push_back(std::stod(field));
    ASSERT_EQ(fields.size(), 7u) << row;
    EXPECT_GT(fields[6], 0) << row;
    table.push_back(fields);
  }
  ASSERT_GE(table.size(), 2u);
  EXPECT_LE(table.size(), 10u + 1);
  std::ostringstream chosen;
  chosen << "cycle time " << table.back()[4] << " ms, response cache "
         << (table.back()[3] == 1 ? "on" : "off");
  EXPECT_NE(changes[0].back().find(chosen.str()), std::string::npos)
      << changes[0].back() << " vs " << chosen.str();
}

// A rank that sleeps before each step is named once, with its host, in rank 0's log; ranks that
// keep pace, or the check turned off, give no report.
TEST(EngineStragglers, TheRankThatSleepsBeforeEachStepIsNamedOnceInRankZerosLog) {
  const auto slow = hvdrun({"-np", "3", "-x", "HVD_STRAGGLER_WINDOW=32", "--",
                            HVD_ENGINE_WORKER_PATH, "straggler", "40", "16"},
                           120s);
  ASSERT_FALSE(slow.timedOut) << slow.out << slow.err;
  ASSERT_EQ(slow.status, 0) << slow.out << slow.err;
  EXPECT_EQ(count(slow.out, "engine straggler ok=1"), 3u) << slow.out;
  const std::string all = slow.out + slow.err;
  EXPECT_EQ(count(all, "straggler: "), 1u) << all;
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  const size_t at =
      all.find("straggler: rank 2 on " + std::string(host) + " was the last to submit ");
  ASSERT_NE(at, std::string::npos) << all;
  EXPECT_EQ(all.rfind("[0]<stderr>:", at), all.rfind('\n', at) + 1)
      << "reported by rank 0: " << all;

  for (const char* window : {"32", "0"}) {
    const std::string sleep = std::string(window) == "0" ? "40" : "0";
    const auto r = hvdrun({"-np", "3", "-x", std::string("HVD_STRAGGLER_WINDOW=") + window, "--",
                           HVD_ENGINE_WORKER_PATH, "straggler", sleep, "16"},
                          120s);
    ASSERT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_EQ(count(r.out + r.err, "straggler: "), 0u) << window << ": " << r.out << r.err;
  }
}

}  // namespace
