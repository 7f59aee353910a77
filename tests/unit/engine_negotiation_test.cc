// The engine's negotiation with ranks as threads: mismatches become errors on every rank (and
// the job goes on), duplicate names fail at submit, join, and stall detection with a fake
// clock.
#include <mutex>

#include "engine_support.h"
#include "hvd/error.hpp"

namespace hvd::enginetest {
namespace {

using namespace std::chrono_literals;

// After an error, a correct allreduce still works on every rank.
void expectUsable(int rank, Engine& engine, int np, const std::string& name) {
  float x[3] = {1.0f * rank, 2, 3};
  engine.allreduce(name, x, x, {3}, DataType::kFloat32, {ReduceOp::kSum}).wait();
  EXPECT_EQ(x[0], np * (np - 1) / 2.0f);
  EXPECT_EQ(x[1], 2.0f * np);
}

struct MismatchCase {
  const char* label;
  std::function<Handle(int rank, Engine&, std::vector<float>&)> submit;
  const char* message;
};

std::vector<MismatchCase> mismatchCases() {
  auto ar = [](const char* name, Shape shape, DataType t = DataType::kFloat32,
               ReduceOp op = ReduceOp::kSum) {
    return [=](Engine& e, std::vector<float>& b) {
      return e.allreduce(name, b.data(), b.data(), shape, t, {op});
    };
  };
  return {
      {"shape dims",
       [=](int r, Engine& e, std::vector<float>& b) {
         return r == 1 ? ar("fc1.weight", {17, 18})(e, b) : ar("fc1.weight", {17, 17})(e, b);
       },
       "allreduce 'fc1.weight': shape [17,18] on rank 1, [17,17] on ranks 0,2"},
      {"same count other rank",
       [=](int r, Engine& e, std::vector<float>& b) {
         return r == 2 ? ar("w2", {289})(e, b) : ar("w2", {17, 17})(e, b);
       },
       "allreduce 'w2': shape [289] on rank 2, [17,17] on ranks 0,1"},
      {"dtype",
       [=](int r, Engine& e, std::vector<float>& b) {
         return r == 0 ? ar("w3", {8}, DataType::kInt32)(e, b) : ar("w3", {8})(e, b);
       },
       "allreduce 'w3': dtype int32 on rank 0, float32 on ranks 1,2"},
      {"op",
       [=](int r, Engine& e, std::vector<float>& b) {
         return r == 1 ? ar("w4", {8}, DataType::kFloat32, ReduceOp::kMax)(e, b)
                       : ar("w4", {8})(e, b);
       },
       "allreduce 'w4': op max on rank 1, sum on ranks 0,2"},
      {"broadcast root",
       [=](int r, Engine& e, std::vector<float>& b) {
         return e.broadcast("w5", b.data(), {8}, DataType::kFloat32, r == 2 ? 1 : 0);
       },
       "broadcast 'w5': root 1 on rank 2, 0 on ranks 0,1"},
      {"allreduce vs broadcast",
       [=](int r, Engine& e, std::vector<float>& b) {
         return r == 2 ? e.broadcast("w6", b.data(), {8}, DataType::kFloat32, 0)
                       : ar("w6", {8})(e, b);
       },
       "'w6': broadcast on rank 2, allreduce on ranks 0,1"},
  };
}

TEST(EngineErrors, EveryMismatchFailsOnEveryRankWithTheMessageAndTheJobGoesOn) {
  Cluster cluster(3);
  cluster.run([&](int rank, Engine& engine) {
    int n = 0;
    for (const auto& c : mismatchCases()) {
      std::vector<float> b(17 * 18, 1.0f);
      Handle h = c.submit(rank, engine, b);
      EXPECT_EQ(errorOf(h), c.message) << c.label << " on rank " << rank;
      try {
        h.wait();
      } catch (const InvalidArgumentError&) {
      } catch (...) {
        ADD_FAILURE() << c.label << ": not an InvalidArgumentError";
      }
      expectUsable(rank, engine, 3, "after." + std::to_string(n++));
    }
  });
  EXPECT_EQ(cluster.engine(0).stats().errors, 6u);
}

TEST(EngineErrors, MismatchOfACachedNameIsCaughtAndTheEntryReplaced) {
  Cluster cluster(3);
  cluster.run([&](int rank, Engine& engine) {
    std::vector<float> b(64, 1.0f);
    for (int i = 0; i < 3; ++i) {
      engine.allreduce("cached", b.data(), b.data(), {8, 8}, DataType::kFloat32, {}).wait();
    }
    EXPECT_GE(engine.stats().cacheHits, 1u);
    const Shape shape = rank == 1 ? Shape{64} : Shape{8, 8};
    Handle h = engine.allreduce("cached", b.data(), b.data(), shape, DataType::kFloat32, {});
    EXPECT_EQ(errorOf(h), "allreduce 'cached': shape [64] on rank 1, [8,8] on ranks 0,2");
    std::fill(b.begin(), b.end(), 1.0f);
    engine.allreduce("cached", b.data(), b.data(), {8, 8}, DataType::kFloat32, {ReduceOp::kSum})
        .wait();
    EXPECT_EQ(b[5], 3.0f);
  });
}

TEST(EngineErrors, DuplicateInFlightNameFailsAtSubmitAndTheJobGoesOn) {
  Cluster cluster(3);
  cluster.run([&](int rank, Engine& engine) {
    float x[2] = {1, 1}, y[2] = {1, 1};
    Handle first;
    if (rank == 0) {
      first = engine.allreduce("dup", x, x, {2}, DataType::kFloat32, {ReduceOp::kSum});
      try {
        engine.allreduce("dup", y, y, {2}, DataType::kFloat32, {ReduceOp::kSum});
        ADD_FAILURE() << "no error for a duplicate name";
      } catch (const InvalidArgumentError& e) {
        EXPECT_NE(std::string(e.what()).find("allreduce 'dup': an op of this name is already in "
                                             "flight on rank 0"),
                  std::string::npos)
            << e.what();
      }
    } else {
      std::this_thread::sleep_for(20ms);
      first = engine.allreduce("dup", x, x, {2}, DataType::kFloat32, {ReduceOp::kSum});
    }
    first.wait();
    EXPECT_EQ(x[0], 3.0f);
    // Once done, the name can be used again.
    engine.allreduce("dup", y, y, {2}, DataType::kFloat32, {ReduceOp::kSum}).wait();
    EXPECT_EQ(y[0], 3.0f);
    // Duplicate names inside one group, too.
    EXPECT_THROW(
        engine.groupedAllreduce({"g", "g"}, {x, y}, {x, y}, {{2}, {2}}, DataType::kFloat32, {}),
        InvalidArgumentError);
    expectUsable(rank, engine, 3, "after.dup");
  });
}

TEST(EngineErrors, OpsOtherThanAllreduceFailWhileARankHasJoined) {
  Cluster cluster(3);
  cluster.run([&](int rank, Engine& engine) {
    if (rank == 2) {
      EXPECT_EQ(engine.join(), 1);
      return;
    }
    std::vector<float> b(4, 1.0f);
    Handle h = engine.broadcast("bj", b.data(), {4}, DataType::kFloat32, 0);
    EXPECT_EQ(errorOf(h),
              "broadcast 'bj': cannot run while rank 2 has joined (hvd::join): only allreduce "
              "takes part with joined ranks");
    if (rank == 1) std::this_thread::sleep_for(50ms);
    EXPECT_EQ(engine.join(), 1);
  });
}

class Join : public ::testing::TestWithParam<bool> {};

TEST_P(Join, EachRankJoiningFirstInTurnContributesZerosAndJoinReturnsTheLastRank) {
  EngineOptions options;
  if (!GetParam()) options.cacheCapacity = 0;
  Cluster cluster(3, options);
  cluster.run([&](int rank, Engine& engine) {
    for (int epoch = 0; epoch < 2; ++epoch) {  // the second epoch runs from the cache
      for (int first = 0; first < 3; ++first) {
        const int second = (first + 1) % 3;
        const int last = (first + 2) % 3;
        if (rank == first) {
          EXPECT_EQ(engine.join(), last) << "first " << first;
        } else {
          std::vector<float> a(10), b(10);
          for (int i = 0; i < 10; ++i) a[i] = b[i] = static_cast<float>(rank * 10 + i);
          Handle ha = engine.allreduce("ja", a.data(), a.data(), {10}, DataType::kFloat32,
                                       {ReduceOp::kSum});
          Handle hb = engine.allreduce("jb", b.data(), b.data(), {2, 5}, DataType::kFloat32,
                                       {ReduceOp::kSum});
          ha.wait();
          hb.wait();
          for (int i = 0; i < 10; ++i) {
            const float want = static_cast<float>(second * 10 + i + last * 10 + i);
            EXPECT_EQ(a[i], want) << "first " << first << " rank " << rank;
            EXPECT_EQ(b[i], want);
          }
          if (rank == last) std::this_thread::sleep_for(30ms);
          EXPECT_EQ(engine.join(), last) << "first " << first << " rank " << rank;
        }
        // A new epoch: every rank takes part again.
        expectUsable(rank, engine, 3, "after.join");
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Cache, Join, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "cache" : "nocache"; });

TEST(Join, AJoinedRankContributesInt16ZerosAndTheSumStillWraps) {
  Cluster cluster(3);
  cluster.run([&](int rank, Engine& engine) {
    if (rank == 0) {
      EXPECT_EQ(engine.join(), 2);
      return;
    }
    std::vector<int16_t> x(6);
    for (int i = 0; i < 6; ++i) x[i] = static_cast<int16_t>(20000 + rank * 1000 + i);
    engine.allreduce("j16", x.data(), x.data(), {3, 2}, DataType::kInt16, {ReduceOp::kSum}).wait();
    for (int i = 0; i < 6; ++i) {
      // 21000 + 22000 + 2i = 43000 + 2i, wrapped to int16; rank 0's zeros add nothing.
      EXPECT_EQ(x[i], static_cast<int16_t>(43000 + 2 * i - 65536)) << "rank " << rank << " " << i;
    }
    if (rank == 2) std::this_thread::sleep_for(30ms);
    EXPECT_EQ(engine.join(), 2);
  });
}

TEST(Join, RanksJoiningAtOnceAllReturnTheSameLastRank) {
  // Which cycle each join lands in is up to the scheduler; whatever it is, every rank agrees.
  // (Ties inside one cycle go to the highest rank: Controller.JoinTiesGoToTheHighestRank.)
  Cluster cluster(3);
  std::vector<int> last(3, -1);
  cluster.run([&](int rank, Engine& engine) { last[rank] = engine.join(); });
  EXPECT_EQ(last[0], last[1]);
  EXPECT_EQ(last[1], last[2]);
  EXPECT_GE(last[0], 0);
}

TEST(Stall, MissingRankIsReportedThenEveryPendingHandleFailsAfterTheShutdownTime) {
  FakeClock clock;
  std::mutex mutex;
  std::vector<std::string> warnings;
  EngineOptions options;
  options.stallCheckTime = 1000ms;
  options.stallShutdownTime = 3000ms;
  options.clock = clock.function();
  options.onStallWarning = [&](const std::string& w) {
    std::lock_guard<std::mutex> lock(mutex);
    warnings.push_back(w);
  };
  auto warned = [&](const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto& w : warnings) {
      if (w.find(what) != std::string::npos) return true;
    }
    return false;
  };
  auto waitFor = [](const std::function<bool()>& done) {
    for (int i = 0; i < 500 && !done(); ++i) std::this_thread::sleep_for(10ms);
    return done();
  };
  Cluster cluster(3, options);
  std::vector<float> c(4, 1.0f);
  std::vector<std::vector<float>> w(3, std::vector<float>(4, 1.0f));
  // 'c' is in the response cache first: its stall must be found too.
  cluster.run([&](int rank, Engine& engine) {
    engine.allreduce("c", w[rank].data(), w[rank].data(), {4}, DataType::kFloat32, {}).wait();
  });
  std::vector<Handle> handles;
  for (int r : {0, 1}) {
    handles.push_back(
        cluster.engine(r).allreduce("w", w[r].data(), w[r].data(), {4}, DataType::kFloat32, {}));
    handles.push_back(
        cluster.engine(r).allreduce("c", w[r].data(), w[r].data(), {4}, DataType::kFloat32, {}));
  }
  // Rank 2 has something pending too (that nobody else submits).
  handles.push_back(
      cluster.engine(2).allreduce("only2", c.data(), c.data(), {4}, DataType::kFloat32, {}));
  std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(warnings.empty());
  clock.advance(1500ms);
  ASSERT_TRUE(waitFor([&] { return warned("'w' waits on rank 2"); })) << warnings.size();
  clock.advance(1100ms);  // 'c' was demoted from the cache and has waited 1 s in the table
  ASSERT_TRUE(waitFor([&] { return warned("'c' waits on rank 2"); }));
  for (const auto& h : handles) EXPECT_FALSE(h.poll());
  clock.advance(3000ms);
  for (const auto& h : handles) {
    try {
      h.wait();
      ADD_FAILURE() << h.name() << " did not fail";
    } catch (const TimeoutError& e) {
      EXPECT_NE(std::string(e.what()).find("'w' waits on rank 2"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("'only2' waits on ranks 0,1"), std::string::npos);
    }
  }
  // Further submits are refused with the stall error.
  EXPECT_THROW(cluster.engine(1).allreduce("late", c.data(), c.data(), {4}, DataType::kFloat32, {}),
               TimeoutError);
}

}  // namespace
}  // namespace hvd::enginetest
