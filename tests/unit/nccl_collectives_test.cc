// Device collectives over NCCL, on CPU machines: ranks as threads, a fake NCCL that really
// computes, and a fake CUDA whose "device memory" is host memory. Communicators are
// bootstrapped through a memory store exactly as in a job (lazily, by the CommCache).
#include "gpu/nccl_collectives.h"

#include <gtest/gtest.h>

#include <functional>
#include <mutex>
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
using test::FakeCuda;
using test::FakeNcclApi;
using test::FakeNcclWorld;

// One job of `np` ranks as threads: each gets its NcclCollectives over its own CommCache.
struct Job {
  explicit Job(int np) : np(np) {}
  int np;
  FakeNcclWorld world;
  FakeCuda cuda;
  store::MemoryStore store;
  gpu::NcclCollectivesOptions options;
  // With agree: every rank's collectives agree over its context of `contexts` first (as the
  // blocking API's backend does).
  bool agree = false;
  std::vector<std::unique_ptr<transport::Context>> contexts;

  // Runs body(rank, collectives, cache) on every rank; returns each rank's error.
  std::vector<std::exception_ptr> run(
      const std::function<void(int, gpu::NcclCollectives&, gpu::CommCache&)>& body) {
    std::vector<std::exception_ptr> errors(np);
    if (agree && contexts.empty()) {
      transport::ContextOptions o;
      o.timeout = 20s;
      contexts = transport::makeLocalContexts(np, transport::LocalLinkKind::kShm, o);
    }
    std::vector<std::thread> threads;
    for (int r = 0; r < np; ++r) {
      threads.emplace_back([&, r] {
        gpu::NcclCollectivesOptions rankOptions = options;
        if (agree) rankOptions.agreeOver = contexts[r].get();
        FakeNcclApi api(world);
        gpu::CommCache cache([&, r](const std::string& name, const std::atomic<bool>& cancel) {
          gpu::CommSpec spec;
          spec.name = name;
          spec.rank = r;
          spec.size = np;
          spec.host = "h" + std::to_string(r);
          spec.timeout = 5s;
          spec.cancel = &cancel;
          return gpu::bootstrapComm(api, store, spec);
        });
        try {
          gpu::NcclCollectives nccl(cuda, cache, r, np, rankOptions);
          body(r, nccl, cache);
        } catch (...) {
          errors[r] = std::current_exception();
        }
      });
    }
    for (auto& t : threads) t.join();
    return errors;
  }

  template <typename T>
  T* device(const std::vector<T>& values) {
    auto* p = static_cast<T*>(cuda.allocOn(0, values.size() * sizeof(T)));
    std::copy(values.begin(), values.end(), p);
    return p;
  }
};

