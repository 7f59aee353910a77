// The public C++ and C APIs in one process (size 1): lifecycle, errors as status codes with a
// message, bad input (negative counts, unknown types, missing environment).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <string>

#include "common/test_support.h"
#include "hvd/error.hpp"
#include "hvd/hvd.h"
#include "hvd/hvd.hpp"
#include "hvd/hvd_process_sets.h"

namespace {

void setSingleRankEnvironment() { hvd::test::setSingleRankEnvironment("api-test"); }

class Api : public ::testing::Test {
 protected:
  void SetUp() override { setSingleRankEnvironment(); }
  void TearDown() override { hvd_shutdown(); }
};

// An error whose kind travelled (over the wire, between threads) is thrown again as its own
// subclass, with its message.
TEST(Errors, ThrowErrorThrowsTheSubclassOfEachKind) {
  auto kindThrown = [](hvd::ErrorKind kind) {
    try {
      hvd::throwError(kind, "the message");
    } catch (const hvd::InvalidArgumentError& e) {
      EXPECT_STREQ(e.what(), "the message");
      return std::string("invalid argument");
    } catch (const hvd::TimeoutError&) {
      return std::string("timeout");
    } catch (const hvd::PeerError&) {
      return std::string("peer failure");
    } catch (const hvd::BackendError&) {
      return std::string("backend error");
    } catch (const hvd::InternalError& e) {
      EXPECT_EQ(e.kind(), hvd::ErrorKind::kInternal);
      return std::string("internal error");
    }
    return std::string("nothing");
  };
  for (auto kind : {hvd::ErrorKind::kInvalidArgument, hvd::ErrorKind::kTimeout,
                    hvd::ErrorKind::kPeer, hvd::ErrorKind::kBackend, hvd::ErrorKind::kInternal}) {
    EXPECT_EQ(kindThrown(kind), hvd::errorKindName(kind));
  }
}

TEST_F(Api, SingleRankCollectivesThroughTheCApi) {
  ASSERT_EQ(hvd_init(), HVD_OK) << hvd_last_error();
  int rank = -1, size = -1;
  ASSERT_EQ(hvd_rank(&rank), HVD_OK);
  ASSERT_EQ(hvd_size(&size), HVD_OK);
  EXPECT_EQ(rank, 0);
  EXPECT_EQ(size, 1);
  float in[3] = {1.5f, 2.5f, -3.0f}, out[3] = {0, 0, 0};
  ASSERT_EQ(hvd_allreduce(in, out, 3, HVD_FLOAT32, HVD_SUM), HVD_OK) << hvd_last_error();
  EXPECT_EQ(out[0], 1.5f);
  EXPECT_EQ(out[2], -3.0f);
  int64_t counts[1] = {3};
  float gathered[3] = {0, 0, 0};
  ASSERT_EQ(hvd_allgather(in, 3, gathered, counts, HVD_FLOAT32), HVD_OK) << hvd_last_error();
  EXPECT_EQ(gathered[1], 2.5f);
  int16_t shorts[2] = {-300, 32767};
  ASSERT_EQ(hvd_allreduce(shorts, shorts, 2, HVD_INT16, HVD_MAX), HVD_OK) << hvd_last_error();
  EXPECT_EQ(shorts[0], -300);
  EXPECT_EQ(shorts[1], 32767);
  EXPECT_EQ(hvd_barrier(), HVD_OK);
}

TEST_F(Api, NegativeCountsAndUnknownTypesAreInvalidArguments) {
  ASSERT_EQ(hvd_init(), HVD_OK) << hvd_last_error();
  float x = 1;
  EXPECT_EQ(hvd_allreduce(&x, &x, -1, HVD_FLOAT32, HVD_SUM), HVD_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hvd_last_error()).find("count is negative"), std::string::npos)
      << hvd_last_error();
  EXPECT_EQ(hvd_allreduce(&x, &x, 1, 9, HVD_SUM), HVD_ERR_INVALID_ARGUMENT);  // one past int16
  EXPECT_EQ(hvd_allreduce(&x, &x, 1, 42, HVD_SUM), HVD_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hvd_last_error()).find("unknown data type 42"), std::string::npos)
      << hvd_last_error();
  EXPECT_EQ(hvd_allreduce(&x, &x, 1, HVD_FLOAT32, 7), HVD_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hvd_broadcast(&x, 1, HVD_FLOAT32, 5), HVD_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hvd_last_error()).find("root 5"), std::string::npos) << hvd_last_error();
  EXPECT_EQ(hvd_rank(nullptr), HVD_ERR_INVALID_ARGUMENT);
  // Errors did not break the runtime.
  EXPECT_EQ(hvd_allreduce(&x, &x, 1, HVD_FLOAT32, HVD_SUM), HVD_OK);
}

