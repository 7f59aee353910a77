// Adasum (collectives/adasum.h): the pairwise rule against its formula, and the collective over
// ranks as threads against the reference tree of tests/common/adasum_reference.h, for every
// size from 1 to 8 (powers of two and the fold of extra ranks), every floating-point type,
// fused tensors, and the refusals.
#include "collectives/adasum.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "collectives/collectives.h"
#include "common/adasum_reference.h"
#include "common/element.h"
#include "common/rank_errors.h"
#include "transport/local_fabric.h"

namespace hvd {
namespace {

using test::adasumPairReference;
using test::adasumTolerance;
using test::adasumTreeReference;
using test::errorMessage;
using test::roundTo;
using transport::Context;

constexpr DataType kFloatTypes[] = {DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32,
                                    DataType::kFloat64};

std::vector<uint8_t> bufferOf(DataType type, const std::vector<double>& values) {
  std::vector<uint8_t> out(values.size() * dataTypeSize(type) + 1);
  for (size_t i = 0; i < values.size(); ++i) storeElement(type, out.data(), i, values[i]);
  return out;
}

std::vector<double> valuesOf(DataType type, const uint8_t* data, size_t count) {
  std::vector<double> out(count);
  for (size_t i = 0; i < count; ++i) out[i] = loadElement(type, data, i);
  return out;
}

// adasum(a, b) through the runtime's kernels.
std::vector<double> pair(DataType type, const std::vector<double>& a,
                         const std::vector<double>& b) {
  auto x = bufferOf(type, a);
  const auto y = bufferOf(type, b);
  coll::adasumPair(type, x.data(), y.data(), a.size());
  return valuesOf(type, x.data(), a.size());
}

TEST(AdasumPair, OrthogonalVectorsAreAdded) {
  for (DataType t : kFloatTypes) {
    EXPECT_EQ(pair(t, {3, 0, 0, -2}, {0, 5, 0.5, 0}), (std::vector<double>{3, 5, 0.5, -2}))
        << dataTypeName(t);
  }
}

TEST(AdasumPair, EqualVectorsGiveTheVectorItself) {
  // The average of parallel equal vectors: (1 - 1/2) a + (1 - 1/2) a.
  for (DataType t : kFloatTypes) {
    const std::vector<double> a{1.5, -2, 0.25, 7};
    EXPECT_EQ(pair(t, a, a), a) << dataTypeName(t);
  }
}

TEST(AdasumPair, OppositeVectorsCancel) {
  // a.b = -|a|^2: both coefficients are 3/2.
  EXPECT_EQ(pair(DataType::kFloat64, {1, 2, -3}, {-1, -2, 3}), (std::vector<double>{0, 0, 0}));
}

TEST(AdasumPair, AZeroVectorLeavesTheOtherAsItIs) {
  for (DataType t : kFloatTypes) {
    const std::vector<double> a{1, -2, 4};
    EXPECT_EQ(pair(t, a, {0, 0, 0}), a) << dataTypeName(t);
    EXPECT_EQ(pair(t, {0, 0, 0}, a), a) << dataTypeName(t);
    EXPECT_EQ(pair(t, {0, 0, 0}, {0, 0, 0}), (std::vector<double>{0, 0, 0})) << dataTypeName(t);
  }
}

TEST(AdasumPair, ASquaredNormBelowTheThresholdCountsAsZero) {
  // |b|^2 = 2.5e-9 < 1e-8: b's coefficient is 1 (not 1 - a.b / 2|b|^2, which would be about
  // -1e4 here); a's is 1 - a.b / 2|a|^2.
  const std::vector<double> a{1, 0};
  const std::vector<double> b{5e-5, 0};
  const double ca = 1 - 5e-5 / 2;
  const auto got = pair(DataType::kFloat64, a, b);
  EXPECT_DOUBLE_EQ(got[0], ca * 1 + 5e-5);
  EXPECT_EQ(got[1], 0);
  coll::AdasumSums s;
  s.dot = 5e-5;
  s.aa = 1;
  s.bb = 2.5e-9;
  const coll::AdasumCoefficients c = coll::adasumCoefficients(s);
  EXPECT_DOUBLE_EQ(c.a, ca);
  EXPECT_EQ(c.b, 1.0);
}

TEST(AdasumPair, MatchesTheFormulaOnRandomVectorsOfVeryDifferentNorms) {
  std::mt19937 rng(7);
  std::normal_distribution<double> normal;
  for (DataType t : kFloatTypes) {
    for (double scale : {1e-2, 1.0, 1e3}) {
      std::vector<double> a(257), b(257);
      for (size_t i = 0; i < a.size(); ++i) {
        a[i] = roundTo(t, normal(rng));
        b[i] = roundTo(t, scale * (normal(rng) + 0.5 * a[i]));  // correlated with a
      }
      const auto want = adasumPairReference(t, a, b);
      const auto got = pair(t, a, b);
      const double tol = adasumTolerance(t) * test::largestMagnitude({a, b, want});
      for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_NEAR(got[i], want[i], tol) << dataTypeName(t) << " scale " << scale << " at " << i;
      }
    }
  }
}

TEST(AdasumPair, SumsAccumulateInFloat64) {
  // b = 1 + 2^-23 (the float nearest 1 + 1e-7): float32 partial sums near 4096 would drop
  // every increment (their ulp is 2^-11); float64 keeps them.
  std::vector<float> a(1 << 12, 1.0f), b(1 << 12, 1.0f + 1e-7f);
  const coll::AdasumSums s = coll::adasumSums(DataType::kFloat32, a.data(), b.data(), a.size());
  EXPECT_DOUBLE_EQ(s.aa, 4096.0);
  EXPECT_DOUBLE_EQ(s.dot, 4096.0 * static_cast<double>(1.0f + 1e-7f));
  // (4096 roundings of float64 sums: far below the 1e-3 a float32 sum would lose)
  EXPECT_NEAR(s.bb, 4096.0 * std::pow(static_cast<double>(1.0f + 1e-7f), 2), 1e-9);
}

TEST(AdasumPair, IntegerTypesHaveNoKernel) {
  int32_t a[2] = {1, 2};
  EXPECT_THROW(coll::adasumPair(DataType::kInt32, a, a, 2), InvalidArgumentError);
  EXPECT_FALSE(coll::adasumSupports(DataType::kInt64));
  EXPECT_TRUE(coll::adasumSupports(DataType::kBFloat16));
}

// --- the collective ------------------------------------------------------------------------

transport::ContextOptions testOptions(bool gathered) {
  transport::ContextOptions options;
  options.timeout = std::chrono::seconds(30);
  options.spin = std::chrono::microseconds(20);
  if (gathered) options.fullMeshRanks = 1;  // agreement beyond the full mesh
  return options;
}

// inputs[r][t]: rank r's tensor t. Runs one fused Adasum allreduce (several tensors: one
// allreduceSegments call; one tensor: allreduce, in place when `inPlace`) and checks every
// rank's result against the reference tree per tensor, and that all ranks got the same bits.
// Returns rank 0's results, per tensor.
std::vector<std::vector<double>> checkCollective(
    int n, DataType type, const std::vector<std::vector<std::vector<double>>>& in, bool inPlace,
    bool gathered, const std::string& what) {
  auto contexts = transport::makeLocalContexts(n, transport::LocalLinkKind::kShm,
                                               testOptions(gathered), 64 << 10);
  const size_t tensors = in[0].size();
  std::vector<std::vector<std::vector<uint8_t>>> inputs(n), outputs(n);
  for (int r = 0; r < n; ++r) {
    for (size_t t = 0; t < tensors; ++t) {
      inputs[r].push_back(bufferOf(type, in[r][t]));
      outputs[r].push_back(std::vector<uint8_t>(inputs[r][t].size(), 0xee));
    }
  }
  auto errors = test::runRanks(contexts, [&](Context& ctx) {
    const int r = ctx.rank();
    AllreduceOptions o;
    o.op = ReduceOp::kAdasum;
    if (tensors == 1) {
      void* out = inPlace ? inputs[r][0].data() : outputs[r][0].data();
      coll::allreduce(ctx, inputs[r][0].data(), out, in[r][0].size(), type, o);
      return;
    }
    std::vector<coll::AllreduceSegment> segments;
    for (size_t t = 0; t < tensors; ++t) {
      segments.push_back({inputs[r][t].data(), inPlace ? inputs[r][t].data() : outputs[r][t].data(),
                          in[r][t].size()});
    }
    coll::allreduceSegments(ctx, segments, type, o);
  });
  std::vector<std::vector<double>> results;
  for (int r = 0; r < n; ++r) {
    EXPECT_FALSE(errors[r]) << what << " rank " << r << ": " << errorMessage(errors[r]);
    if (errors[r]) return results;
  }
  for (size_t t = 0; t < tensors; ++t) {
    std::vector<std::vector<double>> perRank;
    for (int r = 0; r < n; ++r) perRank.push_back(in[r][t]);
    const auto want = adasumTreeReference(type, perRank);
    perRank.push_back(want);
    const double tol = adasumTolerance(type) * test::largestMagnitude(perRank);
    const size_t bytes = in[0][t].size() * dataTypeSize(type);
    auto result = [&](int r) { return inPlace ? inputs[r][t].data() : outputs[r][t].data(); };
    const auto got = valuesOf(type, result(0), in[0][t].size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_NEAR(got[i], want[i], tol) << what << " tensor " << t << " element " << i;
    }
    for (int r = 1; r < n; ++r) {
      EXPECT_EQ(std::memcmp(result(r), result(0), bytes), 0)
          << what << " tensor " << t << ": rank " << r << " differs from rank 0";
    }
    results.push_back(got);
  }
  return results;
}

std::vector<double> randomVector(std::mt19937& rng, DataType type, size_t count, double scale) {
  std::normal_distribution<double> normal;
  std::vector<double> v(count);
  for (double& x : v) x = roundTo(type, scale * normal(rng));
  return v;
}

class AdasumCollective : public ::testing::TestWithParam<int> {};

TEST_P(AdasumCollective, FusedTensorsOfEveryTypeMatchTheReferenceTreePerTensor) {
  const int n = GetParam();
  std::mt19937 rng(100 + n);
  for (DataType type : kFloatTypes) {
    // Tensors of several sizes (one empty, one smaller than the number of ranks), norms far
    // apart from rank to rank, one rank's tensor all zeros.
    const std::vector<size_t> sizes{37, 0, 1, 300, 5};
    std::vector<std::vector<std::vector<double>>> in(n);
    for (int r = 0; r < n; ++r) {
      for (size_t t = 0; t < sizes.size(); ++t) {
        const double scale = std::pow(10.0, (r + static_cast<int>(t)) % 4 - 1);
        in[r].push_back(randomVector(rng, type, sizes[t], scale));
        if (r == n / 2 && t == 3) std::fill(in[r][t].begin(), in[r][t].end(), 0.0);
      }
    }
    const std::string what = std::string(dataTypeName(type)) + " np " + std::to_string(n);
    checkCollective(n, type, in, /*inPlace=*/false, /*gathered=*/false, what + " fused");
    checkCollective(n, type, in, /*inPlace=*/true, /*gathered=*/n == 5, what + " fused in place");
    std::vector<std::vector<std::vector<double>>> lone(n);
    for (int r = 0; r < n; ++r) lone[r] = {in[r][3]};
    checkCollective(n, type, lone, /*inPlace=*/true, /*gathered=*/false, what + " one tensor");
  }
}

TEST_P(AdasumCollective, OrthogonalInputsGiveTheirSumExactly) {
  // Rank r's vector lives on coordinates r and r + n: any combination stays orthogonal to the
  // others, every coefficient is 1.
  const int n = GetParam();
  for (DataType type : kFloatTypes) {
    std::vector<std::vector<std::vector<double>>> in(n);
    std::vector<double> sum(2 * n, 0);
    for (int r = 0; r < n; ++r) {
      std::vector<double> v(2 * n, 0);
      v[r] = r + 1;
      v[r + n] = -0.5 * (r + 2);
      for (int i = 0; i < 2 * n; ++i) sum[i] += v[i];
      in[r] = {v};
    }
    const auto got =
        checkCollective(n, type, in, false, false, std::string(dataTypeName(type)) + " orthogonal");
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0], sum) << dataTypeName(type);
  }
}