TEST(NcclCollectives, EveryCollectiveOnDeviceBuffersAtNp3) {
  Job job(3);
  expectNoErrors(job.run([&](int r, gpu::NcclCollectives& nccl, gpu::CommCache& cache) {
    EXPECT_TRUE(cache.created().empty()) << "no communicator before the first device op";
    // allreduce sum and average
    float* x = job.device(std::vector<float>{1.0f * r, 2.0f, 3.0f * (r + 1)});
    float* y = job.device(std::vector<float>(3, -1.0f));
    nccl.allreduce(x, y, 3, DataType::kFloat32, {ReduceOp::kSum});
    EXPECT_EQ(std::vector<float>(y, y + 3), (std::vector<float>{3, 6, 18}));
    nccl.allreduce(x, x, 3, DataType::kFloat32, {ReduceOp::kAverage});
    EXPECT_EQ(std::vector<float>(x, x + 3), (std::vector<float>{1, 2, 6}));
    // broadcast from rank 2
    int64_t* b = job.device(std::vector<int64_t>{r, r, r, r});
    nccl.broadcast(b, 4, DataType::kInt64, {2});
    EXPECT_EQ(std::vector<int64_t>(b, b + 4), (std::vector<int64_t>{2, 2, 2, 2}));
    // even and uneven allgather
    int32_t* mine = job.device(std::vector<int32_t>(r + 1, r));
    int32_t* all = job.device(std::vector<int32_t>(6, -1));
    nccl.allgather(mine, r + 1, all, {1, 2, 3}, DataType::kInt32);
    EXPECT_EQ(std::vector<int32_t>(all, all + 6), (std::vector<int32_t>{0, 1, 1, 2, 2, 2}));
    int32_t* two = job.device(std::vector<int32_t>{10 * r, 10 * r + 1});
    int32_t* gathered = job.device(std::vector<int32_t>(6, -1));
    nccl.allgather(two, 2, gathered, {2, 2, 2}, DataType::kInt32);
    EXPECT_EQ(std::vector<int32_t>(gathered, gathered + 6),
              (std::vector<int32_t>{0, 1, 10, 11, 20, 21}));
    // even (6 = 2+2+2) and uneven (7 = 3+2+2) reducescatter
    for (size_t count : {6u, 7u}) {
      std::vector<double> v(count);
      for (size_t i = 0; i < count; ++i) v[i] = static_cast<double>(i * (r + 1));
      double* in = job.device(v);
      double* out = job.device(std::vector<double>(3, -1));
      nccl.reducescatter(in, out, count, DataType::kFloat64, {ReduceOp::kSum, 1});
      const size_t start = count == 6 ? 2 * r : (r == 0 ? 0 : 3 + 2 * (r - 1));
      const size_t rows = count == 6 ? 2 : (r == 0 ? 3 : 2);
      for (size_t i = 0; i < rows; ++i) {
        EXPECT_EQ(out[i], static_cast<double>((start + i) * 6)) << "count " << count;
      }
    }
    // alltoall with uneven splits: rank r sends p + 1 elements (100 r + p) to rank p
    std::vector<float> send;
    std::vector<size_t> sendCounts, recvCounts;
    for (int p = 0; p < 3; ++p) {
      sendCounts.push_back(p + 1);
      recvCounts.push_back(r + 1);
      for (int k = 0; k <= p; ++k) send.push_back(static_cast<float>(100 * r + p));
    }
    float* aIn = job.device(send);
    float* aOut = job.device(std::vector<float>(3 * (r + 1), -1));
    nccl.alltoall(aIn, sendCounts, aOut, recvCounts, DataType::kFloat32);
    for (int p = 0; p < 3; ++p) {
      for (int k = 0; k <= r; ++k) {
        EXPECT_EQ(aOut[p * (r + 1) + k], static_cast<float>(100 * p + r)) << "from " << p;
      }
    }
    EXPECT_EQ(cache.created(), (std::vector<std::string>{"global"}));
  }));
  EXPECT_EQ(job.world.counters().uniqueIds, 1) << "one communicator, bootstrapped once";
}

TEST(NcclCollectives, ReadsAfterTheDefaultStreamAndReturnsWhenDone) {
  Job job(2);
  expectNoErrors(job.run([&](int, gpu::NcclCollectives& nccl, gpu::CommCache&) {
    float* x = job.device(std::vector<float>{1, 2});
    nccl.allreduce(x, x, 2, DataType::kFloat32, {ReduceOp::kSum});
    job.cuda.clearLog();
    nccl.allreduce(x, x, 2, DataType::kFloat32, {ReduceOp::kSum});
    const auto log = job.cuda.log();
    ASSERT_EQ(log.size(), 4u) << ::testing::PrintToString(log);
    EXPECT_EQ(log[0], "device 0");
    EXPECT_EQ(log[1], "record default");
    EXPECT_EQ(log[2], "wait");
    EXPECT_EQ(log[3], "record");
    EXPECT_EQ(x[0], 4.0f);
  }));
}

