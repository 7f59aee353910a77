// Blocking collectives called with different arguments on different ranks: every rank fails
// with an InvalidArgumentError naming the collective, the field and each rank's value, and the
// next matching collective on the same contexts gives exact results (nothing of the bad call is
// left in any stream). Ranks are threads over in-process shm and stream links, with the direct
// (small-message) algorithms and with the ring and chain algorithms.
#include <gtest/gtest.h>

#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "collectives/collectives.h"
#include "common/rank_errors.h"
#include "hvd/error.hpp"
#include "transport/local_fabric.h"

namespace hvd {
namespace {

using test::errorMessage;
using test::expectNoErrors;
using transport::Context;
using transport::LocalLinkKind;

struct Param {
  int np;
  LocalLinkKind kind;
  bool ring;              // every non-empty message takes the ring / chain algorithms
  bool gathered = false;  // beyond the full mesh (collectives/gathered.h)
};

std::string paramName(const ::testing::TestParamInfo<Param>& info) {
  return "np" + std::to_string(info.param.np) +
         (info.param.kind == LocalLinkKind::kShm ? "_shm" : "_stream") +
         (info.param.ring ? "_ring" : "_direct") + (info.param.gathered ? "_gathered" : "");
}

class CollectiveMismatch : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    transport::ContextOptions options;
    options.timeout = std::chrono::seconds(20);
    options.spin = std::chrono::microseconds(20);
    if (GetParam().ring) {
      options.smallMessageBytes = 0;
      options.smallMessageBytesTcp = 0;
    }
    if (GetParam().gathered) options.fullMeshRanks = 1;
    contexts_ = transport::makeLocalContexts(GetParam().np, GetParam().kind, options, 16 << 10);
  }

  int np() const { return GetParam().np; }
  Algorithm algorithm() const { return GetParam().ring ? Algorithm::kRing : Algorithm::kDirect; }

  template <typename Body>
  std::vector<std::exception_ptr> runRanks(Body&& body) {
    return test::runRanks(contexts_, body);
  }

  // Every rank failed with InvalidArgumentError; returns each rank's message.
  std::vector<std::string> expectAllInvalid(const std::vector<std::exception_ptr>& errors) {
    std::vector<std::string> messages(errors.size());
    for (size_t r = 0; r < errors.size(); ++r) {
      if (!errors[r]) {
        ADD_FAILURE() << "rank " << r << " succeeded";
        continue;
      }
      try {
        std::rethrow_exception(errors[r]);
      } catch (const InvalidArgumentError& e) {
        messages[r] = e.what();
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << r << " failed with another kind of error: " << e.what();
      }
    }
    return messages;
  }

  // The job is still usable: a small and a large allreduce, then an alltoall, are exact.
  void expectNextCollectivesExact() {
    const int n = np();
    auto errors = runRanks([&](Context& ctx) {
      const int r = ctx.rank();
      for (size_t count : {size_t{17}, size_t{5000}}) {
        std::vector<float> data(count);
        for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>(r + 1 + i % 7);
        coll::allreduce(ctx, data.data(), data.data(), count, DataType::kFloat32);
        for (size_t i = 0; i < count; ++i) {
          const float want = static_cast<float>(n * (n + 1) / 2 + n * (i % 7));
          ASSERT_EQ(data[i], want) << "rank " << r << " element " << i << " of " << count;
        }
      }
      std::vector<int32_t> send(2 * n), recv(2 * n, -1);
      for (int p = 0; p < n; ++p) send[2 * p] = send[2 * p + 1] = 100 * r + p;
      const std::vector<size_t> twos(n, 2);
      coll::alltoall(ctx, send.data(), twos, recv.data(), twos, DataType::kInt32);
      for (int p = 0; p < n; ++p) {
        ASSERT_EQ(recv[2 * p], 100 * p + r);
        ASSERT_EQ(recv[2 * p + 1], 100 * p + r);
      }
    });
    expectNoErrors(errors);
  }

