// DeviceBackend: which collectives a call takes (none for host memory, NCCL, or host-staged),
// HVD_GPU_BACKEND's choices and their errors, hierarchical allreduce against the flat result,
// and the watchdog ending a call that never completes. Ranks as threads over in-process
// contexts, a fake CUDA ("device" memory is host memory it registered) and a fake NCCL that
// really computes.
#include "gpu/device_backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <thread>

#include "common/fake_cuda.h"
#include "common/fake_nccl.h"
#include "common/rank_errors.h"
#include "hvd/error.hpp"
#include "store/memory_store.h"
#include "transport/local_fabric.h"

namespace hvd {
namespace {

using test::errorMessage;
using test::expectNoErrors;

using namespace std::chrono_literals;
using gpu::DeviceBackend;
using gpu::GpuBackendChoice;
using test::FakeCuda;
using test::FakeNcclApi;
using test::FakeNcclWorld;

struct Place {
  int localRank = 0;
  int localSize = 1;
  int crossRank = 0;
};

// A job of np ranks as threads sharing one fake CUDA, one fake NCCL world and one store.
struct Job {
  explicit Job(int np) : np(np) {
    transport::ContextOptions o;
    o.timeout = 20s;
    contexts = transport::makeLocalContexts(np, transport::LocalLinkKind::kShm, o);
    places.resize(np);
  }
  int np;
  FakeCuda cuda{2};  // two devices, for calls that mix them
  FakeNcclWorld world;
  store::MemoryStore store;
  std::vector<std::unique_ptr<transport::Context>> contexts;
  std::vector<Place> places;
  GpuBackendChoice choice = GpuBackendChoice::kAuto;
  bool hierarchical = false;
  bool hierarchicalTunable = false;
  bool ncclLoads = true;
  bool driver = true;
  bool agree = false;  // DeviceBackendOptions::agreeOverContext (the blocking API's backend)
  std::chrono::milliseconds opTimeout{20000};
  std::atomic<int> ncclLoads_{0};

  DeviceBackend::CudaLoader cudaLoader() {
    return [this](std::string* why) -> std::unique_ptr<gpu::CudaApi> {
      if (!driver) {
        *why = "libcuda.so.1: cannot open shared object file";
        return nullptr;
      }
      return test::sharedFakeCuda(cuda);
    };
  }
  DeviceBackend::NcclLoader ncclLoader() {
    return [this](std::string* why) -> std::unique_ptr<gpu::NcclApi> {
      ++ncclLoads_;
      if (!ncclLoads) {
        *why = "libnccl.so.2: cannot open shared object file: No such file or directory";
        return nullptr;
      }
      return std::make_unique<FakeNcclApi>(world);
    };
  }

  // Runs body(rank, backend) on every rank; returns each rank's error.
  std::vector<std::exception_ptr> run(const std::function<void(int, DeviceBackend&)>& body) {
    std::vector<std::exception_ptr> errors(np);
    std::vector<std::thread> threads;
    for (int r = 0; r < np; ++r) {
      threads.emplace_back([&, r] {
        gpu::DeviceBackendOptions o;
        o.choice = choice;
        o.hierarchical = hierarchical;
        o.hierarchicalTunable = hierarchicalTunable;
        o.rank = r;
        o.size = np;
        o.localRank = places[r].localRank;
        o.localSize = places[r].localSize;
        o.crossRank = places[r].crossRank;
        o.host = "h" + std::to_string(r);
        o.opTimeout = opTimeout;
        o.startTimeout = 10s;
        o.watchdogPoll = 20ms;
        o.agreeOverContext = agree;
        try {
          DeviceBackend backend(o, *contexts[r], np > 1 ? &store : nullptr, cudaLoader(),
                                ncclLoader());
          body(r, backend);
        } catch (...) {
          errors[r] = std::current_exception();
        }
      });
    }
    for (auto& t : threads) t.join();
    return errors;
  }

