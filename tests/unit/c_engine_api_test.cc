// The engine's C ABI (hvd/hvd_engine.h) in one process of size 1: handles (poll, wait,
// wait-for, release), engine-allocated outputs with shapes and received splits, the options
// struct's size rule, errors at submit told apart from errors at wait, stats, the timeline,
// and many threads submitting and waiting at once (this test also runs under TSan).
// Disagreements across ranks fail at wait; those need several processes and are covered by the
// hvd.torch suite (tests/python/test_errors.py), which goes through these same calls.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/test_support.h"
#include "hvd/hvd.h"
#include "hvd/hvd_engine.h"

namespace {

class CEngineApi : public ::testing::Test {
 protected:
  void SetUp() override {
    hvd::test::setSingleRankEnvironment("c-engine-api-test");
    ASSERT_EQ(hvd_init(), HVD_OK) << hvd_last_error();
  }
  void TearDown() override { hvd_shutdown(); }
};

hvd_op_options sum() {
  hvd_op_options o;
  hvd_op_options_init(&o);
  o.op = HVD_SUM;
  return o;
}

std::vector<int64_t> shapeOf(hvd_handle h) {
  int ndim = -1;
  EXPECT_EQ(hvd_handle_output_shape(h, nullptr, 0, &ndim), HVD_OK) << hvd_last_error();
  std::vector<int64_t> dims(static_cast<size_t>(ndim));
  EXPECT_EQ(hvd_handle_output_shape(h, dims.data(), ndim, &ndim), HVD_OK);
  return dims;
}

TEST_F(CEngineApi, OptionsDefaultsAndAShorterStructKeepsTheRestAtTheirDefaults) {
  hvd_op_options o;
  std::memset(&o, 0x7f, sizeof o);
  hvd_op_options_init(&o);
  EXPECT_EQ(o.struct_size, sizeof(hvd_op_options));
  EXPECT_EQ(o.op, HVD_AVERAGE);
  EXPECT_EQ(o.prescale_factor, 1.0);
  EXPECT_EQ(o.postscale_factor, 1.0);
  EXPECT_EQ(o.fp16_compression, 0);
  EXPECT_EQ(o.root, 0);
  EXPECT_EQ(o.device, -1);
  EXPECT_EQ(o.stream, nullptr);

  // A binding built when the struct ended after `op`: the factors it does not know stay 1,
  // whatever bytes follow in its (shorter) struct.
  hvd_op_options shortOne = o;
  shortOne.op = HVD_SUM;
  shortOne.prescale_factor = 100.0;  // beyond struct_size: must be ignored
  shortOne.struct_size = offsetof(hvd_op_options, op) + sizeof(int);
  float in[2] = {1.5f, 2.0f}, out[2] = {0, 0};
  int64_t shape[1] = {2};
  hvd_handle h = nullptr;
  ASSERT_EQ(hvd_allreduce_async("short.options", in, out, shape, 1, HVD_FLOAT32, &shortOne, &h),
            HVD_OK)
      << hvd_last_error();
  ASSERT_EQ(hvd_handle_wait(h), HVD_OK) << hvd_last_error();
  EXPECT_EQ(out[0], 1.5f);
  EXPECT_EQ(out[1], 2.0f);
  hvd_handle_release(h);

  shortOne.struct_size = 1;  // cannot even hold struct_size: not initialised
  EXPECT_EQ(hvd_allreduce_async("bad.options", in, out, shape, 1, HVD_FLOAT32, &shortOne, &h),
            HVD_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hvd_last_error()).find("hvd_op_options_init"), std::string::npos);
  EXPECT_EQ(h, nullptr);
}