  // "0" for rank 0 and "1" or "1-3" for the others, as the errors list them.
  std::string others() const {
    return np() == 2 ? "rank 1" : np() == 3 ? "ranks 1,2" : "ranks 1-" + std::to_string(np() - 1);
  }

  std::vector<std::unique_ptr<Context>> contexts_;
};

TEST_P(CollectiveMismatch, AllreduceCountDiffersFailsEveryRankThenNextIsExact) {
  const Algorithm algorithm = this->algorithm();
  auto errors = runRanks([&](Context& ctx) {
    const size_t count = ctx.rank() == 0 ? 17 : 18;
    std::vector<float> data(count, 1.0f);
    coll::allreduce(ctx, data.data(), data.data(), count, DataType::kFloat32,
                    AllreduceOptions{ReduceOp::kSum, algorithm});
  });
  const auto messages = expectAllInvalid(errors);
  for (const auto& m : messages) {
    EXPECT_EQ(m, "allreduce: count differs across ranks: 17 on rank 0, 18 on " + others());
  }
  expectNextCollectivesExact();
}

TEST_P(CollectiveMismatch, AllreduceCountDiffersAcrossTheSmallMessageThreshold) {
  // 16 floats take the direct algorithm on rank 0, 100000 the ring on the others: the plans
  // differ, and still no rank waits for bytes that never come.
  auto errors = runRanks([&](Context& ctx) {
    const size_t count = ctx.rank() == 0 ? 16 : 100000;
    std::vector<float> data(count, 1.0f);
    coll::allreduce(ctx, data.data(), data.data(), count, DataType::kFloat32);
  });
  for (const auto& m : expectAllInvalid(errors)) {
    EXPECT_EQ(m, "allreduce: count differs across ranks: 16 on rank 0, 100000 on " + others());
  }
  expectNextCollectivesExact();
}

TEST_P(CollectiveMismatch, AllreduceTypeDiffersWithTheSameByteSize) {
  const Algorithm algorithm = this->algorithm();
  auto errors = runRanks([&](Context& ctx) {
    std::vector<int32_t> data(9, 3);
    const DataType type = ctx.rank() == 0 ? DataType::kFloat32 : DataType::kInt32;
    coll::allreduce(ctx, data.data(), data.data(), data.size(), type,
                    AllreduceOptions{ReduceOp::kSum, algorithm});
  });
  for (const auto& m : expectAllInvalid(errors)) {
    EXPECT_EQ(m, "allreduce: type differs across ranks: float32 on rank 0, int32 on " + others());
  }
  expectNextCollectivesExact();
}

TEST_P(CollectiveMismatch, AllreduceOpDiffers) {
  const Algorithm algorithm = this->algorithm();
  auto errors = runRanks([&](Context& ctx) {
    std::vector<double> data(33, 2.0);
    const ReduceOp op = ctx.rank() == np() - 1 ? ReduceOp::kMax : ReduceOp::kSum;
    coll::allreduce(ctx, data.data(), data.data(), data.size(), DataType::kFloat64,
                    AllreduceOptions{op, algorithm});
  });
  const std::string last = std::to_string(np() - 1);
  const std::string sums = np() == 2   ? "rank 0"
                           : np() == 3 ? "ranks 0,1"
                                       : "ranks 0-" + std::to_string(np() - 2);
  for (const auto& m : expectAllInvalid(errors)) {
    EXPECT_EQ(m, "allreduce: op differs across ranks: sum on " + sums + ", max on rank " + last);
  }
  expectNextCollectivesExact();
}

TEST_P(CollectiveMismatch, AllreduceAlgorithmDiffers) {
  auto errors = runRanks([&](Context& ctx) {
    std::vector<float> data(64, 1.0f);
    const Algorithm algorithm = ctx.rank() == 0 ? Algorithm::kDirect : Algorithm::kRing;
    coll::allreduce(ctx, data.data(), data.data(), data.size(), DataType::kFloat32,
                    AllreduceOptions{ReduceOp::kSum, algorithm});
  });
  for (const auto& m : expectAllInvalid(errors)) {
    EXPECT_EQ(m,
              "allreduce: algorithm differs across ranks: direct on rank 0, ring on " + others());
  }
  expectNextCollectivesExact();
}