  float* device(const std::vector<float>& values, int ordinal = 0) {
    auto* p = static_cast<float*>(cuda.allocOn(ordinal, std::max<size_t>(1, values.size()) * 4));
    std::copy(values.begin(), values.end(), p);
    return p;
  }
};

// Input of rank r: element i is r * 1000 + i (exact in float32 for these sizes).
std::vector<float> inputOf(int r, size_t count) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = static_cast<float>(r * 1000 + static_cast<int>(i));
  return v;
}

float sumAt(int np, size_t i) {
  float s = 0;
  for (int r = 0; r < np; ++r) s += static_cast<float>(r * 1000 + static_cast<int>(i));
  return s;
}

TEST(DeviceBackend, HostBuffersTakeNoDevicePathAndDeviceBuffersTakeNccl) {
  Job job(2);
  expectNoErrors(job.run([&](int r, DeviceBackend& backend) {
    std::vector<float> host(4, 1.0f);
    EXPECT_EQ(backend.route({host.data(), host.data()}), nullptr);
    EXPECT_EQ(backend.describe(), "none");
    EXPECT_EQ(backend.deviceOf(host.data()), -1);
    float* in = job.device(inputOf(r, 5));
    float* out = job.device(std::vector<float>(5, -1));
    EXPECT_EQ(backend.deviceOf(in), 0);
    gpu::DeviceCollectives* d = backend.route({in, out});
    ASSERT_NE(d, nullptr);
    EXPECT_STREQ(d->name(), "nccl");
    EXPECT_EQ(backend.describe().rfind("nccl ", 0), 0u) << backend.describe();
    d->allreduce(in, out, 5, DataType::kFloat32, {ReduceOp::kSum});
    for (size_t i = 0; i < 5; ++i) EXPECT_EQ(out[i], sumAt(2, i)) << i;
  }));
  EXPECT_EQ(job.ncclLoads_.load(), 2);
}

TEST(DeviceBackend, Int16WhichNcclLacksIsStagedThroughHostMemoryWithExactValues) {
  Job job(3);
  expectNoErrors(job.run([&](int r, DeviceBackend& backend) {
    auto* s = static_cast<int16_t*>(job.cuda.allocOn(0, 8 * sizeof(int16_t)));
    for (int i = 0; i < 4; ++i) s[i] = static_cast<int16_t>(12000 * (r + 1) + i);
    gpu::DeviceCollectives* d = backend.route({s});
    ASSERT_NE(d, nullptr);
    EXPECT_STREQ(d->name(), "nccl");
    d->allreduce(s, s, 4, DataType::kInt16, {ReduceOp::kSum});
    for (int i = 0; i < 4; ++i) {
      // 12000 * (1 + 2 + 3) + 3i = 72000 + 3i, wrapped to int16 as the CPU kernels wrap.
      EXPECT_EQ(s[i], static_cast<int16_t>(72000 + 3 * i - 65536)) << i;
    }
    for (int i = 0; i < 4; ++i) s[i] = static_cast<int16_t>(-100 * r - i);
    d->allreduce(s, s + 4, 4, DataType::kInt16, {ReduceOp::kAverage});
    for (int i = 0; i < 4; ++i) EXPECT_EQ(s[4 + i], static_cast<int16_t>(-100 - i)) << i;
    s[0] = static_cast<int16_t>(-7 * r);
    d->allgather(s, 1, s + 4, {1, 1, 1}, DataType::kInt16);
    EXPECT_EQ(std::vector<int16_t>(s + 4, s + 7), (std::vector<int16_t>{0, -7, -14}));
    // Other types still take NCCL on the same backend.
    float* f = job.device(inputOf(r, 2));
    d->allreduce(f, f, 2, DataType::kFloat32, {ReduceOp::kSum});
    EXPECT_EQ(f[1], sumAt(3, 1));
  }));
  EXPECT_EQ(job.world.counters().collectives, 3) << "one float32 allreduce on each rank";
}

TEST(DeviceBackend, WithoutADriverEveryBufferIsHostMemoryAndNcclIsNeverLoaded) {
  Job job(1);
  job.driver = false;
  expectNoErrors(job.run([&](int, DeviceBackend& backend) {
    float* in = job.device({1, 2, 3});  // registered with the fake, but no driver is loaded
    EXPECT_EQ(backend.deviceOf(in), -1);
    EXPECT_EQ(backend.route({in}), nullptr);
    EXPECT_EQ(backend.describe(), "none");
  }));
  EXPECT_EQ(job.ncclLoads_.load(), 0);
}

TEST(DeviceBackend, AutoStagesThroughHostMemoryWhenNcclDoesNotLoad) {
  Job job(3);
  job.ncclLoads = false;
  expectNoErrors(job.run([&](int r, DeviceBackend& backend) {
    float* buf = job.device(inputOf(r, 7));
    gpu::DeviceCollectives* d = backend.route({buf});
    ASSERT_NE(d, nullptr);
    EXPECT_STREQ(d->name(), "host-staged");
    EXPECT_NE(backend.describe().find("libnccl.so.2: cannot open"), std::string::npos)
        << backend.describe();
    d->allreduce(buf, buf, 7, DataType::kFloat32, {ReduceOp::kSum});
    for (size_t i = 0; i < 7; ++i) EXPECT_EQ(buf[i], sumAt(3, i)) << i;
  }));
}

TEST(DeviceBackend, HostChoiceStagesWithoutLoadingNccl) {
  Job job(2);
  job.choice = GpuBackendChoice::kHost;
  expectNoErrors(job.run([&](int r, DeviceBackend& backend) {
    float* buf = job.device(inputOf(r, 3));
    gpu::DeviceCollectives* d = backend.route({buf});
    ASSERT_NE(d, nullptr);
    EXPECT_STREQ(d->name(), "host-staged");
    EXPECT_EQ(backend.describe(), "host-staged (HVD_GPU_BACKEND=host)");
    d->broadcast(buf, 3, DataType::kFloat32, {1});
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(buf[i], 1000.0f + i);
  }));
  EXPECT_EQ(job.ncclLoads_.load(), 0);
}

TEST(DeviceBackend, NcclChoiceWithoutNcclIsAnErrorThatSaysWhy) {
  Job job(1);
  job.choice = GpuBackendChoice::kNccl;
  job.ncclLoads = false;
  const auto errors = job.run([&](int, DeviceBackend& backend) {
    float* buf = job.device({1});
    backend.route({buf});
  });
  ASSERT_TRUE(errors[0]);
  const std::string m = errorMessage(errors[0]);
  EXPECT_NE(m.find("HVD_GPU_BACKEND=nccl, but NCCL cannot be used on rank 0 (host h0)"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("libnccl.so.2: cannot open shared object file"), std::string::npos) << m;
  try {
    std::rethrow_exception(errors[0]);
  } catch (const BackendError&) {
  } catch (...) {
    ADD_FAILURE() << "not a BackendError: " << m;
  }
}

TEST(DeviceBackend, BuffersOnTwoDevicesOrHostMemoryUnderNcclAreRefusedNamingTheCall) {
  for (GpuBackendChoice choice : {GpuBackendChoice::kAuto, GpuBackendChoice::kHost}) {
    Job job(1);
    job.choice = choice;
    expectNoErrors(job.run([&](int, DeviceBackend& backend) {
      float* in = job.device({1, 2, 3});
      float* other = job.device({0, 0, 0}, 1);
      std::vector<float> host(3, -1);
      gpu::DeviceCollectives* d = backend.route({in, host.data()});
      ASSERT_NE(d, nullptr);
      try {
        d->allreduce(in, other, 3, DataType::kFloat32, {ReduceOp::kSum});
        ADD_FAILURE() << gpu::gpuBackendName(choice) << ": two devices accepted";
      } catch (const InvalidArgumentError& e) {
        EXPECT_NE(std::string(e.what()).find(
                      "allreduce: the buffers are on devices 0 and 1; they must share one device"),
                  std::string::npos)
            << e.what();
      }
      if (choice == GpuBackendChoice::kHost) {
        // Staged copies mix host and device buffers freely.
        d->allreduce(in, host.data(), 3, DataType::kFloat32, {ReduceOp::kSum});
        EXPECT_EQ(host, (std::vector<float>{1, 2, 3}));
        return;
      }
      try {
        d->allreduce(in, host.data(), 3, DataType::kFloat32, {ReduceOp::kSum});
        ADD_FAILURE() << "host memory accepted by NCCL";
      } catch (const InvalidArgumentError& e) {
        EXPECT_NE(std::string(e.what()).find("allreduce: with NCCL, every buffer of a device "
                                             "collective must be device memory"),
                  std::string::npos)
            << e.what();
      }
    }));
  }
}

TEST(DeviceBackend, TheBlockingApisBackendFailsAMismatchOnEveryRankBeforeNcclThenRuns) {
  Job job(2);
  job.agree = true;
  std::vector<std::string> messages(2);
  expectNoErrors(job.run([&](int r, DeviceBackend& backend) {
    float* buf = job.device(inputOf(r, 5));
    gpu::DeviceCollectives* d = backend.route({buf});
    ASSERT_NE(d, nullptr);
    try {
      d->allreduce(buf, buf, r == 0 ? 5 : 4, DataType::kFloat32, {ReduceOp::kSum});
      ADD_FAILURE() << "rank " << r << ": a mismatched count ran";
    } catch (const InvalidArgumentError& e) {
      messages[r] = e.what();
    }
    d->allreduce(buf, buf, 5, DataType::kFloat32, {ReduceOp::kSum});
    for (size_t i = 0; i < 5; ++i) EXPECT_EQ(buf[i], sumAt(2, i)) << i;
  }));
  for (const std::string& m : messages) {
    EXPECT_EQ(m, "allreduce: count differs across ranks: 5 on rank 0, 4 on rank 1");
  }
  EXPECT_EQ(job.world.counters().calls, 2) << "only the matching allreduce reached NCCL";
}

TEST(DeviceBackend, Int16OnOneRankAndFloat32OnAnotherFailAlikeOverTheStagedAndNcclPaths) {
  // Rank 0's int16 call is host-staged (the CPU allreduce and its agreement), rank 1's float32
  // call takes NCCL's agreement round: the two exchanges are the same protocol.
  Job job(2);
  job.agree = true;
  std::vector<std::string> messages(2);
  expectNoErrors(job.run([&](int r, DeviceBackend& backend) {
    auto* s = static_cast<int16_t*>(job.cuda.allocOn(0, 4 * sizeof(int16_t)));
    for (int i = 0; i < 4; ++i) s[i] = static_cast<int16_t>(10 * r + i);
    gpu::DeviceCollectives* d = backend.route({s});
    ASSERT_NE(d, nullptr);
    try {
      d->allreduce(s, s, 2, r == 0 ? DataType::kInt16 : DataType::kFloat32, {ReduceOp::kSum});
      ADD_FAILURE() << "rank " << r << ": a mismatched type ran";
    } catch (const InvalidArgumentError& e) {
      messages[r] = e.what();
    }
    d->allreduce(s, s, 4, DataType::kInt16, {ReduceOp::kSum});
    EXPECT_EQ(std::vector<int16_t>(s, s + 4), (std::vector<int16_t>{10, 12, 14, 16}));
  }));
  for (const std::string& m : messages) {
    EXPECT_EQ(m, "allreduce: type differs across ranks: int16 on rank 0, float32 on rank 1");
  }
  EXPECT_EQ(job.world.counters().calls, 0) << "int16 is staged, the float32 call was refused";
}

TEST(DeviceBackend, TheEnginesBackendMakesNoAgreementRound) {
  // Without agreeOverContext (the engine's backend) a mismatch goes straight to NCCL, whose fake
  // refuses it (the real one would hang): no exchange over the context preceded it.
  Job job(2);
  const auto errors = job.run([&](int r, DeviceBackend& backend) {
    float* buf = job.device(inputOf(r, 5));
    backend.route({buf})->allreduce(buf, buf, r == 0 ? 5 : 4, DataType::kFloat32, {ReduceOp::kSum});
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(errors[r]) << "rank " << r;
    EXPECT_NE(errorMessage(errors[r]).find("ncclAllReduce"), std::string::npos)
        << errorMessage(errors[r]);
  }
  EXPECT_EQ(job.world.counters().calls, 2);
}

// Two hosts of two ranks: rank r has local rank r % 2 and cross rank r / 2.
void twoByTwo(Job& job) {
  for (int r = 0; r < 4; ++r) job.places[r] = {r % 2, 2, r / 2};
}

TEST(DeviceBackend, HierarchicalAllreduceEqualsTheFlatResultForEveryLeftover) {
  Job job(4);
  twoByTwo(job);
  job.hierarchical = true;
  expectNoErrors(job.run([&](int r, DeviceBackend& backend) {
    for (size_t count : {1, 2, 3, 4, 5, 7, 1001}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
        float* in = job.device(inputOf(r, count));
        float* out = job.device(std::vector<float>(count, -1));
        gpu::DeviceCollectives* d = backend.route({in, out});
        ASSERT_NE(d, nullptr);
        d->allreduce(in, out, count, DataType::kFloat32, {op});
        for (size_t i = 0; i < count; ++i) {
          const float want = op == ReduceOp::kSum ? sumAt(4, i) : sumAt(4, i) / 4;
          ASSERT_EQ(out[i], want) << "count " << count << " element " << i;
        }
        // In place too.
        float* buf = job.device(inputOf(r, count));
        d->allreduce(buf, buf, count, DataType::kFloat32, {ReduceOp::kSum});
        for (size_t i = 0; i < count; ++i) ASSERT_EQ(buf[i], sumAt(4, i)) << count << "/" << i;
      }
    }
    EXPECT_NE(backend.describe().find("hierarchical"), std::string::npos) << backend.describe();
  }));
  // global, plus local/0, local/1, cross/0, cross/1: one init per rank per communicator.
  EXPECT_EQ(job.world.counters().inits, 4 + 2 * 2 + 2 * 2);
}

// Autotune turns hierarchical allreduce on and off between calls (every rank at the same point):
// each call's result is exact either way, and the node communicators exist once it was on.
TEST(DeviceBackend, AutotuneTurnsHierarchicalAllreduceOnAndOffBetweenCalls) {
  Job job(4);
  twoByTwo(job);
  job.hierarchicalTunable = true;
  expectNoErrors(job.run([&](int r, DeviceBackend& backend) {
    EXPECT_FALSE(backend.hierarchicalAvailable());  // nothing learnt before the first call
    for (bool on : {false, true, false, true}) {
      backend.setHierarchical(on);
      EXPECT_EQ(backend.hierarchical(), on);
      float* buf = job.device(inputOf(r, 1001));
      backend.route({buf})->allreduce(buf, buf, 1001, DataType::kFloat32, {ReduceOp::kSum});
      for (size_t i = 0; i < 1001; ++i) ASSERT_EQ(buf[i], sumAt(4, i)) << on << "/" << i;
      EXPECT_TRUE(backend.hierarchicalAvailable());
      EXPECT_EQ(backend.describe().find("hierarchical") != std::string::npos, on)
          << backend.describe();
    }
  }));
  EXPECT_EQ(job.world.counters().inits, 4 + 2 * 2 + 2 * 2);

  // Uneven hosts: never available, so autotune never tries it.
  Job uneven(3);
  uneven.places = {{0, 2, 0}, {1, 2, 0}, {0, 1, 1}};
  uneven.hierarchicalTunable = true;
  expectNoErrors(uneven.run([&](int r, DeviceBackend& backend) {
    float* buf = uneven.device(inputOf(r, 9));
    backend.route({buf})->allreduce(buf, buf, 9, DataType::kFloat32, {ReduceOp::kSum});
    EXPECT_FALSE(backend.hierarchicalAvailable());
  }));
}

TEST(DeviceBackend, HierarchicalWithUnevenHostsRunsOverTheGlobalCommunicator) {
  Job job(3);
  job.places = {{0, 2, 0}, {1, 2, 0}, {0, 1, 1}};  // host 0: ranks 0, 1; host 1: rank 2
  job.hierarchical = true;
  expectNoErrors(job.run([&](int r, DeviceBackend& backend) {
    float* buf = job.device(inputOf(r, 9));
    backend.route({buf})->allreduce(buf, buf, 9, DataType::kFloat32, {ReduceOp::kSum});
    for (size_t i = 0; i < 9; ++i) EXPECT_EQ(buf[i], sumAt(3, i));
    EXPECT_EQ(backend.describe().find("hierarchical"), std::string::npos) << backend.describe();
  }));
  EXPECT_EQ(job.world.counters().inits, 3);
}

TEST(DeviceBackend, TheWatchdogEndsACallThatNeverCompletesWithItsReason) {
  Job job(2);
  job.opTimeout = 400ms;
  const auto start = std::chrono::steady_clock::now();
  const auto errors = job.run([&](int r, DeviceBackend& backend) {
    float* buf = job.device(inputOf(r, 4));
    gpu::DeviceCollectives* d = backend.route({buf});
    d->allreduce(buf, buf, 4, DataType::kFloat32, {ReduceOp::kSum});              // both ranks
    if (r == 0) d->allreduce(buf, buf, 4, DataType::kFloat32, {ReduceOp::kSum});  // rank 1 never
  });
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_FALSE(errors[1]) << errorMessage(errors[1]);
  ASSERT_TRUE(errors[0]);
  const std::string m = errorMessage(errors[0]);
  EXPECT_NE(m.find("NCCL: allreduce on communicator 'global' was cut short on rank 0"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("has not finished after"), std::string::npos) << m;
  EXPECT_LT(elapsed, 10s);
}

TEST(DeviceBackend, StopAbortsTheCommunicatorsAndLaterCallsFail) {
  Job job(1);
  const auto errors = job.run([&](int, DeviceBackend& backend) {
    float* buf = job.device({1, 2});
    gpu::DeviceCollectives* d = backend.route({buf});
    d->allreduce(buf, buf, 2, DataType::kFloat32, {ReduceOp::kSum});
    EXPECT_EQ(buf[1], 2.0f);
    backend.stop("the job is stopping");
    d->allreduce(buf, buf, 2, DataType::kFloat32, {ReduceOp::kSum});
  });
  ASSERT_TRUE(errors[0]);
  EXPECT_NE(errorMessage(errors[0]).find("the job is stopping"), std::string::npos)
      << errorMessage(errors[0]);
}

}  // namespace
}  // namespace hvd
