// Process sets in the C ABI (hvd/hvd_process_sets.h) in one process of size 1: the queries and
// their capacity rule, the refusals (a set that does not exist, adding without dynamic mode, a
// duplicate), hvd_init_process_sets, the options struct's new field and a shorter struct that
// lacks it. Sets over several ranks need several processes: tests/mp/process_sets_mp_test.cc
// and tests/python/test_process_sets.py go through these same calls.
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "common/test_support.h"
#include "hvd/hvd.h"
#include "hvd/hvd_engine.h"
#include "hvd/hvd_process_sets.h"

namespace {

class CProcessSetsApi : public ::testing::Test {
 protected:
  void SetUp() override { hvd::test::setSingleRankEnvironment("c-process-sets-api-test"); }
  void TearDown() override { hvd_shutdown(); }
};

std::string lastError() { return hvd_last_error(); }

TEST_F(CProcessSetsApi, TheGlobalSetIsDescribedAndUnknownIdsAreRefusedByName) {
  ASSERT_EQ(hvd_init(), HVD_OK) << hvd_last_error();
  int count = -1;
  ASSERT_EQ(hvd_process_set_ids(nullptr, 0, &count), HVD_OK);
  EXPECT_EQ(count, 1);
  int ids[4] = {-1, -1, -1, -1};
  ASSERT_EQ(hvd_process_set_ids(ids, 4, &count), HVD_OK);
  EXPECT_EQ(ids[0], 0);
  EXPECT_EQ(ids[1], -1);  // only what exists is written
  int ranks[2] = {-1, -1};
  ASSERT_EQ(hvd_process_set_ranks(0, ranks, 2, &count), HVD_OK);
  EXPECT_EQ(count, 1);
  EXPECT_EQ(ranks[0], 0);
  int value = -1;
  ASSERT_EQ(hvd_process_set_size(0, &value), HVD_OK);
  EXPECT_EQ(value, 1);
  ASSERT_EQ(hvd_process_set_rank(0, &value), HVD_OK);
  EXPECT_EQ(value, 0);
  ASSERT_EQ(hvd_process_set_included(0, &value), HVD_OK);
  EXPECT_EQ(value, 1);

  EXPECT_EQ(hvd_process_set_size(5, &value), HVD_ERR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("there is no process set 5"), std::string::npos) << lastError();
  EXPECT_EQ(hvd_process_set_ranks(0, nullptr, 1, &count), HVD_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hvd_process_set_size(0, nullptr), HVD_ERR_INVALID_ARGUMENT);

  // An op on a set that does not exist is refused at submit, naming it.
  hvd_op_options o;
  hvd_op_options_init(&o);
  EXPECT_EQ(o.process_set, 0);
  o.process_set = 5;
  float x = 1;
  int64_t shape[1] = {1};
  hvd_handle h = nullptr;
  EXPECT_EQ(hvd_allreduce_async("x", &x, &x, shape, 1, HVD_FLOAT32, &o, &h),
            HVD_ERR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("allreduce 'x': there is no process set 5"), std::string::npos)
      << lastError();
  EXPECT_EQ(h, nullptr);
  EXPECT_EQ(hvd_process_set_barrier_async(5, &h), HVD_ERR_INVALID_ARGUMENT);

  // A binding whose struct ends before process_set runs on the global set, whatever follows.
  o.struct_size = offsetof(hvd_op_options, process_set);
  o.op = HVD_SUM;
  ASSERT_EQ(hvd_allreduce_async("short", &x, &x, shape, 1, HVD_FLOAT32, &o, &h), HVD_OK)
      << hvd_last_error();
  ASSERT_EQ(hvd_handle_wait(h), HVD_OK) << hvd_last_error();
  hvd_handle_release(h);
  ASSERT_EQ(hvd_process_set_barrier_async(0, &h), HVD_OK) << hvd_last_error();
  ASSERT_EQ(hvd_handle_wait(h), HVD_OK) << hvd_last_error();
  hvd_handle_release(h);
}

TEST_F(CProcessSetsApi, AddingNeedsDynamicModeAndADuplicateIsRefusedNamingTheSet) {
  ASSERT_EQ(hvd_init(), HVD_OK) << hvd_last_error();
  const int zero[1] = {0};
  int id = -1;
  EXPECT_EQ(hvd_add_process_set(zero, 1, &id), HVD_ERR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("HVD_DYNAMIC_PROCESS_SETS=1"), std::string::npos) << lastError();
  int removed = -1;
  EXPECT_EQ(hvd_remove_process_set(1, &removed), HVD_ERR_INVALID_ARGUMENT);
  hvd_shutdown();

  // hvd_init_process_sets: [0] is every rank here, so it is the global set; dynamic mode on.
  const int sizes[1] = {1};
  ASSERT_EQ(hvd_init_process_sets(zero, sizes, 1, 1), HVD_OK) << hvd_last_error();
  EXPECT_EQ(hvd_add_process_set(zero, 1, &id), HVD_ERR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("exists already: the global process set"), std::string::npos)
      << lastError();
  const int outside[1] = {1};
  EXPECT_EQ(hvd_add_process_set(outside, 1, &id), HVD_ERR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("rank 1 is not a rank of this job (0..0)"), std::string::npos)
      << lastError();
  ASSERT_EQ(hvd_remove_process_set(0, &removed), HVD_OK);
  EXPECT_EQ(removed, 0);  // never the global set
  ASSERT_EQ(hvd_remove_process_set(9, &removed), HVD_OK);
  EXPECT_EQ(removed, 0);
  EXPECT_EQ(hvd_init_process_sets(zero, sizes, 1, 0), HVD_OK);  // already initialised: a no-op
  EXPECT_EQ(hvd_init_process_sets(zero, nullptr, 1, 0), HVD_ERR_INVALID_ARGUMENT);
}

TEST_F(CProcessSetsApi, InitRefusesASetWithARankOutsideTheJob) {
  const int ranks[2] = {0, 3};
  const int sizes[1] = {2};
  EXPECT_EQ(hvd_init_process_sets(ranks, sizes, 1, 0), HVD_ERR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("rank 3 is not a rank of this job"), std::string::npos) << lastError();
  EXPECT_EQ(hvd_is_initialized(), 0);
}

}  // namespace
