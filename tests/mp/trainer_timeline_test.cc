// The engine's timeline from a real job: two steps of the example trainer
// under `hvdrun --timeline-filename` leave a trace that parses as JSON and holds, on the row of a
// known parameter, its NEGOTIATE_ALLREDUCE and ALLREDUCE phases once per step, with the fusion
// copies nested in the collective.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "common/chrome_trace.h"
#include "common/test_support.h"

namespace hvd {
namespace {

using namespace std::chrono_literals;

TEST(TrainerTimeline, TwoStepsLeaveAValidTraceWithNegotiateAndAllreducePerTensor) {
  test::TempDir dir("hvd-timeline");
  const std::string trace = dir.file("timeline.json");
  const test::ProcessResult r =
      test::runProcess({HVDRUN_PATH, "-np", "2", "--timeline-filename", trace, HVD_TRAIN_PATH,
                        "--epochs", "1", "--max-steps", "2"},
                       120s);
  ASSERT_FALSE(r.timedOut) << r.out << r.err;
  ASSERT_EQ(r.status, 0) << r.out << r.err;

  const test::Trace t = test::checkTrace(trace);
  ASSERT_FALSE(testing::Test::HasFailure()) << "the trace is not a valid Chrome trace";
  for (const std::string tensor : {"fc1.weight", "fc3.bias"}) {
    ASSERT_EQ(t.pidOf.count(tensor), 1u) << tensor << " has no row in " << trace;
    EXPECT_EQ(test::countEvents(t, tensor, "B", "NEGOTIATE_ALLREDUCE"), 2) << tensor;
    EXPECT_EQ(test::countEvents(t, tensor, "B", "ALLREDUCE"), 2) << tensor;
    EXPECT_EQ(test::countEvents(t, tensor, "B", "MEMCPY_IN_FUSION_BUFFER"),
              test::countEvents(t, tensor, "B", "MEMCPY_OUT_FUSION_BUFFER"))
        << tensor;
    // Every phase begun was ended.
    EXPECT_EQ(test::countEvents(t, tensor, "B"), test::countEvents(t, tensor, "E")) << tensor;
  }
}

}  // namespace
}  // namespace hvd