TEST(NcclCollectives, HostBuffersAndTwoDevicesAreRefusedBeforeAnyCommunicator) {
  Job job(1);
  job.cuda.~FakeCuda();
  new (&job.cuda) FakeCuda(2);
  expectNoErrors(job.run([&](int, gpu::NcclCollectives& nccl, gpu::CommCache& cache) {
    std::vector<float> host(4, 1);
    float* dev = job.device(std::vector<float>(4, 1));
    try {
      nccl.allreduce(host.data(), dev, 4, DataType::kFloat32, {});
      ADD_FAILURE() << "a host buffer was accepted";
    } catch (const InvalidArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("host memory"), std::string::npos) << e.what();
    }
    void* other = job.cuda.allocOn(1, 16);
    try {
      nccl.allreduce(dev, other, 4, DataType::kFloat32, {});
      ADD_FAILURE() << "buffers on two devices were accepted";
    } catch (const InvalidArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("devices 0 and 1"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(cache.created().empty());
  }));
}

TEST(NcclCollectives, Int16WithoutAnotherPathIsRefusedNamingTheTypeBeforeAnyNcclCall) {
  EXPECT_FALSE(gpu::ncclHasType(DataType::kInt16));
  EXPECT_TRUE(gpu::ncclHasType(DataType::kInt8));
  EXPECT_TRUE(gpu::ncclHasType(DataType::kFloat64));
  Job job(2);
  expectNoErrors(job.run([&](int, gpu::NcclCollectives& nccl, gpu::CommCache& cache) {
    auto* buf = static_cast<int16_t*>(job.cuda.allocOn(0, 8 * sizeof(int16_t)));
    const std::vector<size_t> ones{1, 1};
    const std::vector<std::pair<const char*, std::function<void()>>> calls = {
        {"allreduce", [&] { nccl.allreduce(buf, buf, 4, DataType::kInt16, {}); }},
        {"broadcast", [&] { nccl.broadcast(buf, 4, DataType::kInt16, {0}); }},
        {"allgather", [&] { nccl.allgather(buf, 1, buf + 4, ones, DataType::kInt16); }},
        {"reducescatter", [&] { nccl.reducescatter(buf, buf + 4, 4, DataType::kInt16, {}); }},
        {"alltoall", [&] { nccl.alltoall(buf, ones, buf + 4, ones, DataType::kInt16); }},
    };
    for (const auto& [op, call] : calls) {
      try {
        call();
        ADD_FAILURE() << op << ": int16 accepted";
      } catch (const InvalidArgumentError& e) {
        EXPECT_EQ(std::string(e.what()),
                  std::string(op) +
                      ": NCCL has no int16 type; run int16 device buffers with "
                      "HVD_GPU_BACKEND=host (host-staged), or convert them to a type NCCL has "
                      "(int32)");
      }
    }
    EXPECT_TRUE(cache.created().empty()) << "refused before any communicator";
  }));
  EXPECT_EQ(job.world.counters().collectives, 0);
}

// Records what reaches it, for the calls NcclCollectives hands to its other path.
class RecordingCollectives final : public gpu::DeviceCollectives {
 public:
  void allreduce(const void* in, void* out, size_t count, DataType type,
                 const AllreduceOptions& o) override {
    note("allreduce", in, out, count, type, static_cast<int>(o.op));
  }
  void allgather(const void* in, size_t count, void* out, const std::vector<size_t>& counts,
                 DataType type) override {
    note("allgather", in, out, count, type, static_cast<int>(counts.size()));
  }
  void broadcast(void* buffer, size_t count, DataType type, const BroadcastOptions& o) override {
    note("broadcast", buffer, buffer, count, type, o.root);
  }
  void reducescatter(const void* in, void* out, size_t count, DataType type,
                     const ReducescatterOptions& o) override {
    note("reducescatter", in, out, count, type, static_cast<int>(o.rowElements));
  }
  void alltoall(const void* in, const std::vector<size_t>& sendCounts, void* out,
                const std::vector<size_t>&, DataType type) override {
    note("alltoall", in, out, sendCounts.size(), type, 0);
  }
  const char* name() const override { return "recording"; }

  std::vector<std::string> calls;

 private:
  void note(const char* op, const void* in, const void* out, size_t count, DataType type,
            int extra) {
    std::lock_guard<std::mutex> lock(mutex_);
    calls.push_back(std::string(op) + " " + dataTypeName(type) + " " + std::to_string(count) + " " +
                    std::to_string(extra) + (in == out ? " in-place" : ""));
  }
  std::mutex mutex_;
};

TEST(NcclCollectives, Int16RunsOnTheOtherPathWithEveryArgumentAndOtherTypesStayOnNccl) {
  Job job(1);
  RecordingCollectives other;
  job.options.otherTypes = &other;
  expectNoErrors(job.run([&](int, gpu::NcclCollectives& nccl, gpu::CommCache& cache) {
    auto* s = static_cast<int16_t*>(job.cuda.allocOn(0, 8 * sizeof(int16_t)));
    nccl.allreduce(s, s, 3, DataType::kInt16, {ReduceOp::kMin});
    nccl.broadcast(s, 5, DataType::kInt16, {0});
    nccl.allgather(s, 2, s + 4, {2}, DataType::kInt16);
    nccl.reducescatter(s, s + 4, 4, DataType::kInt16, {ReduceOp::kSum, 2});
    nccl.alltoall(s, {1}, s + 4, {1}, DataType::kInt16);
    EXPECT_TRUE(cache.created().empty()) << "int16 needs no communicator";
    float* f = job.device(std::vector<float>{1.5f, 2.5f});
    nccl.allreduce(f, f, 2, DataType::kFloat32, {ReduceOp::kSum});
    EXPECT_EQ(std::vector<float>(f, f + 2), (std::vector<float>{1.5f, 2.5f}));
    EXPECT_EQ(cache.created(), (std::vector<std::string>{"global"}));
  }));
  EXPECT_EQ(other.calls,
            (std::vector<std::string>{"allreduce int16 3 2 in-place",
                                      "broadcast int16 5 0 in-place", "allgather int16 2 1",
                                      "reducescatter int16 4 2", "alltoall int16 1 0"}));
  EXPECT_EQ(job.world.counters().collectives, 1) << "only the float32 allreduce reached NCCL";
}

TEST(NcclCollectives, AdasumRunsOnTheOtherPathAndIsRefusedWithoutOne) {
  // NCCL has no Adasum op: the host-staged path runs it, whatever the type.
  Job job(1);
  RecordingCollectives other;
  job.options.otherTypes = &other;
  AllreduceOptions adasum;
  adasum.op = ReduceOp::kAdasum;
  expectNoErrors(job.run([&](int, gpu::NcclCollectives& nccl, gpu::CommCache& cache) {
    float* f = job.device(std::vector<float>{1.5f, 2.5f});
    nccl.allreduce(f, f, 2, DataType::kFloat32, adasum);
    EXPECT_TRUE(cache.created().empty()) << "Adasum needs no communicator";
  }));
  EXPECT_EQ(other.calls, (std::vector<std::string>{"allreduce float32 2 5 in-place"}));
  EXPECT_EQ(job.world.counters().collectives, 0);

  Job alone(1);
  expectNoErrors(alone.run([&](int, gpu::NcclCollectives& nccl, gpu::CommCache&) {
    float* f = alone.device(std::vector<float>{1.5f, 2.5f});
    try {
      nccl.allreduce(f, f, 2, DataType::kFloat32, adasum);
      ADD_FAILURE() << "Adasum reached NCCL";
    } catch (const InvalidArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("NCCL has no adasum op"), std::string::npos) << e.what();
    }
  }));
  EXPECT_EQ(alone.world.counters().collectives, 0);
}

