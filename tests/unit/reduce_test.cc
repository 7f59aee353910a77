// Reduction kernels and the float16/bfloat16 conversions they rely on.
#include "collectives/reduce.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "common/half.h"

namespace hvd {
namespace {

TEST(Half, RoundTripsEveryFiniteHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t half = static_cast<uint16_t>(h);
    const float f = halfToFloat(half);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(f))));
      continue;
    }
    ASSERT_EQ(floatToHalf(f), half) << std::hex << h;
  }
}

TEST(Half, RoundsToNearestEven) {
  EXPECT_EQ(floatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00);               // halfway to the next: rounds to inf
  EXPECT_EQ(floatToHalf(1.0f + 1.0f / 2048), 0x3c00);     // tie, even stays
  EXPECT_EQ(floatToHalf(1.0f + 3.0f / 2048), 0x3c02);     // tie, odd rounds up
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -25)), 0x0000);  // tie to even zero
}

TEST(BFloat16, RoundsToNearestEvenAndKeepsNaN) {
  EXPECT_EQ(floatToBfloat16(1.0f), 0x3f80);
  EXPECT_EQ(bfloat16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(floatToBfloat16(1.0f + 1.0f / 256), 0x3f80);
  EXPECT_EQ(floatToBfloat16(1.0f + 3.0f / 256), 0x3f82);
  EXPECT_TRUE(
      std::isnan(bfloat16ToFloat(floatToBfloat16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(Reduce, EveryOpOnFloat32) {
  std::vector<float> a{1, -2, 3, 4}, b{2, 5, -1, 0.5f}, out(4);
  coll::reduceTo(ReduceOp::kSum, DataType::kFloat32, out.data(), a.data(), b.data(), 4);
  EXPECT_EQ(out, (std::vector<float>{3, 3, 2, 4.5f}));
  coll::reduceTo(ReduceOp::kMin, DataType::kFloat32, out.data(), a.data(), b.data(), 4);
  EXPECT_EQ(out, (std::vector<float>{1, -2, -1, 0.5f}));
  coll::reduceTo(ReduceOp::kMax, DataType::kFloat32, out.data(), a.data(), b.data(), 4);
  EXPECT_EQ(out, (std::vector<float>{2, 5, 3, 4}));
  coll::reduceTo(ReduceOp::kProduct, DataType::kFloat32, out.data(), a.data(), b.data(), 4);
  EXPECT_EQ(out, (std::vector<float>{2, -10, -3, 2}));
  coll::reduceInto(ReduceOp::kSum, DataType::kFloat32, a.data(), b.data(), 4);
  EXPECT_EQ(a, (std::vector<float>{3, 3, 2, 4.5f}));
  coll::finishAverage(DataType::kFloat32, a.data(), 4, 2);
  EXPECT_EQ(a, (std::vector<float>{1.5f, 1.5f, 1, 2.25f}));
}

TEST(Reduce, IntegersWrapAndAverageTruncates) {
  std::vector<int8_t> a{120, -7}, b{10, 2};
  coll::reduceInto(ReduceOp::kSum, DataType::kInt8, a.data(), b.data(), 2);
  EXPECT_EQ(a[0], static_cast<int8_t>(-126));  // two's complement wrap, no UB
  EXPECT_EQ(a[1], -5);
  coll::finishAverage(DataType::kInt8, a.data() + 1, 1, 2);
  EXPECT_EQ(a[1], -2);  // truncation toward zero
}

TEST(Reduce, AnAverageOverMoreRanksThanTheTypeHoldsDividesByTheRealCount) {
  // 256 ranks are 0 as an int8 or a uint8 (a division by zero: SIGFPE) and 70000 are 4464 as
  // an int16; the division is by the rank count itself.
  std::vector<int8_t> a{-127, 127, 100, -1};
  coll::finishAverage(DataType::kInt8, a.data(), 2, 128);
  EXPECT_EQ(a[0], 0);
  EXPECT_EQ(a[1], 0);
  coll::finishAverage(DataType::kInt8, a.data() + 2, 2, 256);
  EXPECT_EQ(a[2], 0);
  EXPECT_EQ(a[3], 0);
  std::vector<uint8_t> u{255, 200};
  coll::finishAverage(DataType::kUInt8, u.data(), 2, 100);
  EXPECT_EQ(u, (std::vector<uint8_t>{2, 2}));
  coll::finishAverage(DataType::kUInt8, u.data(), 2, 256);
  EXPECT_EQ(u, (std::vector<uint8_t>{0, 0}));
  std::vector<int16_t> w{-32768, 30000};
  coll::finishAverage(DataType::kInt16, w.data(), 2, 70000);
  EXPECT_EQ(w, (std::vector<int16_t>{0, 0}));
  std::vector<int16_t> v{-32768, 30000};
  coll::finishAverage(DataType::kInt16, v.data(), 2, 300);
  EXPECT_EQ(v, (std::vector<int16_t>{-109, 100}));
}

TEST(Reduce, EveryOpOnInt16WrapsLikeTheHardwareAndAverageTruncates) {
  std::vector<int16_t> a{32000, -32000, 300, -7, 181}, b{1000, -1000, -200, 3, 182}, out(5);
  coll::reduceTo(ReduceOp::kSum, DataType::kInt16, out.data(), a.data(), b.data(), 5);
  EXPECT_EQ(out, (std::vector<int16_t>{-32536, 32536, 100, -4, 363}));  // 33000 - 65536, ...
  coll::reduceTo(ReduceOp::kMin, DataType::kInt16, out.data(), a.data(), b.data(), 5);
  EXPECT_EQ(out, (std::vector<int16_t>{1000, -32000, -200, -7, 181}));
  coll::reduceTo(ReduceOp::kMax, DataType::kInt16, out.data(), a.data(), b.data(), 5);
  EXPECT_EQ(out, (std::vector<int16_t>{32000, -1000, 300, 3, 182}));
  coll::reduceTo(ReduceOp::kProduct, DataType::kInt16, out.data(), a.data(), b.data(), 5);
  // 32000000 mod 2^16 = 18432; -60000 + 65536; 181 * 182 = 32942 - 65536.
  EXPECT_EQ(out, (std::vector<int16_t>{18432, 18432, 5536, -21, -32594}));
  coll::reduceInto(ReduceOp::kAverage, DataType::kInt16, a.data(), b.data(), 5);
  coll::finishAverage(DataType::kInt16, a.data(), 5, 2);
  EXPECT_EQ(a, (std::vector<int16_t>{-16268, 16268, 50, -2, 181}));  // the wrapped sum / 2
}

TEST(Reduce, Int16ProductOfTheExtremesHasNoSignedOverflow) {
  // The product runs on the unsigned bits: -1 * -1 is 65535 * 65535, which overflows the int
  // that uint16 promotes to unless the kernel widens it to unsigned (UBSan checks this).
  std::vector<int16_t> a{-32768, -1, 32767, -1}, b{-32768, -32768, 32767, -1};
  coll::reduceInto(ReduceOp::kProduct, DataType::kInt16, a.data(), b.data(), 4);
  EXPECT_EQ(a, (std::vector<int16_t>{0, -32768, 1, 1}));  // 2^30, 2^15, (2^15-1)^2 mod 2^16, 1
}

TEST(Reduce, HalfAccumulatesInFloatAndRoundsOnce) {
  std::vector<uint16_t> a{floatToHalf(2048.0f)}, b{floatToHalf(1.0f)};
  coll::reduceInto(ReduceOp::kSum, DataType::kFloat16, a.data(), b.data(), 1);
  EXPECT_EQ(halfToFloat(a[0]), 2048.0f);  // 2049 is a tie between 2048 and 2050: even wins
}

}  // namespace
}  // namespace hvd