TEST_F(CEngineApi, AllreduceHandlesPollWaitAndRelease) {
  double in[3] = {1, 2, 3}, out[3] = {0, 0, 0};
  int64_t shape[1] = {3};
  hvd_op_options o = sum();
  o.prescale_factor = 2.0;
  o.postscale_factor = 0.25;
  hvd_handle h = nullptr;
  ASSERT_EQ(hvd_allreduce_async("scaled", in, out, shape, 1, HVD_FLOAT64, &o, &h), HVD_OK)
      << hvd_last_error();
  ASSERT_NE(h, nullptr);
  EXPECT_STREQ(hvd_handle_name(h), "scaled");
  ASSERT_EQ(hvd_handle_wait(h), HVD_OK) << hvd_last_error();
  EXPECT_EQ(hvd_handle_poll(h), 1);
  EXPECT_EQ(hvd_handle_wait(h), HVD_OK);  // waiting again is allowed
  EXPECT_EQ(out[0], 0.5);
  EXPECT_EQ(out[2], 1.5);
  EXPECT_EQ(in[2], 3.0);  // out of place
  hvd_handle_release(h);
  hvd_handle_release(nullptr);  // ignored
  EXPECT_EQ(hvd_handle_poll(nullptr), 0);

  // wait_for on a finished op says done; its timeout must not be negative.
  ASSERT_EQ(hvd_allreduce_async("waited.for", in, in, shape, 1, HVD_FLOAT64, nullptr, &h), HVD_OK);
  int done = -1;
  for (int i = 0; i < 100 && done != 1; ++i) {
    ASSERT_EQ(hvd_handle_wait_for(h, 100, &done), HVD_OK) << hvd_last_error();
  }
  EXPECT_EQ(done, 1);
  EXPECT_EQ(hvd_handle_wait_for(h, -1, &done), HVD_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(in[0], 1.0);  // average of one rank, in place
  hvd_handle_release(h);
}

TEST_F(CEngineApi, GroupedAllreduceFillsEveryMember) {
  int32_t a[2] = {1, 2}, b[3] = {3, 4, 5}, oa[2] = {}, ob[3] = {};
  const char* names[2] = {"group.a", "group.b"};
  const void* ins[2] = {a, b};
  void* outs[2] = {oa, ob};
  int64_t sa[1] = {2}, sb[2] = {1, 3};
  const int64_t* shapes[2] = {sa, sb};
  int ndims[2] = {1, 2};
  hvd_op_options o = sum();
  hvd_handle h = nullptr;
  ASSERT_EQ(hvd_grouped_allreduce_async(2, names, ins, outs, shapes, ndims, HVD_INT32, &o, &h),
            HVD_OK)
      << hvd_last_error();
  ASSERT_EQ(hvd_handle_wait(h), HVD_OK) << hvd_last_error();
  EXPECT_EQ(oa[1], 2);
  EXPECT_EQ(ob[2], 5);
  hvd_handle_release(h);
  EXPECT_EQ(hvd_grouped_allreduce_async(0, names, ins, outs, shapes, ndims, HVD_INT32, &o, &h),
            HVD_ERR_INVALID_ARGUMENT);
  // Two members of one name in one group: refused at submit.
  const char* twice[2] = {"same", "same"};
  EXPECT_EQ(hvd_grouped_allreduce_async(2, twice, ins, outs, shapes, ndims, HVD_INT32, &o, &h),
            HVD_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hvd_last_error()).find("already in flight"), std::string::npos)
      << hvd_last_error();
}

