// MPI through its plugin, without starting MPI: the loader's answers when the plugin
// is absent or wrong, the plugin of this build, and MpiCollectives' semantics on top of MPI
// (averages, fusion packing, overlapping buffers, argument checks, errors, the watchdog)
// against a fake plugin table that plays a job of kRanks identical ranks.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "hvd/error.hpp"
#include "mpi/mpi_api.h"
#include "mpi/mpi_collectives.h"

namespace hvd::mpi {
namespace {

using namespace std::chrono_literals;

// --- the loader --------------------------------------------------------------------------------

TEST(MpiPlugin, AbsentPluginNamesEveryPlaceItLooked) {
  std::string why;
  EXPECT_EQ(openPlugin({"/nonexistent/a/libhvd_mpi.so", "/nonexistent/b/libhvd_mpi.so"}, &why),
            nullptr);
  EXPECT_NE(why.find("/nonexistent/a/libhvd_mpi.so"), std::string::npos) << why;
  EXPECT_NE(why.find("/nonexistent/b/libhvd_mpi.so"), std::string::npos) << why;
}

TEST(MpiPlugin, ALibraryWithoutTheEntryPointIsRefused) {
  std::string why;
  EXPECT_EQ(openPlugin({"libc.so.6"}, &why), nullptr);
  EXPECT_NE(why.find("libc.so.6 has no hvd_mpi_plugin_get"), std::string::npos) << why;
}

TEST(MpiPlugin, LoadErrorsSayWhetherThisBuildHasMpi) {
  EXPECT_EQ(pluginLoadError("HVD_CPU_BACKEND=mpi", false, "x: cannot open"),
            "HVD_CPU_BACKEND=mpi: this libhvd was built without MPI (libhvd_mpi.so not found: "
            "x: cannot open)");
  EXPECT_EQ(pluginLoadError("HVD_CPU_BACKEND=mpi", true, "libmpi.so.40: cannot open"),
            "HVD_CPU_BACKEND=mpi: cannot load hvd's MPI plugin (libmpi.so.40: cannot open)");
}

TEST(MpiPlugin, IsLookedForNextToLibhvdFirst) {
  const auto candidates = pluginCandidates();
  ASSERT_EQ(candidates.size(), 2u);
  EXPECT_NE(candidates[0].find("/libhvd_mpi.so"), std::string::npos) << candidates[0];
  EXPECT_EQ(candidates[0].find("/lib/libhvd_mpi.so") != std::string::npos, true)
      << "expected the build's lib/ folder: " << candidates[0];
  EXPECT_EQ(candidates[1], "libhvd_mpi.so");
}

TEST(MpiPlugin, ThisBuildsPluginSpeaksAbiVersionOne) {
  if (!HVD_TEST_HAVE_MPI) GTEST_SKIP() << "built without MPI: no plugin";
  EXPECT_TRUE(pluginBuilt());
  std::string why;
  auto plugin = openPlugin(pluginCandidates(), &why);
  ASSERT_NE(plugin, nullptr) << why;
  EXPECT_EQ(plugin->table().abi_version, HVD_MPI_PLUGIN_ABI_VERSION);
  EXPECT_NE(plugin->path().find("/libhvd_mpi.so"), std::string::npos) << plugin->path();
}

TEST(MpiPlugin, ReturnCodesBecomeErrorKinds) {
  EXPECT_NO_THROW(check(HVD_MPI_OK, "x", ""));
  EXPECT_THROW(check(HVD_MPI_ERR_ARGUMENT, "x", "bad"), InvalidArgumentError);
  EXPECT_THROW(check(HVD_MPI_ERR_TIMEOUT, "x", "late"), TimeoutError);
  try {
    check(15, "mpi allreduce", "MPI_Allreduce: MPI_ERR_TRUNCATE: message truncated");
    ADD_FAILURE() << "no error";
  } catch (const BackendError& e) {
    EXPECT_STREQ(e.what(), "mpi allreduce: MPI_Allreduce: MPI_ERR_TRUNCATE: message truncated");
  }
}

// --- MpiCollectives over a fake table ---------------------------------------------------------

constexpr int kRanks = 3;

// The fake's world: kRanks ranks that all pass what this one passes, so a sum is kRanks times
// the input. Calls are recorded; `failWith` makes the next call fail with that code.
struct Fake {
  int rank = 0;
  int calls = 0;
  bool lastInPlace = false;
  int lastOp = -1;
  int failWith = HVD_MPI_OK;
  std::chrono::milliseconds delay{0};
  std::atomic<int> aborts{0};
  std::atomic<int> abortCode{0};
};
Fake* g_fake = nullptr;

int finish(char* err, size_t len) {
  ++g_fake->calls;
  if (g_fake->delay.count() > 0) std::this_thread::sleep_for(g_fake->delay);
  const int rc = g_fake->failWith;
  g_fake->failWith = HVD_MPI_OK;
  if (rc != HVD_MPI_OK) std::snprintf(err, len, "MPI_Fake: MPI_ERR_OTHER: injected");
  return rc;
}

void scale(int dtype, const void* in, void* out, uint64_t count) {
  // The tests use int32, int16 and float32 only. int16 wraps as MPI_SUM on MPI_INT16_T does.
  if (dtype == static_cast<int>(DataType::kInt16)) {
    for (uint64_t i = 0; i < count; ++i) {
      static_cast<int16_t*>(out)[i] =
          static_cast<int16_t>(static_cast<const int16_t*>(in)[i] * kRanks);
    }
  } else if (dtype == static_cast<int>(DataType::kInt32)) {
    for (uint64_t i = 0; i < count; ++i) {
      static_cast<int32_t*>(out)[i] = static_cast<const int32_t*>(in)[i] * kRanks;
    }
  } else {
    for (uint64_t i = 0; i < count; ++i) {
      static_cast<float*>(out)[i] = static_cast<const float*>(in)[i] * kRanks;
    }
  }
}

hvd_mpi_plugin_v1 fakeTable() {
  hvd_mpi_plugin_v1 t{};
  t.abi_version = HVD_MPI_PLUGIN_ABI_VERSION;
  t.struct_size = sizeof(t);
  t.abort = [](hvd_mpi_comm*, int code, char*, size_t) {
    g_fake->abortCode = code;
    ++g_fake->aborts;
    return HVD_MPI_OK;
  };
  t.barrier = [](hvd_mpi_comm*, double, char* err, size_t len) { return finish(err, len); };
  t.bcast = [](hvd_mpi_comm*, void*, uint64_t, int, char* err, size_t len) {
    return finish(err, len);
  };
  t.allreduce = [](hvd_mpi_comm*, const void* send, void* recv, uint64_t count, int dtype, int op,
                   char* err, size_t len) {
    g_fake->lastInPlace = send == nullptr;
    g_fake->lastOp = op;
    scale(dtype, send == nullptr ? recv : send, recv, count);
    return finish(err, len);
  };
  t.reduce_scatter = [](hvd_mpi_comm*, const void* send, void* recv, const uint64_t* counts,
                        int dtype, int op, char* err, size_t len) {
    // This fake is rank 1: its block starts after rank 0's.
    g_fake->lastOp = op;
    const size_t elem = dataTypeSize(static_cast<DataType>(dtype));
    scale(dtype, static_cast<const uint8_t*>(send) + counts[0] * elem, recv, counts[1]);
    return finish(err, len);
  };
  t.allgatherv = [](hvd_mpi_comm*, const void* send, void* recv, const uint64_t* counts, int dtype,
                    char* err, size_t len) {
    g_fake->lastInPlace = send == nullptr;
    // Every rank passes what this one passes: its block lands in every rank's slot (the
    // descriptors of hvd's agreement check, which are all the same size, then agree).
    const size_t elem = dataTypeSize(static_cast<DataType>(dtype));
    auto* out = static_cast<uint8_t*>(recv);
    uint64_t at = 0;
    for (int p = 0; p < g_fake->rank; ++p) at += counts[p] * elem;
    const uint8_t* mine = send == nullptr ? out + at : static_cast<const uint8_t*>(send);
    const uint64_t bytes = counts[g_fake->rank] * elem;
    bool uniform = true;
    for (int p = 0; p < kRanks; ++p) uniform = uniform && counts[p] == counts[0];
    for (int p = 0; uniform && p < kRanks; ++p) {
      if (out + p * bytes != mine) std::memmove(out + p * bytes, mine, bytes);
    }
    return finish(err, len);
  };
  t.alltoallv = [](hvd_mpi_comm*, const void*, const uint64_t*, void*, const uint64_t*, int,
                   char* err, size_t len) { return finish(err, len); };
  return t;
}

class MpiCollectivesTest : public ::testing::Test {
 protected:
  void SetUp() override { g_fake = &fake_; }
  void TearDown() override { g_fake = nullptr; }
  MpiCollectives make(int rank = 0, std::chrono::milliseconds timeout = 0ms) {
    fake_.rank = rank;
    return MpiCollectives(table_, nullptr, rank, kRanks, "mpi (fake)", timeout);
  }
  Fake fake_;
  hvd_mpi_plugin_v1 table_ = fakeTable();
};

TEST_F(MpiCollectivesTest, AverageIsAnMpiSumDividedAfterwardsAsTheRingDivides) {
  auto c = make();
  std::vector<int32_t> in = {7, -7, 2, 1}, out(4);
  c.allreduce(in.data(), out.data(), 4, DataType::kInt32, {ReduceOp::kAverage});
  EXPECT_EQ(fake_.lastOp, static_cast<int>(ReduceOp::kSum));
  EXPECT_FALSE(fake_.lastInPlace);
  EXPECT_EQ(out, (std::vector<int32_t>{7, -7, 2, 1}));  // 21 / 3, -21 / 3, 6 / 3, 3 / 3
  std::vector<float> f = {1.0f, 0.5f};
  c.allreduce(f.data(), f.data(), 2, DataType::kFloat32, {ReduceOp::kAverage});
  EXPECT_TRUE(fake_.lastInPlace);
  EXPECT_EQ(f, (std::vector<float>{3.0f / 3.0f, 1.5f / 3.0f}));
  c.allreduce(f.data(), f.data(), 2, DataType::kFloat32, {ReduceOp::kMax});
  EXPECT_EQ(fake_.lastOp, static_cast<int>(ReduceOp::kMax));
}

TEST_F(MpiCollectivesTest, Int16TravelsAsItsOwnTypeAndAveragesLikeTheOtherIntegers) {
  auto c = make();
  std::vector<int16_t> in = {7, -7, 20000, 1}, out(4);
  c.allreduce(in.data(), out.data(), 4, DataType::kInt16, {ReduceOp::kAverage});
  EXPECT_EQ(fake_.lastOp, static_cast<int>(ReduceOp::kSum));
  // 60000 wraps to -5536 before the division, as in the ring; -5536 / 3 truncates to -1845.
  EXPECT_EQ(out, (std::vector<int16_t>{7, -7, -1845, 1}));
  c.allreduce(in.data(), in.data(), 4, DataType::kInt16, {ReduceOp::kSum});
  EXPECT_TRUE(fake_.lastInPlace);
  EXPECT_EQ(in, (std::vector<int16_t>{21, -21, -5536, 3}));
  // Rows of 2 int16 over 3 ranks; rank 0 gets the first 2 rows, at 2 bytes an element.
  std::vector<int16_t> rows = {1, 2, 3, 4, 5, 6, 7, 8}, mine(4, 0);
  auto r1 = make(/*rank=*/1);
  ReducescatterOptions options;
  options.op = ReduceOp::kAverage;
  options.rowElements = 2;
  r1.reducescatter(rows.data(), mine.data(), 8, DataType::kInt16, options);
  // 4 rows over 3 ranks: 2, 1, 1; rank 1's row is elements 4..5.
  EXPECT_EQ(std::vector<int16_t>(mine.begin(), mine.begin() + 2), (std::vector<int16_t>{5, 6}));
}

TEST_F(MpiCollectivesTest, OverlappingAllreduceBuffersRunInPlace) {
  auto c = make();
  std::vector<int32_t> buffer = {1, 2, 3, 4, 5};
  // Output one element ahead of the input: MPI forbids that overlap, so hvd moves then reduces.
  c.allreduce(buffer.data() + 1, buffer.data(), 4, DataType::kInt32, {ReduceOp::kSum});
  EXPECT_TRUE(fake_.lastInPlace);
  EXPECT_EQ(buffer, (std::vector<int32_t>{6, 9, 12, 15, 5}));
}

TEST_F(MpiCollectivesTest, SegmentsArePackedIntoOneCallAndUnpacked) {
  auto c = make();
  std::vector<int32_t> a = {1, 2}, b = {3}, out(2), empty;
  c.allreduceSegments(
      {{a.data(), out.data(), 2}, {empty.data(), empty.data(), 0}, {b.data(), b.data(), 1}},
      DataType::kInt32, {ReduceOp::kSum});
  EXPECT_EQ(fake_.calls, 2);  // the descriptors' allgather, then the one allreduce
  EXPECT_EQ(out, (std::vector<int32_t>{3, 6}));
  EXPECT_EQ(b, (std::vector<int32_t>{9}));
  EXPECT_EQ(a, (std::vector<int32_t>{1, 2}));  // inputs untouched out of place
}

TEST_F(MpiCollectivesTest, ReducescatterSplitsRowsUnevenlyAndStagesAnOverlappingOutput) {
  auto c = make(/*rank=*/1);
  // 7 rows of 2 over 3 ranks: 3, 2, 2 rows; rank 1 gets elements 6..9.
  std::vector<int32_t> in(14);
  for (int i = 0; i < 14; ++i) in[i] = i;
  ReducescatterOptions options;
  options.op = ReduceOp::kAverage;
  options.rowElements = 2;
  // In place: the output is this rank's own block of the input.
  c.reducescatter(in.data(), in.data() + 6, 14, DataType::kInt32, options);
  EXPECT_EQ(fake_.lastOp, static_cast<int>(ReduceOp::kSum));
  EXPECT_EQ(std::vector<int32_t>(in.begin() + 6, in.begin() + 10),
            (std::vector<int32_t>{6, 7, 8, 9}));
}

TEST_F(MpiCollectivesTest, AllgatherFromItsOwnBlockOfTheOutputIsInPlace) {
  auto c = make(/*rank=*/1);
  // One element per rank: the fake's ranks all pass what this one passes, and the agreement
  // check refuses counts that differ from what the ranks contribute.
  std::vector<float> out(3, 0.0f);
  out[1] = 5.0f;
  c.allgather(out.data() + 1, 1, out.data(), {1, 1, 1}, DataType::kFloat32, Algorithm::kAuto);
  EXPECT_TRUE(fake_.lastInPlace);
  std::vector<float> mine = {4.0f};
  c.allgather(mine.data(), 1, out.data(), {1, 1, 1}, DataType::kFloat32, Algorithm::kAuto);
  EXPECT_FALSE(fake_.lastInPlace);
}

TEST_F(MpiCollectivesTest, ArgumentsAreCheckedBeforeMpiSeesThem) {
  auto c = make();
  std::vector<float> buffer(4);
  auto message = [&](auto&& call) {
    try {
      call();
    } catch (const InvalidArgumentError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(
      message([&] {
        c.allgather(buffer.data(), 1, buffer.data(), {1, 1}, DataType::kFloat32, Algorithm::kAuto);
      }),
      "allgather: counts has 2 entries for 3 ranks");
  EXPECT_EQ(message([&] { c.broadcast(buffer.data(), 4, DataType::kFloat32, {/*root=*/3}); }),
            "broadcast: root 3 is not a rank (size 3)");
  EXPECT_EQ(message([&] {
              c.alltoall(buffer.data(), {1, 1, 1}, buffer.data(), {2, 1, 1}, DataType::kFloat32);
            }),
            "alltoall: rank 0 sends itself 1 elements but expects 2");
  EXPECT_EQ(message([&] { c.allreduce(nullptr, buffer.data(), 4, DataType::kFloat32, {}); }),
            "allreduce: null buffer for 4 elements");
  // Only the descriptors' allgathers (which tell the peers to fail too): no data call.
  EXPECT_EQ(fake_.calls, 4);
}

TEST_F(MpiCollectivesTest, AnMpiErrorNamesTheCallAndLeavesTheCollectivesUnusable) {
  auto c = make();
  std::vector<float> buffer(4, 1.0f);
  fake_.failWith = 16;  // MPI_ERR_OTHER
  try {
    c.allreduce(buffer.data(), buffer.data(), 4, DataType::kFloat32, {});
    ADD_FAILURE() << "no error";
  } catch (const BackendError& e) {
    EXPECT_STREQ(e.what(), "mpi allreduce on rank 0: MPI_Fake: MPI_ERR_OTHER: injected");
  }
  try {
    c.barrier();
    ADD_FAILURE() << "no error";
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("an earlier MPI error left the collectives unusable: "
                                         "mpi allreduce on rank 0"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(fake_.calls, 1);
}

TEST_F(MpiCollectivesTest, ARefusedArgumentDoesNotBreakTheCollectives) {
  auto c = make();
  std::vector<float> buffer(4, 1.0f);
  fake_.failWith = HVD_MPI_ERR_ARGUMENT;
  EXPECT_THROW(c.allreduce(buffer.data(), buffer.data(), 4, DataType::kFloat32, {}),
               InvalidArgumentError);
  EXPECT_NO_THROW(c.barrier());
}

TEST_F(MpiCollectivesTest, ACallThatOutlivesTheTimeoutAbortsTheJob) {
  auto c = make(0, 50ms);
  fake_.delay = 400ms;
  c.barrier();  // the fake's MPI_Abort returns, so the call completes late
  EXPECT_EQ(fake_.aborts.load(), 1);
  EXPECT_EQ(fake_.abortCode.load(), kAbortCodeTimeout);
  fake_.delay = 0ms;
  for (int i = 0; i < 20; ++i) c.barrier();  // prompt calls never trip it
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(fake_.aborts.load(), 1);
}

}  // namespace
}  // namespace hvd::mpi