TEST_F(Api, CallsBeforeInitSayHowToFixThem) {
  int rank = 0;
  EXPECT_EQ(hvd_rank(&rank), HVD_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hvd_last_error()).find("hvd::init()"), std::string::npos);
  EXPECT_THROW(hvd::size(), hvd::InvalidArgumentError);
}

TEST_F(Api, MissingOrZeroSizeIsAnErrorNamingTheVariable) {
  setenv("HVD_SIZE", "0", 1);
  EXPECT_EQ(hvd_init(), HVD_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hvd_last_error()).find("HVD_SIZE=0"), std::string::npos)
      << hvd_last_error();
  unsetenv("HVD_SIZE");
  EXPECT_EQ(hvd_init(), HVD_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hvd_last_error()).find("HVD_SIZE is not set"), std::string::npos);
  EXPECT_EQ(hvd_is_initialized(), 0);
}

TEST_F(Api, ShutdownThenInitAgain) {
  ASSERT_EQ(hvd_init(), HVD_OK);
  ASSERT_EQ(hvd_shutdown(), HVD_OK);
  EXPECT_EQ(hvd_is_initialized(), 0);
  ASSERT_EQ(hvd_init(), HVD_OK) << hvd_last_error();
  EXPECT_EQ(hvd_is_initialized(), 1);
  EXPECT_EQ(hvd::rank(), 0);
}

TEST_F(Api, ASingleRankIsHomogeneousAndItsListOfItselfIsTheJob) {
  int homogeneous = -1;
  EXPECT_EQ(hvd_is_homogeneous(&homogeneous), HVD_ERR_INVALID_ARGUMENT);  // before init
  const int members[1] = {0};
  ASSERT_EQ(hvd_init_members(members, 1, nullptr, nullptr, 0, 0), HVD_OK) << hvd_last_error();
  ASSERT_EQ(hvd_is_homogeneous(&homogeneous), HVD_OK) << hvd_last_error();
  EXPECT_EQ(homogeneous, 1);
  EXPECT_TRUE(hvd::isHomogeneous());
  EXPECT_EQ(hvd::size(), 1);
  ASSERT_EQ(hvd_shutdown(), HVD_OK);
  const int others[1] = {1};
  EXPECT_EQ(hvd_init_members(others, 1, nullptr, nullptr, 0, 0), HVD_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hvd_last_error()).find("rank 1 is not in the launched job"),
            std::string::npos)
      << hvd_last_error();
  EXPECT_EQ(hvd_is_initialized(), 0);
}

TEST(Types, NamesParseAndUnknownNamesAreListed) {
  EXPECT_EQ(hvd::parseDataType("float"), hvd::DataType::kFloat32);
  EXPECT_EQ(hvd::parseDataType("bfloat16"), hvd::DataType::kBFloat16);
  EXPECT_EQ(hvd::parseDataType("int16"), hvd::DataType::kInt16);
  EXPECT_EQ(hvd::parseDataType("short"), hvd::DataType::kInt16);
  EXPECT_STREQ(hvd::dataTypeName(hvd::DataType::kInt16), "int16");
  EXPECT_EQ(hvd::dataTypeSize(hvd::DataType::kInt16), 2u);
  // Appended: the values before it are wire and C ABI values and keep their places.
  EXPECT_EQ(static_cast<int>(hvd::DataType::kInt16), HVD_INT16);
  EXPECT_EQ(HVD_INT16, 8);
  EXPECT_EQ(HVD_FLOAT64, 7);
  EXPECT_EQ(hvd::kNumDataTypes, 9);
  EXPECT_EQ(hvd::parseReduceOp("avg"), hvd::ReduceOp::kAverage);
  try {
    hvd::parseDataType("complex64");
    FAIL();
  } catch (const hvd::InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("'complex64'"), std::string::npos);
  }
}

}  // namespace