TEST_F(CEngineApi, EngineAllocatedOutputsShapesAndReceivedSplits) {
  int16_t rows[6] = {1, -2, 3, -4, 5, -6};
  int64_t shape[2] = {3, 2};
  hvd_handle h = nullptr;
  ASSERT_EQ(hvd_allgather_async("gathered", rows, shape, 2, HVD_INT16, nullptr, &h), HVD_OK)
      << hvd_last_error();
  ASSERT_EQ(hvd_handle_wait(h), HVD_OK) << hvd_last_error();
  const void* data = nullptr;
  int64_t bytes = -1;
  ASSERT_EQ(hvd_handle_output(h, &data, &bytes), HVD_OK) << hvd_last_error();
  ASSERT_EQ(bytes, 12);
  EXPECT_EQ(std::memcmp(data, rows, 12), 0);
  EXPECT_EQ(shapeOf(h), (std::vector<int64_t>{3, 2}));
  int64_t oneDim = 0;
  int ndim = 0;
  ASSERT_EQ(hvd_handle_output_shape(h, &oneDim, 1, &ndim), HVD_OK);  // capacity below ndim
  EXPECT_EQ(ndim, 2);
  EXPECT_EQ(oneDim, 3);
  hvd_handle_release(h);

  float send[4] = {1, 2, 3, 4};
  int64_t rowsShape[2] = {2, 2};
  int64_t splits[1] = {2};
  ASSERT_EQ(hvd_alltoall_async("a2a", send, rowsShape, 2, splits, 1, HVD_FLOAT32, nullptr, &h),
            HVD_OK)
      << hvd_last_error();
  ASSERT_EQ(hvd_handle_wait(h), HVD_OK) << hvd_last_error();
  int64_t received[4] = {-1, -1, -1, -1};
  int count = 0;
  ASSERT_EQ(hvd_handle_received_splits(h, received, 4, &count), HVD_OK);
  EXPECT_EQ(count, 1);
  EXPECT_EQ(received[0], 2);
  EXPECT_EQ(received[1], -1);
  ASSERT_EQ(hvd_handle_output(h, &data, &bytes), HVD_OK);
  EXPECT_EQ(bytes, 16);
  EXPECT_EQ(static_cast<const float*>(data)[3], 4.0f);
  hvd_handle_release(h);

  int64_t big[1] = {5};
  double values[5] = {1, 2, 3, 4, 5};
  hvd_op_options o = sum();
  ASSERT_EQ(hvd_reducescatter_async("scattered", values, big, 1, HVD_FLOAT64, &o, &h), HVD_OK);
  ASSERT_EQ(hvd_handle_wait(h), HVD_OK) << hvd_last_error();
  EXPECT_EQ(shapeOf(h), (std::vector<int64_t>{5}));
  hvd_handle_release(h);

  o.root = 0;
  ASSERT_EQ(hvd_broadcast_async("bcast", values, big, 1, HVD_FLOAT64, &o, &h), HVD_OK);
  ASSERT_EQ(hvd_handle_wait(h), HVD_OK) << hvd_last_error();
  EXPECT_EQ(values[4], 5.0);
  hvd_handle_release(h);

  ASSERT_EQ(hvd_barrier_async(&h), HVD_OK) << hvd_last_error();
  ASSERT_EQ(hvd_handle_wait(h), HVD_OK) << hvd_last_error();
  hvd_handle_release(h);
  int last = -1;
  ASSERT_EQ(hvd_join(&last), HVD_OK) << hvd_last_error();
  EXPECT_EQ(last, 0);
}

TEST_F(CEngineApi, SubmitErrorsAreInvalidArgumentsWithTheCppMessage) {
  float x[2] = {1, 2};
  int64_t shape[1] = {2};
  hvd_handle h = reinterpret_cast<hvd_handle>(0x1);
  EXPECT_EQ(hvd_allreduce_async(nullptr, x, x, shape, 1, HVD_FLOAT32, nullptr, &h),
            HVD_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(h, nullptr);  // never a dangling value on failure
  EXPECT_EQ(hvd_allreduce_async("", x, x, shape, 1, HVD_FLOAT32, nullptr, &h),
            HVD_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hvd_last_error()).find("name is empty"), std::string::npos);
  EXPECT_EQ(hvd_allreduce_async("n", x, x, shape, -1, HVD_FLOAT32, nullptr, &h),
            HVD_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hvd_allreduce_async("n", x, x, nullptr, 1, HVD_FLOAT32, nullptr, &h),
            HVD_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hvd_allreduce_async("n", x, x, shape, 1, 42, nullptr, &h), HVD_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hvd_last_error()).find("unknown data type 42"), std::string::npos);
  hvd_op_options o = sum();
  o.op = 17;
  EXPECT_EQ(hvd_allreduce_async("n", x, x, shape, 1, HVD_FLOAT32, &o, &h),
            HVD_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hvd_allreduce_async("n", x, x, shape, 1, HVD_FLOAT32, nullptr, nullptr),
            HVD_ERR_INVALID_ARGUMENT);
  int64_t negative[1] = {-3};
  EXPECT_EQ(hvd_allreduce_async("n", x, x, negative, 1, HVD_FLOAT32, nullptr, &h),
            HVD_ERR_INVALID_ARGUMENT);
  int32_t ints[2] = {1, 2};
  o = sum();
  o.fp16_compression = 1;
  EXPECT_EQ(hvd_allreduce_async("n", ints, ints, shape, 1, HVD_INT32, &o, &h),
            HVD_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hvd_last_error()).find("floating-point"), std::string::npos);
  int64_t badSplits[1] = {3};
  int64_t rows[1] = {2};
  EXPECT_EQ(hvd_alltoall_async("n", x, rows, 1, badSplits, 1, HVD_FLOAT32, nullptr, &h),
            HVD_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hvd_last_error()).find("splits"), std::string::npos);
  // Results of a handle that failed or is missing are errors, never a crash.
  EXPECT_EQ(hvd_handle_wait(nullptr), HVD_ERR_INVALID_ARGUMENT);
  const void* data = nullptr;
  int64_t bytes = 0;
  EXPECT_EQ(hvd_handle_output(nullptr, &data, &bytes), HVD_ERR_INVALID_ARGUMENT);
  // After every refusal the engine still works.
  ASSERT_EQ(hvd_allreduce_async("still.fine", x, x, shape, 1, HVD_FLOAT32, nullptr, &h), HVD_OK);
  EXPECT_EQ(hvd_handle_wait(h), HVD_OK);
  EXPECT_STREQ(hvd_last_error(), "");
  hvd_handle_release(h);
}

