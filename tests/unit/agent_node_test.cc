// GPU discovery (fake, HVD_FAKE_GPUS, NVML absent, cached) and the worker environment contract of
// docs/architecture.md. Expected values were worked out by hand from the definitions in
// docs/architecture.md "Terms".
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/node/gpu_discovery.h"
#include "agent/node/worker_env.h"
#include "common/test_support.h"
#include "contract/placement.h"
#include "hvd/error.hpp"

namespace hvd::agent::node {
namespace {

using contract::Placement;
using contract::placeRanks;

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

contract::EnvReader envWith(const char* fakeGpus) {
  return [fakeGpus](const char* name) -> const char* {
    return std::string(name) == "HVD_FAKE_GPUS" ? fakeGpus : nullptr;
  };
}

// A valid input for `rank` of `placement`; tests change what they pin down.
WorkerEnvInput inputFor(const Placement& placement, int rank, const std::string& host) {
  WorkerEnvInput in;
  in.placement = placement.ranks.at(rank);
  in.size = static_cast<int>(placement.ranks.size());
  in.groupRank = groupRankOfHost(placement, in.placement.hostIndex);
  in.hostName = host;
  in.jobId = "job-42";
  in.storeAddr = "10.0.0.1:29400";
  in.storeToken = "s3cr3t-token";
  in.masterAddr = "10.0.0.1";
  in.masterPort = 29500;
  return in;
}

std::string errorOf(const WorkerEnvInput& in) {
  try {
    buildWorkerEnvironment(in);
  } catch (const InvalidArgumentError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(GpuDiscovery, FakeReturnsTheGivenList) {
  const GpuInfo gpu{3, "GPU-abc", "NVIDIA H200", "00000000:1A:00.0", 141ull << 30};
  FakeGpuDiscovery fake({gpu}, "two of them");
  EXPECT_THAT(fake.discover(), ElementsAre(gpu));
  EXPECT_EQ(fake.lastNote(), "two of them");
}

// Answers a longer list (and a new note) on every call, and counts the calls.
class ChangingDiscovery : public GpuDiscovery {
 public:
  std::vector<GpuInfo> discover() override {
    ++calls;
    return parseFakeGpus(std::to_string(calls));
  }
  std::string lastNote() const override { return "call " + std::to_string(calls); }
  int calls = 0;
};

TEST(GpuDiscovery, CachedAsksItsSourceOnceAndKeepsThatAnswer) {
  ChangingDiscovery source;
  CachedGpuDiscovery cached(source);
  EXPECT_EQ(cached.discover().size(), 1u);
  EXPECT_EQ(cached.lastNote(), "call 1");
  std::vector<std::thread> describers;
  std::vector<size_t> sizes(8);
  for (int i = 0; i < 8; ++i) {
    describers.emplace_back([&, i] { sizes[i] = cached.discover().size(); });
  }
  for (auto& t : describers) t.join();
  EXPECT_THAT(sizes, ::testing::Each(1u));
  EXPECT_EQ(cached.discover(), parseFakeGpus("1"));
  EXPECT_EQ(source.calls, 1);
  EXPECT_EQ(cached.lastNote(), "call 1");
}

TEST(GpuDiscovery, FakeGpusCountGivesNumberedGpus) {
  const std::vector<GpuInfo> gpus = parseFakeGpus("2");
  EXPECT_THAT(gpus,
              ElementsAre(GpuInfo{0, "GPU-fake-0", "Fake GPU 0", "00000000:01:00.0", 16ull << 30},
                          GpuInfo{1, "GPU-fake-1", "Fake GPU 1", "00000000:02:00.0", 16ull << 30}));
  EXPECT_TRUE(parseFakeGpus("0").empty());
}

TEST(GpuDiscovery, FakeGpusNamesKeepTheirOrder) {
  const std::vector<GpuInfo> gpus = parseFakeGpus("A100,H100,L4");
  ASSERT_EQ(gpus.size(), 3u);
  EXPECT_EQ(gpus[0].name, "A100");
  EXPECT_EQ(gpus[1].name, "H100");
  EXPECT_EQ(gpus[2].name, "L4");
  EXPECT_EQ(gpus[2].index, 2);
  EXPECT_EQ(gpus[2].uuid, "GPU-fake-2");
}

TEST(GpuDiscovery, FakeGpusMalformedValuesAreRefused) {
  EXPECT_THROW(parseFakeGpus(""), InvalidArgumentError);
  EXPECT_THROW(parseFakeGpus("A100,,L4"), InvalidArgumentError);
  EXPECT_THROW(parseFakeGpus("A100,"), InvalidArgumentError);
  EXPECT_THROW(parseFakeGpus("99999"), InvalidArgumentError);
  EXPECT_THROW(parseFakeGpus("1025"), InvalidArgumentError);
  EXPECT_EQ(parseFakeGpus("1024").size(), 1024u);
}

TEST(NvmlGpuDiscovery, FakeGpusEnvBypassesNvml) {
  // The library path does not exist: any attempt to use NVML would give zero GPUs.
  NvmlGpuDiscovery discovery("/nonexistent/libnvidia-ml.so.1", envWith("3"));
  const std::vector<GpuInfo> gpus = discovery.discover();
  ASSERT_EQ(gpus.size(), 3u);
  EXPECT_EQ(gpus[1].name, "Fake GPU 1");
  EXPECT_THAT(discovery.lastNote(), HasSubstr("HVD_FAKE_GPUS=3"));
  EXPECT_THAT(discovery.lastNote(), HasSubstr("NVML not consulted"));
}

TEST(NvmlGpuDiscovery, MissingLibraryGivesNoGpusAndANote) {
  NvmlGpuDiscovery discovery("libhvd-no-such-nvml.so.1", envWith(nullptr));
  EXPECT_TRUE(discovery.discover().empty());
  EXPECT_THAT(discovery.lastNote(), HasSubstr("libhvd-no-such-nvml.so.1"));
  EXPECT_THAT(discovery.lastNote(), HasSubstr("no GPUs"));
}

TEST(NvmlGpuDiscovery, LibraryWithoutNvmlSymbolsGivesNoGpusAndNamesTheSymbol) {
  // libc loads fine but has no NVML entry points: the "driver too old" path.
  NvmlGpuDiscovery discovery("libc.so.6", envWith(nullptr));
  EXPECT_TRUE(discovery.discover().empty());
  EXPECT_THAT(discovery.lastNote(), HasSubstr("lacks nvmlInit_v2"));
}

TEST(NvmlGpuDiscovery, AbsentNvmlOnThisMachineGivesNoGpusAndANote) {
  if (void* h = dlopen(NvmlGpuDiscovery::kDefaultLibrary, RTLD_NOW | RTLD_LOCAL)) {
    dlclose(h);
    GTEST_SKIP() << "libnvidia-ml.so.1 is present here; the absent-NVML path needs a machine "
                    "without the NVIDIA driver (covered by MissingLibraryGivesNoGpusAndANote)";
  }
  NvmlGpuDiscovery discovery(NvmlGpuDiscovery::kDefaultLibrary, envWith(nullptr));
  EXPECT_TRUE(discovery.discover().empty());
  EXPECT_FALSE(discovery.lastNote().empty());
  EXPECT_THAT(discovery.lastNote(), HasSubstr("libnvidia-ml.so.1"));
}

TEST(WorkerEnv, Rank4OfOneTwoThreeNp6HasExactContractAndAliases) {
  // a holds rank 0, b ranks 1-2, c ranks 3-5. Rank 4 is c's local rank 1 of 3; local rank 1
  // exists on b and c, so cross rank 1 of 2; c is the third host with ranks: GROUP_RANK 2.
  const Placement p = placeRanks({{"a", 1}, {"b", 2}, {"c", 3}}, 6, false);
  WorkerEnvInput in = inputFor(p, 4, "c");
  in.forwarded = {"PATH=/usr/bin", "HOME=/home/u"};
  EXPECT_EQ(in.groupRank, 2);
  EXPECT_THAT(
      buildWorkerEnvironment(in),
      ElementsAre("PATH=/usr/bin", "HOME=/home/u", "HVD_RANK=4", "HVD_SIZE=6", "HVD_LOCAL_RANK=1",
                  "HVD_LOCAL_SIZE=3", "HVD_CROSS_RANK=1", "HVD_CROSS_SIZE=2", "HVD_JOB_ID=job-42",
                  "HVD_STORE_ADDR=10.0.0.1:29400", "HVD_STORE_TOKEN=s3cr3t-token", "RANK=4",
                  "WORLD_SIZE=6", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=3", "GROUP_RANK=2",
                  "MASTER_ADDR=10.0.0.1", "MASTER_PORT=29500", "HOROVOD_RANK=4", "HOROVOD_SIZE=6",
                  "HOROVOD_LOCAL_RANK=1", "HOROVOD_LOCAL_SIZE=3", "HOROVOD_CROSS_RANK=1",
                  "HOROVOD_CROSS_SIZE=2", "HOROVOD_HOSTNAME=c"));
}

TEST(WorkerEnv, AnElasticWorkerGetsItsRoundIdAndTimeoutAndHorovodsFlag) {
  const Placement p = placeRanks({{"a", 1}, {"b", 2}}, 3, false);
  WorkerEnvInput in = inputFor(p, 2, "b");
  in.elastic = WorkerEnvInput::Elastic{3, 17, std::chrono::milliseconds(600000)};
  const std::vector<std::string> env = buildWorkerEnvironment(in);
  for (const char* entry : {"HVD_ELASTIC=1", "HOROVOD_ELASTIC=1", "HVD_ELASTIC_ROUND=3",
                            "HVD_WORKER_ID=17", "HVD_ELASTIC_TIMEOUT=600", "HOROVOD_HOSTNAME=b"}) {
    EXPECT_THAT(env, Contains(std::string(entry)));
  }
  in.elastic->timeout = std::chrono::milliseconds(2250);
  EXPECT_THAT(buildWorkerEnvironment(in), Contains(std::string("HVD_ELASTIC_TIMEOUT=2.25")));
  in.elastic.reset();
  for (const std::string& entry : buildWorkerEnvironment(in)) {
    EXPECT_EQ(entry.find("ELASTIC"), std::string::npos) << entry;
  }
}

TEST(WorkerEnv, GroupRankCountsOnlyHostsWithRanks) {
  const Placement p = placeRanks({{"a", 1}, {"b", 2}, {"c", 3}}, 3, false);
  EXPECT_EQ(groupRankOfHost(p, 0), 0);
  EXPECT_EQ(groupRankOfHost(p, 1), 1);
  EXPECT_THROW(groupRankOfHost(p, 2), InvalidArgumentError);  // c got no rank
  EXPECT_THROW(groupRankOfHost(p, 3), InvalidArgumentError);
}

TEST(WorkerEnv, HvdVariablesOverrideForwardedOnesAndEachNameAppearsOnce) {
  const Placement p = placeRanks({{"a", 1}, {"b", 2}, {"c", 3}}, 6, false);
  WorkerEnvInput in = inputFor(p, 4, "c");
  in.forwarded = {"RANK=99",       "FOO=1",  "HVD_STORE_TOKEN=stale",
                  "MASTER_PORT=1", "FOO=2",  "HOROVOD_SIZE=1",
                  "HVD_GPU=7",     "EMPTY=", "EQ=a=b"};
  const std::vector<std::string> env = buildWorkerEnvironment(in);
  const auto m = test::environmentMap(env);
  EXPECT_EQ(m.at("RANK"), "4");
  EXPECT_EQ(m.at("HVD_STORE_TOKEN"), "s3cr3t-token");
  EXPECT_EQ(m.at("MASTER_PORT"), "29500");
  EXPECT_EQ(m.at("HOROVOD_SIZE"), "6");
  EXPECT_EQ(m.at("FOO"), "2");        // last forwarded value wins
  EXPECT_EQ(m.at("EMPTY"), "");       // empty values are legal
  EXPECT_EQ(m.at("EQ"), "a=b");       // only the first '=' separates
  EXPECT_EQ(m.count("HVD_GPU"), 0u);  // CPU-only host: a stale HVD_GPU is dropped
  EXPECT_EQ(env.size(), m.size()) << "a name appears twice";
  // Forwarded variables keep the user's order ahead of hvd's.
  EXPECT_EQ(env[0], "FOO=2");
  EXPECT_EQ(env[1], "EMPTY=");
  EXPECT_EQ(env[2], "EQ=a=b");
  EXPECT_EQ(env[3], "HVD_RANK=4");
}

TEST(WorkerEnv, MalformedForwardedEntriesAreRefused) {
  const Placement p = placeRanks({{"a", 1}}, 1, false);
  WorkerEnvInput in = inputFor(p, 0, "a");
  in.forwarded = {"OK=1", "NOEQUALS"};
  EXPECT_THAT(errorOf(in), HasSubstr("'NOEQUALS' is not NAME=value"));
  in.forwarded = {"=value"};
  EXPECT_THAT(errorOf(in), HasSubstr("is not NAME=value"));
}

TEST(WorkerEnv, InconsistentInputsAreRefused) {
  const Placement p = placeRanks({{"a", 2}}, 2, false);
  WorkerEnvInput in = inputFor(p, 1, "a");
  in.groupRank = -1;
  EXPECT_THAT(errorOf(in), HasSubstr("groupRank not set"));
  in = inputFor(p, 1, "a");
  in.masterPort = 70000;
  EXPECT_THAT(errorOf(in), HasSubstr("MASTER_PORT 70000"));
  in = inputFor(p, 1, "a");
  in.size = 1;
  EXPECT_THAT(errorOf(in), HasSubstr("rank outside"));
  in = inputFor(p, 1, "a");
  in.storeAddr.clear();
  EXPECT_THAT(errorOf(in), HasSubstr("store address"));
}

TEST(WorkerEnv, GpuBindingTwoGpusTwoLocalRanks) {
  const Placement p = placeRanks({{"g", 2}}, 2, false);
  for (int rank = 0; rank < 2; ++rank) {
    WorkerEnvInput in = inputFor(p, rank, "g");
    in.hostGpus = {0, 1};
    in.forwarded = {"CUDA_VISIBLE_DEVICES=0,1"};
    auto m = test::environmentMap(buildWorkerEnvironment(in));
    EXPECT_EQ(m.at("HVD_GPU"), std::to_string(rank));
    EXPECT_EQ(m.at("CUDA_VISIBLE_DEVICES"), "0,1") << "default bind must leave visibility alone";
    EXPECT_EQ(m.at("CUDA_DEVICE_ORDER"), "PCI_BUS_ID");

    in.gpuBind = GpuBind::kVisible;
    m = test::environmentMap(buildWorkerEnvironment(in));
    EXPECT_EQ(m.at("HVD_GPU"), std::to_string(rank));
    EXPECT_EQ(m.at("CUDA_VISIBLE_DEVICES"), std::to_string(rank));
  }
}

TEST(WorkerEnv, GpuBindingWithoutForwardedVisibilityAddsNone) {
  const Placement p = placeRanks({{"g", 2}}, 2, false);
  WorkerEnvInput in = inputFor(p, 1, "g");
  in.hostGpus = {0, 1};
  in.forwarded = {"CUDA_DEVICE_ORDER=FASTEST_FIRST"};
  const auto m = test::environmentMap(buildWorkerEnvironment(in));
  EXPECT_EQ(m.count("CUDA_VISIBLE_DEVICES"), 0u);
  EXPECT_EQ(m.at("CUDA_DEVICE_ORDER"), "FASTEST_FIRST");  // the user's choice is kept
}

TEST(WorkerEnv, GpusPerRankTwoGivesConsecutivePairs) {
  const Placement p = placeRanks({{"g", 2}}, 2, false);
  WorkerEnvInput in = inputFor(p, 1, "g");
  in.hostGpus = {0, 1, 2, 3};
  in.gpusPerRank = 2;
  in.gpuBind = GpuBind::kVisible;
  auto m = test::environmentMap(buildWorkerEnvironment(in));
  EXPECT_EQ(m.at("HVD_GPU"), "2,3");
  EXPECT_EQ(m.at("CUDA_VISIBLE_DEVICES"), "2,3");
  in = inputFor(p, 0, "g");
  in.hostGpus = {0, 1, 2, 3};
  in.gpusPerRank = 2;
  m = test::environmentMap(buildWorkerEnvironment(in));
  EXPECT_EQ(m.at("HVD_GPU"), "0,1");
}

TEST(WorkerEnv, TooManyGpuRanksNamesHostGpusAndRanks) {
  const Placement p = placeRanks({{"gpu-node-7", 3}}, 3, false);
  WorkerEnvInput in = inputFor(p, 2, "gpu-node-7");
  in.hostGpus = {0, 1};
  const std::string message = errorOf(in);
  EXPECT_THAT(message, HasSubstr("'gpu-node-7'"));
  EXPECT_THAT(message, HasSubstr("has 2 GPU(s)"));
  EXPECT_THAT(message, HasSubstr("3 rank(s)"));
  EXPECT_THAT(message, Not(HasSubstr("s3cr3t")));

  in.oversubscribe = true;  // ranks share GPUs round-robin
  EXPECT_EQ(test::environmentMap(buildWorkerEnvironment(in)).at("HVD_GPU"), "0");
  // More GPUs per rank than the host has cannot be shared into existence.
  EXPECT_THROW(assignGpus("h", {0, 1}, 1, 2, 3, true), InvalidArgumentError);
}

TEST(WorkerEnv, DescribeForLogMasksSecrets) {
  const std::string line = describeForLog({"HVD_RANK=0", "HVD_STORE_TOKEN=s3cr3t-token",
                                           "AWS_SECRET=aws-s", "my_api_key=k1", "GH_TOKEN=t1",
                                           "DB_PASSWORD=pw", "KEYBOARD=us", "MALFORMED"});
  EXPECT_EQ(line,
            "HVD_RANK=0 HVD_STORE_TOKEN=<redacted> AWS_SECRET=<redacted> my_api_key=<redacted> "
            "GH_TOKEN=<redacted> DB_PASSWORD=<redacted> KEYBOARD=us MALFORMED");
  EXPECT_THAT(line, Not(HasSubstr("s3cr3t")));
}

}  // namespace
}  // namespace hvd::agent::node