TEST(NcclCollectives, AnAsyncErrorFailsTheCallNamingTheCommunicatorRankAndHost) {
  Job job(2);
  // Rank 1's communicator fails after its first operation.
  job.world.asyncErrorAfter(1, 1, gpu::NcclResult::kRemoteError, "peer 0 closed the connection");
  job.world.setAbortReachesPeers(true);
  auto errors = job.run([&](int r, gpu::NcclCollectives& nccl, gpu::CommCache& cache) {
    float* x = job.device(std::vector<float>{1, 2});
    nccl.allreduce(x, x, 2, DataType::kFloat32, {ReduceOp::kSum});
    try {
      nccl.allreduce(x, x, 2, DataType::kFloat32, {ReduceOp::kSum});
    } catch (...) {
      cache.abortAll("a collective failed");  // as the runtime does on any NCCL error
      throw;
    }
  });
  ASSERT_TRUE(errors[1]) << "rank 1 must fail";
  const std::string m = errorMessage(errors[1]);
  EXPECT_NE(m.find("ncclAllReduce"), std::string::npos) << m;
  EXPECT_NE(m.find("'global'"), std::string::npos) << m;
  EXPECT_NE(m.find("rank 1 (host h1)"), std::string::npos) << m;
  EXPECT_NE(m.find("peer 0 closed the connection"), std::string::npos) << m;
  // Rank 0 is told too (its peer aborted), rather than hanging.
  ASSERT_TRUE(errors[0]) << "rank 0 must not complete a collective its peer never joined";
}