TEST_P(CollectiveMismatch, BroadcastRootDiffers) {
  const Algorithm algorithm = this->algorithm();
  auto errors = runRanks([&](Context& ctx) {
    std::vector<int64_t> data(40, ctx.rank());
    const int root = ctx.rank() == 0 ? 0 : 1;
    coll::broadcast(ctx, data.data(), data.size(), DataType::kInt64,
                    BroadcastOptions{root, algorithm});
  });
  for (const auto& m : expectAllInvalid(errors)) {
    EXPECT_EQ(m, "broadcast: root differs across ranks: 0 on rank 0, 1 on " + others());
  }
  expectNextCollectivesExact();
}

TEST_P(CollectiveMismatch, CollectiveDiffersAllreduceAgainstBroadcast) {
  const Algorithm algorithm = this->algorithm();
  auto errors = runRanks([&](Context& ctx) {
    std::vector<float> data(17, 1.0f);
    if (ctx.rank() == 0) {
      coll::allreduce(ctx, data.data(), data.data(), data.size(), DataType::kFloat32,
                      AllreduceOptions{ReduceOp::kSum, algorithm});
    } else {
      coll::broadcast(ctx, data.data(), data.size(), DataType::kFloat32,
                      BroadcastOptions{0, algorithm});
    }
  });
  const auto messages = expectAllInvalid(errors);
  const std::string tail = " differs across ranks: allreduce on rank 0, broadcast on " + others();
  for (int r = 0; r < np(); ++r) {
    EXPECT_EQ(messages[r], std::string(r == 0 ? "allreduce" : "broadcast") + ": collective" + tail);
  }
  expectNextCollectivesExact();
}

TEST_P(CollectiveMismatch, CollectiveDiffersBarrierAgainstAllgather) {
  auto errors = runRanks([&](Context& ctx) {
    if (ctx.rank() == np() - 1) {
      coll::barrier(ctx);
    } else {
      std::vector<uint8_t> out(np());
      const uint8_t mine = 1;
      coll::allgather(ctx, &mine, 1, out.data(), std::vector<size_t>(np(), 1), DataType::kUInt8);
    }
  });
  const auto messages = expectAllInvalid(errors);
  for (int r = 0; r < np(); ++r) {
    EXPECT_NE(messages[r].find(": collective differs across ranks: allgather on rank"),
              std::string::npos)
        << messages[r];
    EXPECT_NE(messages[r].find("barrier on rank " + std::to_string(np() - 1)), std::string::npos)
        << messages[r];
  }
  expectNextCollectivesExact();
}

TEST_P(CollectiveMismatch, AllgatherCountsVectorDiffersOnOneRank) {
  const Algorithm algorithm = this->algorithm();
  auto errors = runRanks([&](Context& ctx) {
    const int r = ctx.rank();
    // Rank r contributes r + 2 elements; rank 1 believes rank 0 contributes 3.
    std::vector<size_t> counts(np());
    size_t total = 0;
    for (int p = 0; p < np(); ++p) total += counts[p] = p + 2;
    if (r == 1) counts[0] = 3;
    std::vector<int32_t> in(r + 2, r), out(total + 1);
    coll::allgather(ctx, in.data(), in.size(), out.data(), counts, DataType::kInt32, algorithm);
  });
  std::string contributions = "2 on rank 0, 3 on rank 1";
  for (int p = 2; p < np(); ++p) {
    contributions += ", " + std::to_string(p + 2) + " on rank " + std::to_string(p);
  }
  for (const auto& m : expectAllInvalid(errors)) {
    EXPECT_EQ(m, "allgather: counts differ from the counts the ranks contribute (" + contributions +
                     ") on rank 1");
  }
  expectNextCollectivesExact();
}

