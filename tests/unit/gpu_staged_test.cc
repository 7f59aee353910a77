// Device buffers over the CPU transports (HVD_GPU_BACKEND=host, or no NCCL): ranks as threads,
// "device" memory from a fake CUDA. Checks values, the order of stream operations, that host
// buffers are never staged, and that pinned buffers are reused.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <thread>

#include "common/fake_cuda.h"
#include "common/rank_errors.h"
#include "gpu/staged.h"
#include "hvd/error.hpp"
#include "transport/local_fabric.h"

namespace hvd {
namespace {

using test::FakeCuda;

transport::ContextOptions options() {
  transport::ContextOptions o;
  o.timeout = std::chrono::seconds(30);
  return o;
}

// Runs body(rank, its StagedCollectives) on one thread per rank; rethrows the first error.
void runRanks(int np, FakeCuda& cuda,
              const std::function<void(int, gpu::StagedCollectives&)>& body) {
  auto contexts = transport::makeLocalContexts(np, transport::LocalLinkKind::kShm, options());
  const std::vector<std::exception_ptr> errors = test::runRankIndices(np, [&](int r) {
    gpu::StagedCollectives staged(cuda, *contexts[r]);
    body(r, staged);
  });
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

float* deviceFloats(FakeCuda& cuda, const std::vector<float>& values) {
  auto* p = static_cast<float*>(cuda.allocOn(0, values.size() * sizeof(float)));
  std::copy(values.begin(), values.end(), p);
  return p;
}

TEST(GpuStaged, AllreduceOfDeviceBuffersIsCorrectInAndOutOfPlace) {
  FakeCuda cuda;
  constexpr size_t kCount = 100003;  // several ring pieces
  runRanks(3, cuda, [&](int r, gpu::StagedCollectives& staged) {
    std::vector<float> values(kCount);
    for (size_t i = 0; i < kCount; ++i) values[i] = static_cast<float>((i + r) % 50);
    float* in = deviceFloats(cuda, values);
    float* out = deviceFloats(cuda, std::vector<float>(kCount, -1.0f));
    staged.allreduce(in, out, kCount, DataType::kFloat32, {ReduceOp::kSum});
    for (size_t i = 0; i < kCount; ++i) {
      const float want = static_cast<float>(i % 50 + (i + 1) % 50 + (i + 2) % 50);
      ASSERT_EQ(out[i], want) << "rank " << r << " element " << i;
      ASSERT_EQ(in[i], values[i]) << "the input was modified";
    }
    staged.allreduce(in, in, kCount, DataType::kFloat32, {ReduceOp::kAverage});
    for (size_t i = 0; i < kCount; ++i) {
      ASSERT_FLOAT_EQ(in[i], static_cast<float>(i % 50 + (i + 1) % 50 + (i + 2) % 50) / 3);
    }
  });
}

TEST(GpuStaged, DeviceInputsAreReadAfterTheDefaultStreamAndResultsLandBeforeReturn) {
  FakeCuda cuda;
  runRanks(2, cuda, [&](int, gpu::StagedCollectives& staged) {
    float* buffer = deviceFloats(cuda, {1, 2, 3, 4});
    cuda.clearLog();
    staged.allreduce(buffer, buffer, 4, DataType::kFloat32, {ReduceOp::kSum});
    const auto log = cuda.log();
    auto at = [&](const std::string& entry) {
      return std::find(log.begin(), log.end(), entry) - log.begin();
    };
    const auto n = static_cast<long>(log.size());
    ASSERT_LT(at("record default"), n) << ::testing::PrintToString(log);
    EXPECT_LT(at("record default"), at("wait"));
    EXPECT_LT(at("wait"), at("copy D2H 16"));
    EXPECT_LT(at("copy D2H 16"), at("copy H2D 16"));
    EXPECT_EQ(log.back(), "sync") << "returned before the results were on the device";
    EXPECT_EQ(buffer[0], 2.0f);
    EXPECT_EQ(buffer[3], 8.0f);
  });
}

TEST(GpuStaged, HostBuffersAreNeverStagedAndMixedBuffersWork) {
  FakeCuda cuda;
  runRanks(2, cuda, [&](int r, gpu::StagedCollectives& staged) {
    std::vector<int32_t> host = {r + 1, 10 * (r + 1)};
    std::vector<int32_t> hostOut(2);
    cuda.clearLog();
    staged.allreduce(host.data(), hostOut.data(), 2, DataType::kInt32, {ReduceOp::kSum});
    EXPECT_TRUE(cuda.log().empty()) << ::testing::PrintToString(cuda.log());
    EXPECT_EQ(hostOut, (std::vector<int32_t>{3, 30}));
    // Host input, device output.
    auto* deviceOut = static_cast<int32_t*>(cuda.allocOn(0, 2 * sizeof(int32_t)));
    staged.allreduce(host.data(), deviceOut, 2, DataType::kInt32, {ReduceOp::kMax});
    EXPECT_EQ(deviceOut[0], 2);
    EXPECT_EQ(deviceOut[1], 20);
  });
  EXPECT_EQ(cuda.liveStreams(), 0);
  EXPECT_EQ(cuda.liveEvents(), 0);
  EXPECT_EQ(cuda.livePinned(), 0);
}

TEST(GpuStaged, BroadcastAllgatherReducescatterAlltoallOnDeviceBuffers) {
  FakeCuda cuda;
  constexpr int kNp = 3;
  runRanks(kNp, cuda, [&](int r, gpu::StagedCollectives& staged) {
    // broadcast from rank 1
    float* b = deviceFloats(cuda, std::vector<float>(5, static_cast<float>(r)));
    staged.broadcast(b, 5, DataType::kFloat32, {1});
    for (int i = 0; i < 5; ++i) EXPECT_EQ(b[i], 1.0f);
    // uneven allgather: rank r contributes r + 1 elements of value r
    const std::vector<size_t> counts = {1, 2, 3};
    float* mine = deviceFloats(cuda, std::vector<float>(r + 1, static_cast<float>(r)));
    float* all = deviceFloats(cuda, std::vector<float>(6, -1));
    staged.allgather(mine, r + 1, all, counts, DataType::kFloat32);
    EXPECT_EQ(std::vector<float>(all, all + 6), (std::vector<float>{0, 1, 1, 2, 2, 2}));
    // reducescatter of 7 elements: rows 3, 2, 2
    std::vector<float> v(7);
    for (int i = 0; i < 7; ++i) v[i] = static_cast<float>(i * (r + 1));
    float* rsIn = deviceFloats(cuda, v);
    float* rsOut = deviceFloats(cuda, std::vector<float>(3, -1));
    staged.reducescatter(rsIn, rsOut, 7, DataType::kFloat32, {ReduceOp::kSum, 1});
    const int start = r == 0 ? 0 : (r == 1 ? 3 : 5);
    const int rows = r == 0 ? 3 : 2;
    for (int i = 0; i < rows; ++i) EXPECT_EQ(rsOut[i], static_cast<float>((start + i) * 6));
    // alltoall: rank r sends one element (100 r + p) to each p
    std::vector<float> send(kNp);
    for (int p = 0; p < kNp; ++p) send[p] = static_cast<float>(100 * r + p);
    float* aIn = deviceFloats(cuda, send);
    float* aOut = deviceFloats(cuda, std::vector<float>(kNp, -1));
    const std::vector<size_t> ones(kNp, 1);
    staged.alltoall(aIn, ones, aOut, ones, DataType::kFloat32);
    for (int p = 0; p < kNp; ++p) EXPECT_EQ(aOut[p], static_cast<float>(100 * p + r));
  });
}

TEST(GpuStaged, PinnedBuffersAreReusedAcrossCalls) {
  FakeCuda cuda;
  runRanks(2, cuda, [&](int, gpu::StagedCollectives& staged) {
    float* in = deviceFloats(cuda, std::vector<float>(1000, 1));
    float* out = deviceFloats(cuda, std::vector<float>(1000, 0));
    for (int i = 0; i < 20; ++i) staged.allreduce(in, out, 1000, DataType::kFloat32, {});
    EXPECT_EQ(out[999], 2.0f);
  });
  // Two slots per rank, allocated once each.
  EXPECT_EQ(cuda.pinnedAllocations(), 4);
}

TEST(GpuStaged, BuffersOnTwoDevicesAreRefusedNamingBoth) {
  FakeCuda cuda(2);
  auto contexts = transport::makeLocalContexts(1, transport::LocalLinkKind::kShm, options());
  gpu::StagedCollectives staged(cuda, *contexts[0]);
  void* a = cuda.allocOn(0, 16);
  void* b = cuda.allocOn(1, 16);
  try {
    staged.allreduce(a, b, 4, DataType::kFloat32, {});
    FAIL() << "expected an error";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("devices 0 and 1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hvd