TEST_P(AdasumCollective, EqualInputsGiveTheSameVector) {
  const int n = GetParam();
  std::mt19937 rng(3);
  for (DataType type : kFloatTypes) {
    const auto v = randomVector(rng, type, 41, 2.0);
    std::vector<std::vector<std::vector<double>>> in(n, {v});
    const auto got =
        checkCollective(n, type, in, false, false, std::string(dataTypeName(type)) + " equal");
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0], v) << dataTypeName(type);
  }
}

TEST_P(AdasumCollective, ZeroInputsGiveZeros) {
  const int n = GetParam();
  std::vector<std::vector<std::vector<double>>> in(n, {std::vector<double>(9, 0.0)});
  const auto got = checkCollective(n, DataType::kFloat32, in, true, false, "zeros");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], std::vector<double>(9, 0.0));
}

INSTANTIATE_TEST_SUITE_P(Ranks, AdasumCollective, ::testing::Values(1, 2, 3, 4, 5, 6, 7, 8),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "np" + std::to_string(info.param);
                         });

TEST(AdasumReference, TheFoldPairsRankPPlusIWithRankI) {
  // np 3: p = 2, leaves adasum(x0, x2) and x1. With x0 = (1, 0), x1 = (1, 1), x2 = (0, 1):
  // adasum(x0, x2) = (1, 1) (orthogonal), then adasum((1, 1), x1) = (1, 1) (equal). Folding x2
  // into x1 instead would give adasum(x0, adasum(x1, x2)), another vector: the rule matters.
  const std::vector<std::vector<double>> x{{1, 0}, {1, 1}, {0, 1}};
  EXPECT_EQ(adasumTreeReference(DataType::kFloat64, x), (std::vector<double>{1, 1}));
  const auto other = adasumPairReference(DataType::kFloat64, x[0],
                                         adasumPairReference(DataType::kFloat64, x[1], x[2]));
  EXPECT_GT(std::fabs(other[0] - 1) + std::fabs(other[1] - 1), 0.1);
  // And the collective follows the rule.
  std::vector<std::vector<std::vector<double>>> in{{x[0]}, {x[1]}, {x[2]}};
  const auto got = checkCollective(3, DataType::kFloat64, in, false, false, "fold rule");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], (std::vector<double>{1, 1}));
}