// Each case is one call whose arguments depend on the rank (np 3), and the text every rank's
// error must contain (after its own op name).
struct MismatchCase {
  const char* name;
  std::function<void(int, gpu::NcclCollectives&, Job&)> call;
  std::string expected;
};

std::vector<MismatchCase> mismatchCases() {
  auto floats = [](Job& job, size_t n) { return job.device(std::vector<float>(n, 1.0f)); };
  return {
      {"count",
       [=](int r, gpu::NcclCollectives& nccl, Job& job) {
         float* x = floats(job, 8);
         nccl.allreduce(x, x, r == 2 ? 5 : 4, DataType::kFloat32, {ReduceOp::kSum});
       },
       "count differs across ranks: 4 on ranks 0,1, 5 on rank 2"},
      {"type",
       [=](int r, gpu::NcclCollectives& nccl, Job& job) {
         float* x = floats(job, 4);
         nccl.allreduce(x, x, 4, r == 1 ? DataType::kInt32 : DataType::kFloat32, {ReduceOp::kSum});
       },
       "type differs across ranks: float32 on ranks 0,2, int32 on rank 1"},
      {"op",
       [=](int r, gpu::NcclCollectives& nccl, Job& job) {
         float* x = floats(job, 4);
         nccl.allreduce(x, x, 4, DataType::kFloat32, {r == 0 ? ReduceOp::kMax : ReduceOp::kSum});
       },
       "op differs across ranks: max on rank 0, sum on ranks 1,2"},
      {"root",
       [=](int r, gpu::NcclCollectives& nccl, Job& job) {
         float* x = floats(job, 4);
         nccl.broadcast(x, 4, DataType::kFloat32, {r == 2 ? 1 : 0});
       },
       "root differs across ranks: 0 on ranks 0,1, 1 on rank 2"},
      {"allreduce vs broadcast",
       [=](int r, gpu::NcclCollectives& nccl, Job& job) {
         float* x = floats(job, 4);
         if (r == 1) {
           nccl.broadcast(x, 4, DataType::kFloat32, {0});
         } else {
           nccl.allreduce(x, x, 4, DataType::kFloat32, {ReduceOp::kSum});
         }
       },
       "collective differs across ranks: allreduce on ranks 0,2, broadcast on rank 1"},
      {"allgather counts",
       [=](int r, gpu::NcclCollectives& nccl, Job& job) {
         float* in = floats(job, 1);
         float* out = floats(job, 4);
         // Rank 0 expects 2 elements from rank 1, which contributes 1.
         nccl.allgather(in, 1, out,
                        r == 0 ? std::vector<size_t>{1, 2, 1} : std::vector<size_t>{1, 1, 1},
                        DataType::kFloat32);
       },
       "counts differ from the counts the ranks contribute (1 on ranks 0-2) on rank 0"},
      {"reducescatter rowElements",
       [=](int r, gpu::NcclCollectives& nccl, Job& job) {
         float* in = floats(job, 6);
         float* out = floats(job, 6);
         nccl.reducescatter(in, out, 6, DataType::kFloat32, {ReduceOp::kSum, r == 0 ? 2u : 1u});
       },
       "rowElements differs across ranks: 2 on rank 0, 1 on ranks 1,2"},
      {"alltoall counts",
       [=](int r, gpu::NcclCollectives& nccl, Job& job) {
         float* in = floats(job, 6);
         float* out = floats(job, 6);
         // Rank 0 sends rank 1 two elements; rank 1 expects one.
         std::vector<size_t> send{1, 1, 1}, recv{1, 1, 1};
         if (r == 0) send = {1, 2, 1};
         nccl.alltoall(in, send, out, recv, DataType::kFloat32);
       },
       "recvCounts differ across ranks from the sendCounts of the ranks that send them"},
      {"host buffer on one rank",
       [=](int r, gpu::NcclCollectives& nccl, Job& job) {
         static std::vector<float> host[3];
         host[r].assign(4, 1.0f);
         float* x = r == 1 ? host[r].data() : floats(job, 4);
         nccl.allreduce(x, x, 4, DataType::kFloat32, {ReduceOp::kSum});
       },
       "rank 1 passed invalid arguments to allreduce"},
  };
}

