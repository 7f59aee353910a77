// The worker environment contract: parsing, defaults, and errors that name the variable.
#include "core/config.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "core/scheduler_env.h"
#include "hvd/error.hpp"

namespace hvd::core {
namespace {

class FakeEnv {
 public:
  FakeEnv() {
    vars_ = {{"HVD_RANK", "2"},
             {"HVD_SIZE", "4"},
             {"HVD_LOCAL_RANK", "0"},
             {"HVD_LOCAL_SIZE", "2"},
             {"HVD_CROSS_RANK", "1"},
             {"HVD_CROSS_SIZE", "2"},
             {"HVD_JOB_ID", "job-1"},
             {"HVD_STORE_ADDR", "10.0.0.1:4000"},
             {"HVD_STORE_TOKEN", "secret"}};
  }
  FakeEnv& set(const std::string& k, const std::string& v) {
    vars_[k] = v;
    return *this;
  }
  FakeEnv& unset(const std::string& k) {
    vars_.erase(k);
    return *this;
  }
  EnvReader reader() const {
    return [this](const char* name) -> const char* {
      auto it = vars_.find(name);
      return it == vars_.end() ? nullptr : it->second.c_str();
    };
  }

 private:
  std::map<std::string, std::string> vars_;
};

std::string errorOf(const FakeEnv& env) {
  try {
    parseConfig(env.reader());
  } catch (const InvalidArgumentError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Config, ParsesTheWorkerEnvironmentContract) {
  FakeEnv env;
  const Config c = parseConfig(env.reader());
  EXPECT_EQ(c.rank, 2);
  EXPECT_EQ(c.size, 4);
  EXPECT_EQ(c.localRank, 0);
  EXPECT_EQ(c.localSize, 2);
  EXPECT_EQ(c.crossRank, 1);
  EXPECT_EQ(c.crossSize, 2);
  EXPECT_EQ(c.jobId, "job-1");
  EXPECT_EQ(c.storeAddress, "10.0.0.1:4000");
  EXPECT_EQ(c.storeToken, "secret");
  EXPECT_EQ(c.timeout, std::chrono::seconds(60));
  EXPECT_EQ(c.transport, TransportChoice::kAuto);
}

TEST(Config, KnobsOverrideDefaults) {
  FakeEnv env;
  env.set("HVD_TIMEOUT", "2.5").set("HVD_TRANSPORT", "tcp").set("HVD_SHM_RING_BYTES", "65536");
  const Config c = parseConfig(env.reader());
  EXPECT_EQ(c.timeout, std::chrono::milliseconds(2500));
  EXPECT_EQ(c.startTimeout, std::chrono::milliseconds(2500));
  EXPECT_EQ(c.transport, TransportChoice::kTcp);
  EXPECT_EQ(c.shmRingBytes, 65536u);
}

TEST(Config, MissingVariablesAreNamed) {
  for (const char* name :
       {"HVD_RANK", "HVD_SIZE", "HVD_LOCAL_RANK", "HVD_LOCAL_SIZE", "HVD_CROSS_RANK",
        "HVD_CROSS_SIZE", "HVD_JOB_ID", "HVD_STORE_ADDR", "HVD_STORE_TOKEN"}) {
    FakeEnv env;
    env.unset(name);
    EXPECT_NE(errorOf(env).find(std::string(name) + " is not set"), std::string::npos)
        << name << ": " << errorOf(env);
  }
}

TEST(Config, MalformedAndOutOfRangeValuesAreNamed) {
  EXPECT_NE(errorOf(FakeEnv().set("HVD_RANK", "x1")).find("HVD_RANK='x1' is not an integer"),
            std::string::npos);
  EXPECT_NE(errorOf(FakeEnv().set("HVD_RANK", "4")).find("HVD_RANK=4 is out of range"),
            std::string::npos);
  EXPECT_NE(errorOf(FakeEnv().set("HVD_RANK", "-1")).find("HVD_RANK=-1 is out of range"),
            std::string::npos);
  EXPECT_NE(errorOf(FakeEnv().set("HVD_SIZE", "0")).find("HVD_SIZE=0 is out of range"),
            std::string::npos);
  EXPECT_NE(errorOf(FakeEnv().set("HVD_LOCAL_RANK", "2")).find("HVD_LOCAL_RANK=2"),
            std::string::npos);
  EXPECT_NE(errorOf(FakeEnv().set("HVD_TIMEOUT", "-3")).find("HVD_TIMEOUT='-3'"),
            std::string::npos);
  EXPECT_NE(errorOf(FakeEnv().set("HVD_TRANSPORT", "ib")).find("HVD_TRANSPORT='ib'"),
            std::string::npos);
  EXPECT_NE(errorOf(FakeEnv().set("HVD_SHM_RING_BYTES", "5000")).find("power of two"),
            std::string::npos);
}

TEST(Config, SingleRankNeedsNoStore) {
  FakeEnv env;
  env.set("HVD_SIZE", "1").set("HVD_RANK", "0").set("HVD_LOCAL_SIZE", "1");
  env.set("HVD_CROSS_SIZE", "1").set("HVD_CROSS_RANK", "0");
  env.unset("HVD_STORE_ADDR").unset("HVD_STORE_TOKEN");
  EXPECT_EQ(parseConfig(env.reader()).size, 1);
}

TEST(Config, SummaryNeverShowsTheToken) {
  const Config c = parseConfig(FakeEnv().reader());
  EXPECT_EQ(c.summary().find("secret"), std::string::npos) << c.summary();
  EXPECT_NE(c.summary().find("<set>"), std::string::npos);
}

TEST(Config, EngineKnobsHaveHorovodDefaults) {
  const Config c = parseConfig(FakeEnv().reader());
  EXPECT_EQ(c.cycleTime, std::chrono::microseconds(1000));
  EXPECT_EQ(c.cacheCapacity, 1024u);
  EXPECT_EQ(c.fusionThreshold, size_t{128} << 20);
  EXPECT_EQ(c.stallCheckTime, std::chrono::milliseconds(60000));
  EXPECT_EQ(c.stallShutdownTime, std::chrono::milliseconds(0));  // Horovod's: never
  EXPECT_EQ(c.timelinePath, "");
}

TEST(Config, EngineKnobsAreReadUnderHvdAndHorovodNamesAndHvdWins) {
  FakeEnv env;
  env.set("HVD_CYCLE_TIME", "2.5").set("HVD_CACHE_CAPACITY", "0");
  env.set("HVD_FUSION_THRESHOLD", "1048576").set("HVD_STALL_CHECK_TIME", "1.5");
  env.set("HVD_STALL_SHUTDOWN_TIME", "0").set("HVD_TIMELINE", "/tmp/t.json");
  Config c = parseConfig(env.reader());
  EXPECT_EQ(c.cycleTime, std::chrono::microseconds(2500));
  EXPECT_EQ(c.cacheCapacity, 0u);
  EXPECT_EQ(c.fusionThreshold, 1048576u);
  EXPECT_EQ(c.stallCheckTime, std::chrono::milliseconds(1500));
  EXPECT_EQ(c.stallShutdownTime, std::chrono::milliseconds(0));
  EXPECT_EQ(c.timelinePath, "/tmp/t.json");

  FakeEnv horovod;
  horovod.set("HOROVOD_CYCLE_TIME", "5").set("HOROVOD_CACHE_CAPACITY", "7");
  horovod.set("HOROVOD_FUSION_THRESHOLD", "0").set("HOROVOD_STALL_CHECK_TIME_SECONDS", "2");
  horovod.set("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "9").set("HOROVOD_TIMELINE", "h.json");
  c = parseConfig(horovod.reader());
  EXPECT_EQ(c.cycleTime, std::chrono::microseconds(5000));
  EXPECT_EQ(c.cacheCapacity, 7u);
  EXPECT_EQ(c.fusionThreshold, 0u);
  EXPECT_EQ(c.stallCheckTime, std::chrono::milliseconds(2000));
  EXPECT_EQ(c.stallShutdownTime, std::chrono::milliseconds(9000));
  EXPECT_EQ(c.timelinePath, "h.json");

  horovod.set("HVD_CACHE_CAPACITY", "3").set("HVD_TIMELINE", "v.json");
  c = parseConfig(horovod.reader());
  EXPECT_EQ(c.cacheCapacity, 3u);
  EXPECT_EQ(c.timelinePath, "v.json");
}

TEST(Config, TimelineDynamicAndMarkCyclesUnderBothNames) {
  Config c = parseConfig(FakeEnv().reader());
  EXPECT_FALSE(c.timelineDynamic);
  EXPECT_FALSE(c.timelineMarkCycles);
  // DYNAMIC is Horovod's "the program starts it", not a file name.
  c = parseConfig(FakeEnv().set("HOROVOD_TIMELINE", "DYNAMIC").reader());
  EXPECT_TRUE(c.timelineDynamic);
  EXPECT_EQ(c.timelinePath, "");
  c = parseConfig(FakeEnv().set("HVD_TIMELINE", "DYNAMIC").reader());
  EXPECT_TRUE(c.timelineDynamic);
  EXPECT_EQ(c.timelinePath, "");
  c = parseConfig(FakeEnv().set("HVD_TIMELINE", "t.json").reader());
  EXPECT_FALSE(c.timelineDynamic);
  c = parseConfig(FakeEnv().set("HOROVOD_TIMELINE_MARK_CYCLES", "1").reader());
  EXPECT_TRUE(c.timelineMarkCycles);
  FakeEnv both;
  both.set("HOROVOD_TIMELINE_MARK_CYCLES", "1").set("HVD_TIMELINE_MARK_CYCLES", "0");
  EXPECT_FALSE(parseConfig(both.reader()).timelineMarkCycles);
  EXPECT_NE(errorOf(FakeEnv().set("HVD_TIMELINE_MARK_CYCLES", "yes"))
                .find("HVD_TIMELINE_MARK_CYCLES='yes'"),
            std::string::npos);
}

TEST(Config, MalformedEngineKnobsNameTheVariable) {
  EXPECT_NE(errorOf(FakeEnv().set("HVD_CYCLE_TIME", "fast")).find("HVD_CYCLE_TIME='fast'"),
            std::string::npos);
  EXPECT_NE(errorOf(FakeEnv().set("HVD_CYCLE_TIME", "0")).find("positive"), std::string::npos);
  EXPECT_NE(errorOf(FakeEnv().set("HOROVOD_CACHE_CAPACITY", "-1")).find("HOROVOD_CACHE_CAPACITY"),
            std::string::npos);
  EXPECT_NE(errorOf(FakeEnv().set("HVD_FUSION_THRESHOLD", "64MB")).find("HVD_FUSION_THRESHOLD"),
            std::string::npos);
  EXPECT_NE(errorOf(FakeEnv().set("HOROVOD_STALL_CHECK_TIME_SECONDS", "-3"))
                .find("HOROVOD_STALL_CHECK_TIME_SECONDS='-3'"),
            std::string::npos);
  EXPECT_NE(
      errorOf(FakeEnv().set("HVD_STALL_SHUTDOWN_TIME", "soon")).find("HVD_STALL_SHUTDOWN_TIME"),
      std::string::npos);
}

// horovodrun's --no-stall-check sets HOROVOD_STALL_CHECK_DISABLE=1: the check is off, whatever
// its time says, so neither warnings nor a shutdown come.
TEST(Config, StallCheckDisableTurnsTheCheckOffUnderBothNames) {
  Config c = parseConfig(FakeEnv().set("HVD_STALL_CHECK_TIME", "5").reader());
  EXPECT_EQ(c.stallCheckTime, std::chrono::milliseconds(5000));
  EXPECT_FALSE(c.stallCheckDisabled);
  FakeEnv off;
  off.set("HVD_STALL_CHECK_TIME", "5").set("HVD_STALL_SHUTDOWN_TIME", "9");
  off.set("HVD_STALL_CHECK_DISABLE", "1");
  c = parseConfig(off.reader());
  EXPECT_TRUE(c.stallCheckDisabled);
  EXPECT_EQ(c.stallCheckTime, std::chrono::milliseconds(0));
  EXPECT_NE(c.summary().find("stall-check-disable 1"), std::string::npos) << c.summary();
  c = parseConfig(FakeEnv().set("HOROVOD_STALL_CHECK_DISABLE", "1").reader());
  EXPECT_EQ(c.stallCheckTime, std::chrono::milliseconds(0));
  FakeEnv on;
  on.set("HOROVOD_STALL_CHECK_DISABLE", "1").set("HVD_STALL_CHECK_DISABLE", "0");
  EXPECT_EQ(parseConfig(on.reader()).stallCheckTime, std::chrono::milliseconds(60000));
  EXPECT_NE(errorOf(FakeEnv().set("HVD_STALL_CHECK_DISABLE", "yes"))
                .find("HVD_STALL_CHECK_DISABLE='yes'"),
            std::string::npos);
}

// HVD_DATA_IFACE (horovodrun's --network-interface; Horovod's HOROVOD_GLOO_IFACE) names an
// interface, found on this host: loopback exists everywhere.
TEST(Config, DataInterfaceBecomesItsAddressUnlessDataAddrIsGiven) {
  Config c = parseConfig(FakeEnv().set("HVD_DATA_IFACE", "lo").reader());
  EXPECT_EQ(c.dataInterface, "lo");
  EXPECT_EQ(c.dataAddress, "127.0.0.1");
  c = parseConfig(FakeEnv().set("HOROVOD_GLOO_IFACE", "lo").reader());
  EXPECT_EQ(c.dataAddress, "127.0.0.1");
  FakeEnv both;
  both.set("HVD_DATA_IFACE", "lo").set("HVD_DATA_ADDR", "10.1.2.3");
  c = parseConfig(both.reader());
  EXPECT_EQ(c.dataAddress, "10.1.2.3");
  EXPECT_EQ(c.dataInterface, "lo");
  const std::string error = errorOf(FakeEnv().set("HVD_DATA_IFACE", "hvd-none0"));
  EXPECT_NE(error.find("HVD_DATA_IFACE=hvd-none0: this host has no network interface hvd-none0 "
                       "(it has: "),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("lo"), std::string::npos) << error;
  EXPECT_NE(errorOf(FakeEnv().set("HOROVOD_GLOO_IFACE", "hvd-none0"))
                .find("HOROVOD_GLOO_IFACE=hvd-none0: "),
            std::string::npos);
}

// --- srun and mpirun (core/scheduler_env.h) --------------------------------------------------

// An environment with none of the HVD_* placement, as srun or mpirun leave it.
FakeEnv schedulerEnv(std::map<std::string, std::string> vars) {
  FakeEnv env;
  for (const char* name :
       {"HVD_RANK", "HVD_SIZE", "HVD_LOCAL_RANK", "HVD_LOCAL_SIZE", "HVD_CROSS_RANK",
        "HVD_CROSS_SIZE", "HVD_JOB_ID", "HVD_STORE_ADDR", "HVD_STORE_TOKEN"}) {
    env.unset(name);
  }
  for (const auto& [k, v] : vars) env.set(k, v);
  return env;
}

TEST(Config, SrunPlacementComesFromSlurmWithExactCrossRanks) {
  // 3 nodes with 2, 2 and 1 tasks; this is the second task of node 1 (global rank 3).
  const FakeEnv env = schedulerEnv({{"SLURM_PROCID", "3"},
                                    {"SLURM_NTASKS", "5"},
                                    {"SLURM_LOCALID", "1"},
                                    {"SLURM_NODEID", "1"},
                                    {"SLURM_STEP_TASKS_PER_NODE", "2(x2),1"},
                                    {"SLURM_TASKS_PER_NODE", "8"},  // the allocation's: ignored
                                    {"SLURM_JOB_ID", "77"},
                                    {"SLURM_STEP_ID", "2"},
                                    {"HVD_STORE_FILE", "/shared/hvd"}});
  const Config c = parseConfig(env.reader());
  EXPECT_EQ(c.placementSource, "srun");
  EXPECT_EQ(c.rank, 3);
  EXPECT_EQ(c.size, 5);
  EXPECT_EQ(c.localRank, 1);
  EXPECT_EQ(c.localSize, 2);
  EXPECT_EQ(c.crossRank, 1);  // local rank 1 exists on nodes 0 and 1 only
  EXPECT_EQ(c.crossSize, 2);
  EXPECT_FALSE(c.crossFromRendezvous);
  EXPECT_EQ(c.jobId, "slurm-77.2");
  EXPECT_EQ(c.storeFile, "/shared/hvd");
  EXPECT_TRUE(c.storeAddress.empty());
  EXPECT_NE(c.summary().find("from srun"), std::string::npos) << c.summary();

  // The node with one task: cross rank 2 of 3 for local rank 0.
  const Config last = parseConfig(schedulerEnv({{"SLURM_PROCID", "4"},
                                                {"SLURM_NTASKS", "5"},
                                                {"SLURM_LOCALID", "0"},
                                                {"SLURM_NODEID", "2"},
                                                {"SLURM_TASKS_PER_NODE", "2(x2),1"},
                                                {"HVD_STORE_FILE", "/shared/hvd"}})
                                      .reader());
  EXPECT_EQ(last.localSize, 1);
  EXPECT_EQ(last.crossRank, 2);
  EXPECT_EQ(last.crossSize, 3);
}

TEST(Config, MpirunPlacementLeavesTheCrossRankToTheRendezvous) {
  const FakeEnv env = schedulerEnv({{"OMPI_COMM_WORLD_RANK", "2"},
                                    {"OMPI_COMM_WORLD_SIZE", "3"},
                                    {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                                    {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"},
                                    {"OMPI_MCA_ess_base_jobid", "1259536385"},
                                    {"SLURM_PROCID", "0"},  // mpirun inside an allocation
                                    {"HVD_STORE_ADDR", "10.0.0.1:4000"},
                                    {"HVD_STORE_TOKEN", "t"}});
  const Config c = parseConfig(env.reader());
  EXPECT_EQ(c.placementSource, "mpirun");
  EXPECT_EQ(c.rank, 2);
  EXPECT_EQ(c.localRank, 2);
  EXPECT_EQ(c.localSize, 3);
  EXPECT_TRUE(c.crossFromRendezvous);
  EXPECT_EQ(c.jobId, "ompi-1259536385");
  EXPECT_EQ(c.storeAddress, "10.0.0.1:4000");
}

TEST(Config, HvdVariablesWinOverTheScheduler) {
  FakeEnv env;
  env.set("SLURM_PROCID", "0").set("OMPI_COMM_WORLD_RANK", "1");
  const Config c = parseConfig(env.reader());
  EXPECT_EQ(c.placementSource, "hvd");
  EXPECT_EQ(c.rank, 2);
}

TEST(Config, SchedulerPlacementErrorsNameTheVariable) {
  EXPECT_NE(errorOf(schedulerEnv({{"SLURM_PROCID", "0"},
                                  {"SLURM_NTASKS", "2"},
                                  {"SLURM_LOCALID", "0"},
                                  {"SLURM_NODEID", "0"},
                                  {"SLURM_TASKS_PER_NODE", "2"}}))
                .find("no rendezvous store: set HVD_STORE_ADDR"),
            std::string::npos);
  EXPECT_NE(errorOf(schedulerEnv({{"SLURM_PROCID", "0"},
                                  {"SLURM_NTASKS", "3"},
                                  {"SLURM_LOCALID", "0"},
                                  {"SLURM_NODEID", "0"},
                                  {"SLURM_TASKS_PER_NODE", "2"},
                                  {"HVD_STORE_FILE", "/s"}}))
                .find("does not match SLURM_NTASKS=3"),
            std::string::npos);
  EXPECT_NE(errorOf(schedulerEnv({{"SLURM_PROCID", "0"},
                                  {"SLURM_NTASKS", "2"},
                                  {"SLURM_LOCALID", "0"},
                                  {"SLURM_NODEID", "0"},
                                  {"SLURM_TASKS_PER_NODE", "2(x"},
                                  {"HVD_STORE_FILE", "/s"}}))
                .find("SLURM_TASKS_PER_NODE '2(x'"),
            std::string::npos);
  EXPECT_NE(errorOf(schedulerEnv({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}}))
                .find("SLURM_LOCALID is not set"),
            std::string::npos);
  EXPECT_NE(errorOf(schedulerEnv({{"OMPI_COMM_WORLD_RANK", "5"},
                                  {"OMPI_COMM_WORLD_SIZE", "3"},
                                  {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                                  {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"}}))
                .find("OMPI_COMM_WORLD_RANK='5'"),
            std::string::npos);
}

// --- under mpirun: the rendezvous over MPI and HVD_CPU_BACKEND ---------------------

FakeEnv mpirunEnv(std::map<std::string, std::string> extra = {}) {
  std::map<std::string, std::string> vars = {{"OMPI_COMM_WORLD_RANK", "1"},
                                             {"OMPI_COMM_WORLD_SIZE", "3"},
                                             {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                             {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"},
                                             {"OMPI_MCA_ess_base_jobid", "42"}};
  for (const auto& [k, v] : extra) vars[k] = v;
  return schedulerEnv(vars);
}

TEST(Config, MpirunWithoutAStoreMeetsThroughMpi) {
  const Config c = parseConfig(mpirunEnv().reader());
  EXPECT_TRUE(c.mpiRendezvous);
  EXPECT_TRUE(c.storeAddress.empty());
  EXPECT_TRUE(c.storeToken.empty());
  EXPECT_NE(c.summary().find("store <from MPI: rank 0 serves it>"), std::string::npos)
      << c.summary();
  // A store given wins; so does a store file.
  EXPECT_FALSE(
      parseConfig(
          mpirunEnv({{"HVD_STORE_ADDR", "10.0.0.1:4000"}, {"HVD_STORE_TOKEN", "t"}}).reader())
          .mpiRendezvous);
  EXPECT_FALSE(parseConfig(mpirunEnv({{"HVD_STORE_FILE", "/shared"}}).reader()).mpiRendezvous);
  // One rank needs no store at all.
  EXPECT_FALSE(parseConfig(mpirunEnv({{"OMPI_COMM_WORLD_SIZE", "1"},
                                      {"OMPI_COMM_WORLD_RANK", "0"},
                                      {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                                      {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"}})
                               .reader())
                   .mpiRendezvous);
}

TEST(Config, CpuBackendDefaultsToHvdAndTakesMpiUnderMpirun) {
  EXPECT_EQ(parseConfig(FakeEnv().reader()).cpuBackend, CpuBackend::kHvd);
  const Config c = parseConfig(mpirunEnv({{"HVD_CPU_BACKEND", "mpi"}}).reader());
  EXPECT_EQ(c.cpuBackend, CpuBackend::kMpi);
  EXPECT_NE(c.summary().find("cpu-backend mpi"), std::string::npos) << c.summary();
  EXPECT_NE(parseConfig(FakeEnv().reader()).summary().find("cpu-backend hvd"), std::string::npos);
  EXPECT_EQ(parseConfig(mpirunEnv({{"HVD_CPU_BACKEND", "hvd"}}).reader()).cpuBackend,
            CpuBackend::kHvd);
  // hvdrun's placement inside an mpirun job may use MPI too (the runtime checks the ranks).
  EXPECT_EQ(
      parseConfig(FakeEnv().set("OMPI_COMM_WORLD_SIZE", "4").set("HVD_CPU_BACKEND", "mpi").reader())
          .cpuBackend,
      CpuBackend::kMpi);
}

TEST(Config, HorovodCpuOperationsIsAnAliasAndHvdCpuBackendWins) {
  EXPECT_EQ(parseConfig(mpirunEnv({{"HOROVOD_CPU_OPERATIONS", "mpi"}}).reader()).cpuBackend,
            CpuBackend::kMpi);
  EXPECT_EQ(parseConfig(mpirunEnv({{"HOROVOD_CPU_OPERATIONS", "gloo"}}).reader()).cpuBackend,
            CpuBackend::kHvd);
  EXPECT_EQ(parseConfig(
                mpirunEnv({{"HOROVOD_CPU_OPERATIONS", "mpi"}, {"HVD_CPU_BACKEND", "hvd"}}).reader())
                .cpuBackend,
            CpuBackend::kHvd);
}

TEST(Config, CpuBackendErrorsNameTheVariableTheValueAndWhatIsExpected) {
  EXPECT_EQ(errorOf(mpirunEnv({{"HVD_CPU_BACKEND", "gloo"}})),
            "HVD_CPU_BACKEND='gloo' is not a CPU backend (expected hvd or mpi)");
  EXPECT_EQ(errorOf(mpirunEnv({{"HOROVOD_CPU_OPERATIONS", "ccl"}})),
            "HOROVOD_CPU_OPERATIONS='ccl' is not a CPU backend (expected hvd or mpi, or gloo for "
            "hvd)");
  // Not started by mpirun: MPI has no job to run in.
  const std::string notMpirun = errorOf(FakeEnv().set("HVD_CPU_BACKEND", "mpi"));
  EXPECT_NE(notMpirun.find("HVD_CPU_BACKEND=mpi needs a job started by mpirun"), std::string::npos)
      << notMpirun;
  EXPECT_NE(notMpirun.find("OMPI_COMM_WORLD_SIZE is not set"), std::string::npos) << notMpirun;
}

TEST(Config, CrossRanksFromHostKeysNumberNodesByTheirLowestRank) {
  // Ranks 0, 2, 4 on host a (local 0..2), ranks 1, 3 on host b (local 0..1): mpirun --map-by node.
  const std::vector<std::string> keys = {"a", "b", "a", "b", "a"};
  EXPECT_EQ(crossFromHostKeys(keys, 0, 0, 3), std::make_pair(0, 2));
  EXPECT_EQ(crossFromHostKeys(keys, 1, 0, 2), std::make_pair(1, 2));
  EXPECT_EQ(crossFromHostKeys(keys, 3, 1, 2), std::make_pair(1, 2));
  EXPECT_EQ(crossFromHostKeys(keys, 4, 2, 3), std::make_pair(0, 1));  // only a has local rank 2
  try {
    crossFromHostKeys(keys, 1, 0, 3);
    ADD_FAILURE() << "a local size the hosts contradict was accepted";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("this host runs 2 ranks of the job but the launcher's "
                                         "local size is 3"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace hvd::core