// Every rank throws the error when the ranks' calls disagree or are invalid.
void expectEveryRankFails(int n, const std::function<void(Context&)>& body,
                          const std::string& part) {
  auto contexts =
      transport::makeLocalContexts(n, transport::LocalLinkKind::kShm, testOptions(false), 64 << 10);
  auto errors = test::runRanks(contexts, body);
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(errors[r]) << "rank " << r << " did not fail";
    EXPECT_NE(errorMessage(errors[r]).find(part), std::string::npos)
        << "rank " << r << ": " << errorMessage(errors[r]);
  }
}

TEST(AdasumCollective, AnOpMismatchFailsOnEveryRank) {
  expectEveryRankFails(
      3,
      [](Context& ctx) {
        std::vector<float> x(16, 1.0f);
        AllreduceOptions o;
        o.op = ctx.rank() == 1 ? ReduceOp::kSum : ReduceOp::kAdasum;
        coll::allreduce(ctx, x.data(), x.data(), x.size(), DataType::kFloat32, o);
      },
      "op differs across ranks: adasum on ranks 0,2, sum on rank 1");
}

TEST(AdasumCollective, IntegerTypesAreRefusedOnEveryRank) {
  expectEveryRankFails(
      2,
      [](Context& ctx) {
        std::vector<int32_t> x(4, 1);
        AllreduceOptions o;
        o.op = ReduceOp::kAdasum;
        coll::allreduce(ctx, x.data(), x.data(), x.size(), DataType::kInt32, o);
      },
      "adasum");
}

TEST(AdasumCollective, ReducescatterRefusesAdasumNamingIt) {
  expectEveryRankFails(
      2,
      [](Context& ctx) {
        std::vector<float> x(4, 1.0f), y(2);
        ReducescatterOptions o;
        o.op = ReduceOp::kAdasum;
        coll::reducescatter(ctx, x.data(), y.data(), x.size(), DataType::kFloat32, o);
      },
      "reducescatter: op adasum applies to allreduce only");
}

TEST(AdasumOp, HasANameAndParses) {
  EXPECT_STREQ(reduceOpName(ReduceOp::kAdasum), "adasum");
  EXPECT_EQ(parseReduceOp("adasum"), ReduceOp::kAdasum);
}

}  // namespace
}  // namespace hvd