TEST(NcclCollectives, MismatchedCallsFailOnEveryRankNamingTheFieldBeforeAnyNcclCall) {
  Job job(3);
  job.agree = true;
  const auto cases = mismatchCases();
  std::vector<std::vector<std::string>> messages(3, std::vector<std::string>(cases.size()));
  expectNoErrors(job.run([&](int r, gpu::NcclCollectives& nccl, gpu::CommCache& cache) {
    for (size_t i = 0; i < cases.size(); ++i) {
      try {
        cases[i].call(r, nccl, job);
        messages[r][i] = "(no error)";
      } catch (const InvalidArgumentError& e) {
        messages[r][i] = e.what();
      }
    }
    EXPECT_TRUE(cache.created().empty()) << "no communicator for calls that fail the agreement";
  }));
  EXPECT_EQ(job.world.counters().calls, 0) << "no NCCL call was made";
  for (size_t i = 0; i < cases.size(); ++i) {
    for (int r = 0; r < 3; ++r) {
      const std::string& m = messages[r][i];
      if (std::string(cases[i].name) == "host buffer on one rank" && r == 1) {
        EXPECT_NE(m.find("one is host memory"), std::string::npos) << m;  // its own error
        continue;
      }
      EXPECT_NE(m.find(cases[i].expected), std::string::npos)
          << cases[i].name << ", rank " << r << ": " << m;
    }
  }
  // The same contexts and collectives then run a matching call with exact results.
  expectNoErrors(job.run([&](int r, gpu::NcclCollectives& nccl, gpu::CommCache&) {
    float* x = job.device(std::vector<float>{1.0f * r, 2.0f, 0.5f});
    nccl.allreduce(x, x, 3, DataType::kFloat32, {ReduceOp::kSum});
    EXPECT_EQ(std::vector<float>(x, x + 3), (std::vector<float>{3, 6, 1.5f}));
    int32_t* b = job.device(std::vector<int32_t>{r, r});
    nccl.broadcast(b, 2, DataType::kInt32, {2});
    EXPECT_EQ(std::vector<int32_t>(b, b + 2), (std::vector<int32_t>{2, 2}));
    int32_t* mine = job.device(std::vector<int32_t>(r + 1, r));
    int32_t* all = job.device(std::vector<int32_t>(6, -1));
    nccl.allgather(mine, r + 1, all, {1, 2, 3}, DataType::kInt32);
    EXPECT_EQ(std::vector<int32_t>(all, all + 6), (std::vector<int32_t>{0, 1, 1, 2, 2, 2}));
    float* in = job.device(std::vector<float>(3, 1.0f + r));
    float* out = job.device(std::vector<float>(3, -1));
    nccl.alltoall(in, {1, 1, 1}, out, {1, 1, 1}, DataType::kFloat32);
    EXPECT_EQ(std::vector<float>(out, out + 3), (std::vector<float>{1, 2, 3}));
  }));
  // Per rank: allreduce, broadcast, the uneven allgather's 3 broadcasts, alltoall's 3 sends and
  // 3 receives.
  EXPECT_EQ(job.world.counters().collectives, 3 * (1 + 1 + 3 + 6));
}

TEST(NcclCollectives, WithoutAgreementAMismatchReachesNccl) {
  // The engine's backend: no agreement round, so ranks that disagree reach NCCL (whose fake
  // refuses the mismatch, where the real one would hang); no host context is needed.
  Job job(2);
  auto errors = job.run([&](int r, gpu::NcclCollectives& nccl, gpu::CommCache&) {
    float* x = job.device(std::vector<float>(4, 1.0f));
    nccl.allreduce(x, x, r == 0 ? 4 : 3, DataType::kFloat32, {ReduceOp::kSum});
  });
  EXPECT_TRUE(job.contexts.empty());
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(errors[r]) << "rank " << r;
    EXPECT_NE(errorMessage(errors[r]).find("ncclAllReduce"), std::string::npos)
        << errorMessage(errors[r]);
  }
  EXPECT_EQ(job.world.counters().calls, 2);
}

}  // namespace
}  // namespace hvd