TEST_P(CollectiveMismatch, AlltoallRecvCountsDifferFromSendCounts) {
  auto errors = runRanks([&](Context& ctx) {
    const int r = ctx.rank();
    std::vector<size_t> sendCounts(np(), 2), recvCounts(np(), 2);
    if (r == 1) recvCounts[0] = 3;  // rank 0 sends it 2
    std::vector<int16_t> in(2 * np(), 5), out(2 * np() + 1);
    coll::alltoall(ctx, in.data(), sendCounts, out.data(), recvCounts, DataType::kUInt8);
  });
  const auto messages = expectAllInvalid(errors);
  // In a full mesh rank 1 sees rank 0's announcement on their link; beyond it the checksums are
  // compared before any link carries counts, so every rank throws the same message.
  if (!GetParam().gathered) {
    EXPECT_EQ(messages[1],
              "alltoall: rank 0 sends 2 elements to rank 1 but rank 1 expects 3 (its "
              "recvCounts[0])");
  }
  for (int r = 0; r < np(); ++r) {
    if (r == 1 && !GetParam().gathered) continue;
    EXPECT_EQ(messages[r],
              "alltoall: recvCounts differ across ranks from the sendCounts of the ranks that send "
              "them (the checksums of all sendCounts and all recvCounts differ)");
  }
  expectNextCollectivesExact();
}

TEST_P(CollectiveMismatch, ReducescatterRowElementsDiffer) {
  auto errors = runRanks([&](Context& ctx) {
    std::vector<float> in(24 * np(), 1.0f), out(24 * np());
    ReducescatterOptions options;
    options.rowElements = ctx.rank() == 0 ? 2 : 4;
    coll::reducescatter(ctx, in.data(), out.data(), in.size(), DataType::kFloat32, options);
  });
  for (const auto& m : expectAllInvalid(errors)) {
    EXPECT_EQ(m, "reducescatter: rowElements differs across ranks: 2 on rank 0, 4 on " + others());
  }
  expectNextCollectivesExact();
}

TEST_P(CollectiveMismatch, InvalidArgumentsOnOneRankFailEveryRank) {
  const Algorithm algorithm = this->algorithm();
  auto errors = runRanks([&](Context& ctx) {
    std::vector<float> data(8, 1.0f);
    float* buffer = ctx.rank() == 0 ? nullptr : data.data();
    coll::allreduce(ctx, buffer, buffer, data.size(), DataType::kFloat32,
                    AllreduceOptions{ReduceOp::kSum, algorithm});
  });
  const auto messages = expectAllInvalid(errors);
  EXPECT_EQ(messages[0], "allreduce: null buffer for 8 elements");
  for (int r = 1; r < np(); ++r) {
    EXPECT_EQ(messages[r],
              "allreduce: rank 0 passed invalid arguments to allreduce (its own error says which)");
  }
  expectNextCollectivesExact();
}

TEST_P(CollectiveMismatch, ZeroCountOnOneRankIsAMismatchNotAHang) {
  auto errors = runRanks([&](Context& ctx) {
    const size_t count = ctx.rank() == 0 ? 0 : 4;
    std::vector<float> data(4, 1.0f);
    coll::allreduce(ctx, data.data(), data.data(), count, DataType::kFloat32);
  });
  for (const auto& m : expectAllInvalid(errors)) {
    EXPECT_EQ(m, "allreduce: count differs across ranks: 0 on rank 0, 4 on " + others());
  }
  expectNextCollectivesExact();
}

INSTANTIATE_TEST_SUITE_P(
    Ranks, CollectiveMismatch,
    ::testing::Values(Param{2, LocalLinkKind::kShm, false}, Param{2, LocalLinkKind::kStream, false},
                      Param{2, LocalLinkKind::kShm, true}, Param{3, LocalLinkKind::kShm, false},
                      Param{3, LocalLinkKind::kStream, true}, Param{4, LocalLinkKind::kShm, true},
                      Param{4, LocalLinkKind::kStream, false},
                      Param{3, LocalLinkKind::kShm, false, true},
                      Param{5, LocalLinkKind::kShm, true, true},
                      Param{4, LocalLinkKind::kStream, false, true}),
    paramName);

}  // namespace
}  // namespace hvd