TEST_F(CEngineApi, AdasumAllreducesFloatsAndIsRefusedWhereItDoesNotApply) {
  // One rank: Adasum of one vector is the vector.
  double x[3] = {1.5, -2, 0.25};
  int64_t shape[1] = {3};
  hvd_op_options o = sum();
  o.op = HVD_ADASUM;
  hvd_handle h = nullptr;
  ASSERT_EQ(hvd_allreduce_async("adasum", x, x, shape, 1, HVD_FLOAT64, &o, &h), HVD_OK)
      << hvd_last_error();
  EXPECT_EQ(hvd_handle_wait(h), HVD_OK) << hvd_last_error();
  hvd_handle_release(h);
  EXPECT_EQ(x[0], 1.5);
  EXPECT_EQ(x[1], -2);
  EXPECT_EQ(hvd_allreduce(x, x, 3, HVD_FLOAT64, HVD_ADASUM), HVD_OK) << hvd_last_error();
  EXPECT_EQ(x[2], 0.25);
  const std::vector<std::pair<std::string, std::function<hvd_status()>>> refused = {
      {"op adasum reduces float16, bfloat16, float32 and float64, not int32",
       [&] {
         int32_t ints[3] = {1, 2, 3};
         return hvd_allreduce_async("ints", ints, ints, shape, 1, HVD_INT32, &o, &h);
       }},
      {"reducescatter 'rs': op adasum applies to allreduce only",
       [&] { return hvd_reducescatter_async("rs", x, shape, 1, HVD_FLOAT64, &o, &h); }},
      {"allgather: op adasum does not apply",
       [&] { return hvd_allgather_async("ag", x, shape, 1, HVD_FLOAT64, &o, &h); }},
      {"broadcast: op adasum does not apply",
       [&] { return hvd_broadcast_async("bc", x, shape, 1, HVD_FLOAT64, &o, &h); }},
      {"reducescatter: op adasum applies to allreduce only",
       [&] {
         double out[3];
         return hvd_reducescatter(x, out, 3, HVD_FLOAT64, HVD_ADASUM, 1);
       }},
  };
  for (const auto& [message, call] : refused) {
    EXPECT_EQ(call(), HVD_ERR_INVALID_ARGUMENT) << message;
    EXPECT_NE(std::string(hvd_last_error()).find(message), std::string::npos) << hvd_last_error();
  }
}

TEST_F(CEngineApi, BeforeInitAndAfterShutdownSubmitsAreRefusedAndPendingHandlesStayValid) {
  float x[1] = {1};
  int64_t shape[1] = {1};
  hvd_handle h = nullptr;
  ASSERT_EQ(hvd_allreduce_async("kept", x, x, shape, 1, HVD_FLOAT32, nullptr, &h), HVD_OK);
  ASSERT_EQ(hvd_shutdown(), HVD_OK);
  // The handle outlives the runtime: it is done (finished or failed by the shutdown).
  EXPECT_EQ(hvd_handle_poll(h), 1);
  hvd_handle_release(h);
  EXPECT_EQ(hvd_allreduce_async("late", x, x, shape, 1, HVD_FLOAT32, nullptr, &h),
            HVD_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hvd_last_error()).find("not initialised"), std::string::npos);
  hvd_engine_stats stats{};
  stats.struct_size = sizeof stats;
  EXPECT_EQ(hvd_get_engine_stats(&stats), HVD_ERR_INVALID_ARGUMENT);
  int last = 0;
  EXPECT_EQ(hvd_join(&last), HVD_ERR_INVALID_ARGUMENT);
}

