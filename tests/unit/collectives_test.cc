// Ranks as threads over in-process links (the production ShmLink over heap memory, and the
// TcpLink over socketpairs): the full correctness matrix for np in {1, 2, 3, 4, 5, 7}.
#include "collectives/collectives.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <exception>
#include <functional>
#include <thread>

#include "common/collective_checks.h"
#include "common/rank_errors.h"
#include "transport/local_fabric.h"

namespace hvd {
namespace {

using test::errorMessage;
using test::expectNoErrors;
using test::runRanks;

using transport::Context;
using transport::LocalLinkKind;

transport::ContextOptions testOptions(bool gathered = false) {
  transport::ContextOptions options;
  options.timeout = std::chrono::seconds(30);
  options.spin = std::chrono::microseconds(20);
  // Beyond the full mesh (collectives/gathered.h) from two ranks on.
  if (gathered) options.fullMeshRanks = 1;
  return options;
}

struct Param {
  int np;
  LocalLinkKind kind;
  bool gathered = false;
};

class CollectivesMatrix : public ::testing::TestWithParam<Param> {};

TEST_P(CollectivesMatrix, EveryCollectiveTypeOpCountAndPlacementIsExactAndIdentical) {
  auto contexts = transport::makeLocalContexts(GetParam().np, GetParam().kind,
                                               testOptions(GetParam().gathered), 16 << 10);
  std::vector<test::CheckReport> reports(contexts.size());
  auto errors =
      runRanks(contexts, [&](Context& ctx) { test::checkMatrix(ctx, reports[ctx.rank()]); });
  for (size_t r = 0; r < contexts.size(); ++r) {
    ASSERT_FALSE(errors[r]) << "rank " << r << ": " << errorMessage(errors[r]);
    EXPECT_TRUE(reports[r].ok()) << "rank " << r << ": " << reports[r].summary();
    EXPECT_GT(reports[r].checks, 500);
  }
}

TEST_P(CollectivesMatrix, TwoHundredIterationsWithIterationDependentInputs) {
  auto contexts = transport::makeLocalContexts(GetParam().np, GetParam().kind,
                                               testOptions(GetParam().gathered), 16 << 10);
  std::vector<test::CheckReport> reports(contexts.size());
  auto errors = runRanks(
      contexts, [&](Context& ctx) { test::checkIterations(ctx, reports[ctx.rank()], 200); });
  for (size_t r = 0; r < contexts.size(); ++r) {
    ASSERT_FALSE(errors[r]) << "rank " << r << ": " << errorMessage(errors[r]);
    EXPECT_TRUE(reports[r].ok()) << "rank " << r << ": " << reports[r].summary();
  }
}

std::string paramName(const ::testing::TestParamInfo<Param>& info) {
  return "np" + std::to_string(info.param.np) +
         (info.param.kind == LocalLinkKind::kShm ? "_shm" : "_stream") +
         (info.param.gathered ? "_gathered" : "");
}

INSTANTIATE_TEST_SUITE_P(
    Ranks, CollectivesMatrix,
    ::testing::Values(Param{1, LocalLinkKind::kShm}, Param{2, LocalLinkKind::kShm},
                      Param{3, LocalLinkKind::kShm}, Param{4, LocalLinkKind::kShm},
                      Param{5, LocalLinkKind::kShm}, Param{7, LocalLinkKind::kShm},
                      Param{2, LocalLinkKind::kStream}, Param{3, LocalLinkKind::kStream},
                      Param{4, LocalLinkKind::kStream}, Param{5, LocalLinkKind::kStream},
                      Param{7, LocalLinkKind::kStream}, Param{2, LocalLinkKind::kShm, true},
                      Param{3, LocalLinkKind::kShm, true}, Param{4, LocalLinkKind::kShm, true},
                      Param{5, LocalLinkKind::kShm, true}, Param{7, LocalLinkKind::kShm, true},
                      Param{9, LocalLinkKind::kShm, true}, Param{5, LocalLinkKind::kStream, true},
                      Param{6, LocalLinkKind::kStream, true}),
    paramName);

TEST(CollectivesLarge, RingAllreduceOfAPrimeCountAboveTheDefaultPieceSize) {
  // 262147 floats (1 MiB + 12 bytes) with the default 256 KiB pieces and 1 MiB rings.
  constexpr size_t kCount = 262147;
  for (auto kind : {LocalLinkKind::kShm, LocalLinkKind::kStream}) {
    auto contexts = transport::makeLocalContexts(3, kind, testOptions());
    std::vector<std::vector<float>> results(3);
    auto errors = runRanks(contexts, [&](Context& ctx) {
      std::vector<float> data(kCount);
      for (size_t i = 0; i < kCount; ++i) data[i] = static_cast<float>((i + ctx.rank()) % 100);
      coll::allreduce(ctx, data.data(), data.data(), kCount, DataType::kFloat32);
      results[ctx.rank()] = data;
    });
    for (int r = 0; r < 3; ++r) ASSERT_FALSE(errors[r]) << errorMessage(errors[r]);
    for (size_t i = 0; i < kCount; ++i) {
      const float want = static_cast<float>(i % 100 + (i + 1) % 100 + (i + 2) % 100);
      ASSERT_EQ(results[0][i], want) << "element " << i;
    }
    EXPECT_EQ(results[0], results[1]);
    EXPECT_EQ(results[0], results[2]);
  }
}

// A segmented allreduce (tensor fusion without a fusion buffer) gives, bit for bit, what one
// allreduce of the packed segments gives: same chunks, same reduction order. Segments of 0, 1
// and prime lengths, in place and out of place, ring and auto algorithm, non-integral floats.
TEST(CollectivesSegments, MatchThePackedAllreduceBitForBit) {
  const std::vector<size_t> lengths = {0, 1, 4099, 0, 7, 65537, 3, 262147, 1, 12289};
  for (auto kind : {LocalLinkKind::kShm, LocalLinkKind::kStream}) {
    for (int np : {2, 3, 4, 5}) {
      for (auto algorithm : {Algorithm::kRing, Algorithm::kAuto}) {
        for (auto op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMax}) {
          auto contexts = transport::makeLocalContexts(np, kind, testOptions());
          std::vector<std::vector<float>> fused(np);
          std::vector<std::vector<float>> packed(np);
          auto errors = runRanks(contexts, [&](Context& ctx) {
            const int r = ctx.rank();
            std::vector<std::vector<float>> in(lengths.size());
            std::vector<std::vector<float>> out(lengths.size());
            std::vector<coll::AllreduceSegment> segments;
            std::vector<float> all;
            for (size_t k = 0; k < lengths.size(); ++k) {
              in[k].resize(lengths[k] + 1);  // never empty: collectives refuse null pointers
              for (size_t i = 0; i < lengths[k]; ++i) {
                in[k][i] = 1.0f / static_cast<float>(1 + (i * 7 + k * 13 + r * 31) % 977);
              }
              all.insert(all.end(), in[k].begin(), in[k].begin() + lengths[k]);
              // Odd segments in place, even ones into their own output.
              if (k % 2 == 1) {
                segments.push_back({in[k].data(), in[k].data(), lengths[k]});
              } else {
                out[k].assign(lengths[k] + 1, -1.0f);
                segments.push_back({in[k].data(), out[k].data(), lengths[k]});
              }
            }
            coll::allreduceSegments(ctx, segments, DataType::kFloat32, {op, algorithm});
            for (size_t k = 0; k < lengths.size(); ++k) {
              const auto& result = k % 2 == 1 ? in[k] : out[k];
              fused[r].insert(fused[r].end(), result.begin(), result.begin() + lengths[k]);
            }
            coll::allreduce(ctx, all.data(), all.data(), all.size(), DataType::kFloat32,
                            {op, algorithm});
            packed[r] = all;
          });
          for (int r = 0; r < np; ++r) ASSERT_FALSE(errors[r]) << errorMessage(errors[r]);
          for (int r = 0; r < np; ++r) {
            ASSERT_EQ(fused[r].size(), packed[r].size());
            for (size_t i = 0; i < fused[r].size(); ++i) {
              ASSERT_EQ(fused[r][i], packed[r][i])
                  << "np " << np << " rank " << r << " element " << i;
            }
            EXPECT_EQ(fused[r], fused[0]);
          }
          // And the values are the reduction: spot-check one element of the last segment.
          size_t base = 0;
          for (size_t k = 0; k + 1 < lengths.size(); ++k) base += lengths[k];
          float want = 0.0f;
          for (int r = 0; r < np; ++r) {
            const size_t k = lengths.size() - 1;
            const float v = 1.0f / static_cast<float>(1 + (5 * 7 + k * 13 + r * 31) % 977);
            want = op == ReduceOp::kMax ? std::max(want, v) : want + v;
          }
          if (op == ReduceOp::kAverage) want /= static_cast<float>(np);
          EXPECT_NEAR(fused[0][base + 5], want, 1e-6f * np);
        }
      }
    }
  }
}

TEST(CollectivesErrors, APeerThatAbandonsTheRingFailsTheOthersWithAPeerError) {
  auto contexts = transport::makeLocalContexts(3, LocalLinkKind::kShm, testOptions());
  auto errors = runRanks(contexts, [&](Context& ctx) {
    std::vector<float> data(1 << 16, 1.0f);
    if (ctx.rank() == 1) {
      ctx.markBroken("rank 1 gave up");  // what a crashing rank looks like to its peers
      return;
    }
    coll::allreduce(ctx, data.data(), data.data(), data.size(), DataType::kFloat32);
  });
  for (int r : {0, 2}) {
    ASSERT_TRUE(errors[r]) << "rank " << r << " should have failed";
    try {
      std::rethrow_exception(errors[r]);
    } catch (const PeerError& e) {
      EXPECT_NE(std::string(e.what()).find("allreduce"), std::string::npos) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "rank " << r << " raised the wrong error: " << e.what();
    }
  }
}

TEST(CollectivesErrors, ARankThatNeverArrivesIsATimeoutNamingThePeer) {
  auto options = testOptions();
  options.timeout = std::chrono::milliseconds(300);
  auto contexts = transport::makeLocalContexts(2, LocalLinkKind::kShm, options);
  const auto start = std::chrono::steady_clock::now();
  std::vector<float> data(16, 1.0f);
  try {
    coll::allreduce(*contexts[0], data.data(), data.data(), data.size(), DataType::kFloat32);
    FAIL() << "allreduce without the peer returned";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_GE(elapsed, std::chrono::milliseconds(300));
  EXPECT_LT(elapsed, std::chrono::milliseconds(3000));
  // The context is unusable afterwards and says why.
  EXPECT_THROW(coll::barrier(*contexts[0]), PeerError);
}

TEST(CollectivesErrors, MismatchedAlltoallCountsNameBothSides) {
  auto contexts = transport::makeLocalContexts(2, LocalLinkKind::kShm, testOptions());
  auto errors = runRanks(contexts, [&](Context& ctx) {
    std::vector<int32_t> in(8, 1), out(8, 0);
    // Rank 0 sends 3 elements to rank 1, but rank 1 expects 2 from rank 0.
    std::vector<size_t> send =
        ctx.rank() == 0 ? std::vector<size_t>{1, 3} : std::vector<size_t>{1, 1};
    std::vector<size_t> recv =
        ctx.rank() == 0 ? std::vector<size_t>{1, 1} : std::vector<size_t>{2, 1};
    coll::alltoall(ctx, in.data(), send, out.data(), recv, DataType::kInt32);
  });
  ASSERT_TRUE(errors[1]);
  EXPECT_NE(errorMessage(errors[1]).find("rank 0 sends 3"), std::string::npos)
      << errorMessage(errors[1]);
  EXPECT_NE(errorMessage(errors[1]).find("expects 2"), std::string::npos)
      << errorMessage(errors[1]);
}

TEST(CollectivesErrors, BadArgumentsAreInvalidArgumentErrors) {
  auto contexts = transport::makeLocalContexts(1, LocalLinkKind::kShm, testOptions());
  Context& ctx = *contexts[0];
  float x = 0;
  EXPECT_THROW(coll::allreduce(ctx, nullptr, &x, 4, DataType::kFloat32), InvalidArgumentError);
  EXPECT_THROW(coll::allreduce(ctx, &x, &x, 1, static_cast<DataType>(42)), InvalidArgumentError);
  AllreduceOptions badOp;
  badOp.op = static_cast<ReduceOp>(9);
  EXPECT_THROW(coll::allreduce(ctx, &x, &x, 1, DataType::kFloat32, badOp), InvalidArgumentError);
  BroadcastOptions badRoot;
  badRoot.root = 3;
  EXPECT_THROW(coll::broadcast(ctx, &x, 1, DataType::kFloat32, badRoot), InvalidArgumentError);
  EXPECT_THROW(coll::allgather(ctx, &x, 1, &x, {2}, DataType::kFloat32), InvalidArgumentError);
  EXPECT_THROW(coll::reducescatterCounts(10, 2, 3), InvalidArgumentError);
  // Nothing above broke the context.
  EXPECT_NO_THROW(coll::allreduce(ctx, &x, &x, 1, DataType::kFloat32));
}

}  // namespace
}  // namespace hvd