TEST_F(CEngineApi, StatsCountBytesAndAShorterStructGetsWhatFits) {
  hvd_engine_stats before{};
  before.struct_size = sizeof before;
  ASSERT_EQ(hvd_get_engine_stats(&before), HVD_OK) << hvd_last_error();
  float x[100] = {};
  int64_t shape[1] = {100};
  hvd_op_options o = sum();
  hvd_handle h = nullptr;
  ASSERT_EQ(hvd_allreduce_async("counted", x, x, shape, 1, HVD_FLOAT32, &o, &h), HVD_OK);
  ASSERT_EQ(hvd_handle_wait(h), HVD_OK);
  hvd_handle_release(h);
  o.fp16_compression = 1;
  ASSERT_EQ(hvd_allreduce_async("counted.fp16", x, x, shape, 1, HVD_FLOAT32, &o, &h), HVD_OK);
  ASSERT_EQ(hvd_handle_wait(h), HVD_OK);
  hvd_handle_release(h);
  hvd_engine_stats after{};
  after.struct_size = sizeof after;
  ASSERT_EQ(hvd_get_engine_stats(&after), HVD_OK);
  EXPECT_EQ(after.bytes - before.bytes, 400u + 200u);
  EXPECT_EQ(after.responses - before.responses, 2u);

  hvd_engine_stats shortOne{};
  shortOne.struct_size = offsetof(hvd_engine_stats, negotiations);  // struct_size + cycles
  shortOne.negotiations = 12345;
  ASSERT_EQ(hvd_get_engine_stats(&shortOne), HVD_OK);
  EXPECT_GE(shortOne.cycles, after.cycles);
  EXPECT_EQ(shortOne.negotiations, 12345u);  // beyond the caller's struct: untouched
  EXPECT_EQ(shortOne.struct_size, offsetof(hvd_engine_stats, negotiations));
}

TEST_F(CEngineApi, TimelineStartAndStopWriteAValidFileWithTheOps) {
  hvd::test::TempDir dir;
  const std::string path = (dir.path() / "timeline.json").string();
  ASSERT_EQ(hvd_start_timeline(path.c_str(), 1), HVD_OK) << hvd_last_error();
  float x[4] = {1, 2, 3, 4};
  int64_t shape[1] = {4};
  hvd_handle h = nullptr;
  ASSERT_EQ(hvd_allreduce_async("in.the.timeline", x, x, shape, 1, HVD_FLOAT32, nullptr, &h),
            HVD_OK);
  ASSERT_EQ(hvd_handle_wait(h), HVD_OK);
  hvd_handle_release(h);
  ASSERT_EQ(hvd_stop_timeline(), HVD_OK) << hvd_last_error();
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string trace = text.str();
  EXPECT_NE(trace.find("in.the.timeline"), std::string::npos) << trace;
  EXPECT_NE(trace.find("start_time_since_epoch_in_micros"), std::string::npos);
  EXPECT_EQ(trace.back() == '\n' ? trace[trace.size() - 2] : trace.back(), ']');
  EXPECT_EQ(hvd_start_timeline(nullptr, 0), HVD_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hvd_start_timeline("", 0), HVD_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hvd_stop_timeline(), HVD_OK);  // none runs: a no-op
}

// Submitters on many threads, each polling and waiting on its own handles while the others
// submit: every result exact, every handle released once (TSan checks the rest).
TEST_F(CEngineApi, ManyThreadsSubmitPollAndWaitAtOnce) {
  constexpr int kThreads = 6;
  constexpr int kOps = 150;
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &failures] {
      std::vector<std::vector<int64_t>> buffers(kOps, std::vector<int64_t>(8));
      std::vector<hvd_handle> handles(kOps, nullptr);
      hvd_op_options o = sum();
      for (int i = 0; i < kOps; ++i) {
        for (int k = 0; k < 8; ++k) buffers[i][k] = t * 1000 + i * 10 + k;
        const std::string name = "thread" + std::to_string(t) + ".op" + std::to_string(i);
        int64_t shape[1] = {8};
        if (hvd_allreduce_async(name.c_str(), buffers[i].data(), buffers[i].data(), shape, 1,
                                HVD_INT64, &o, &handles[i]) != HVD_OK) {
          ++failures[t];
        }
        if (i % 3 == 0) hvd_handle_poll(handles[i]);
      }
      for (int i = 0; i < kOps; ++i) {
        if (hvd_handle_wait(handles[i]) != HVD_OK) ++failures[t];
        for (int k = 0; k < 8; ++k) {
          if (buffers[i][k] != t * 1000 + i * 10 + k) ++failures[t];
        }
        hvd_handle_release(handles[i]);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
}

}  // namespace
