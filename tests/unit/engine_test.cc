// The engine with ranks as threads: correctness of every op type under shuffled submission
// from two threads per rank, grouping, scaling, compression, every reduce op, cache and fusion
// on and off (identical results), and that fusion really fuses.
#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <functional>
#include <iterator>
#include <mutex>
#include <random>

#include "collectives/reduce.h"
#include "engine_support.h"
#include "hvd/error.hpp"
#include "hvd/hvd.hpp"

namespace hvd::enginetest {
namespace {

using namespace std::chrono_literals;

// Small integers, exact in every type; never zero for products.
double valueOf(int rank, int op, size_t i) {
  return static_cast<double>(static_cast<int>((rank * 7 + op * 3 + i) % 9) - 4);
}

const DataType kTypes[] = {DataType::kFloat32, DataType::kFloat64, DataType::kInt32,
                           DataType::kInt64,   DataType::kFloat16, DataType::kBFloat16,
                           DataType::kInt8,    DataType::kUInt8,   DataType::kInt16};
static_assert(std::size(kTypes) == kNumDataTypes, "kTypes must list every DataType");

// One async op of the mixed workload: its inputs, outputs, and the check of its result.
struct MixedOp {
  enum Kind { kAllreduceSum, kAllreduceAverage, kAllgather, kBroadcast, kReducescatter, kAlltoall };
  int index = 0;
  Kind kind = kAllreduceSum;
  DataType type = DataType::kFloat32;
  size_t count = 0;
  std::vector<uint8_t> input, output;
  Handle handle;
};

double nonNegative(DataType t, double v) { return t == DataType::kUInt8 ? v + 4 : v; }

MixedOp makeMixed(int index, int rank, int np) {
  static const size_t kCounts[] = {1, 3, 17, 100, 1000, 4099};
  MixedOp op;
  op.index = index;
  op.kind = static_cast<MixedOp::Kind>(index % 6);
  op.type = kTypes[index % std::size(kTypes)];
  op.count = kCounts[(index / 6) % 6];
  if (op.kind == MixedOp::kAllreduceAverage && !isFloat(op.type)) op.kind = MixedOp::kAllreduceSum;
  size_t rows = op.count;
  if (op.kind == MixedOp::kAllgather) rows = op.count + rank;  // dimension 0 differs by rank
  if (op.kind == MixedOp::kAlltoall) rows = static_cast<size_t>(np) * (index % 3 + 1);
  op.input = buffer(op.type, rows * 2,
                    [&](size_t i) { return nonNegative(op.type, valueOf(rank, index, i)); });
  op.output = op.input;
  return op;
}

void submitMixed(Engine& engine, MixedOp& op, int rank, int np) {
  const std::string name = "mixed." + std::to_string(op.index);
  const size_t rows = (op.input.size() - 1) / dataTypeSize(op.type) / 2;
  const Shape shape{static_cast<int64_t>(rows), 2};
  OpOptions options;
  switch (op.kind) {
    case MixedOp::kAllreduceSum:
    case MixedOp::kAllreduceAverage:
      options.op = op.kind == MixedOp::kAllreduceSum ? ReduceOp::kSum : ReduceOp::kAverage;
      op.handle =
          engine.allreduce(name, op.input.data(), op.output.data(), shape, op.type, options);
      break;
    case MixedOp::kAllgather:
      op.handle = engine.allgather(name, op.input.data(), shape, op.type);
      break;
    case MixedOp::kBroadcast:
      op.handle = engine.broadcast(name, op.output.data(), shape, op.type, op.index % np);
      break;
    case MixedOp::kReducescatter:
      options.op = ReduceOp::kSum;
      op.handle = engine.reducescatter(name, op.input.data(), shape, op.type, options);
      break;
    case MixedOp::kAlltoall: {
      std::vector<int64_t> splits(np, static_cast<int64_t>(rows) / np);
      op.handle = engine.alltoall(name, op.input.data(), shape, splits, op.type);
      break;
    }
  }
  (void)rank;
}

// Checks op's result on `rank`; returns a failure description or "".
std::string checkMixed(const MixedOp& op, int rank, int np) {
  const DataType t = op.type;
  auto in = [&](int r, size_t i) { return nonNegative(t, valueOf(r, op.index, i)); };
  std::ostringstream fail;
  auto expectEq = [&](const char* what, size_t i, double got, double want, int ulps) {
    if (!closeUlps(t, got, want, ulps) && fail.tellp() == 0) {
      fail << "op " << op.index << " (" << what << ", " << dataTypeName(t) << "): element " << i
           << " is " << got << ", expected " << want;
    }
  };
  switch (op.kind) {
    case MixedOp::kAllreduceSum:
    case MixedOp::kAllreduceAverage: {
      const size_t n = op.count * 2;
      std::vector<uint8_t> want(n * dataTypeSize(t) + 1);
      for (size_t i = 0; i < n; ++i) {
        double sum = 0;
        for (int r = 0; r < np; ++r) sum += in(r, i);
        storeElement(t, want.data(), i, sum);
      }
      if (op.kind == MixedOp::kAllreduceAverage) coll::finishAverage(t, want.data(), n, np);
      for (size_t i = 0; i < n; ++i) {
        expectEq("allreduce", i, loadElement(t, op.output.data(), i),
                 loadElement(t, want.data(), i), 0);
      }
      break;
    }
    case MixedOp::kAllgather: {
      const auto& out = op.handle.output();
      size_t at = 0;
      for (int r = 0; r < np; ++r) {
        for (size_t i = 0; i < (op.count + r) * 2; ++i, ++at) {
          expectEq("allgather", at, loadElement(t, out.data(), at), in(r, i), 0);
        }
      }
      if (op.handle.outputShape() != Shape{static_cast<int64_t>(at / 2), 2}) {
        fail << "op " << op.index << ": allgather shape";
      }
      break;
    }
    case MixedOp::kBroadcast:
      for (size_t i = 0; i < op.count * 2; ++i) {
        expectEq("broadcast", i, loadElement(t, op.output.data(), i), in(op.index % np, i), 0);
      }
      break;
    case MixedOp::kReducescatter: {
      const size_t rows = op.count;
      const size_t start = (rows / np) * rank + std::min<size_t>(rank, rows % np);
      const size_t mine = rows / np + (static_cast<size_t>(rank) < rows % np);
      const auto& out = op.handle.output();
      if (out.size() != mine * 2 * dataTypeSize(t)) fail << "op " << op.index << ": size";
      for (size_t i = 0; i < mine * 2 && fail.tellp() == 0; ++i) {
        double sum = 0;
        for (int r = 0; r < np; ++r) sum += in(r, start * 2 + i);
        expectEq("reducescatter", i, loadElement(t, out.data(), i), sum, 0);
      }
      break;
    }
    case MixedOp::kAlltoall: {
      const size_t per = static_cast<size_t>(op.index % 3 + 1);  // rows to each rank
      const auto& out = op.handle.output();
      size_t at = 0;
      for (int r = 0; r < np; ++r) {
        for (size_t i = 0; i < per * 2; ++i, ++at) {
          expectEq("alltoall", at, loadElement(t, out.data(), at), in(r, rank * per * 2 + i), 0);
        }
      }
      if (op.handle.receivedSplits() != std::vector<int64_t>(np, static_cast<int64_t>(per))) {
        fail << "op " << op.index << ": received splits";
      }
      break;
    }
  }
  return fail.str();
}

class Mixed : public ::testing::TestWithParam<int> {};

TEST_P(Mixed, HundredOpsInADifferentOrderOnEachRankFromTwoThreadsAreExact) {
  const int np = GetParam();
  Cluster cluster(np);
  cluster.run([&](int rank, Engine& engine) {
    std::vector<MixedOp> ops;
    for (int i = 0; i < 100; ++i) ops.push_back(makeMixed(i, rank, np));
    std::vector<int> order(100);
    for (int i = 0; i < 100; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), std::mt19937(1234 + rank));
    std::thread second([&] {
      for (size_t k = 1; k < order.size(); k += 2) submitMixed(engine, ops[order[k]], rank, np);
    });
    for (size_t k = 0; k < order.size(); k += 2) submitMixed(engine, ops[order[k]], rank, np);
    second.join();
    for (auto& op : ops) {
      op.handle.wait();
      const std::string failure = checkMixed(op, rank, np);
      EXPECT_EQ(failure, "") << "rank " << rank;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, Mixed, ::testing::Values(1, 2, 3, 4));

// Runs `iterations` rounds of `ops` allreduces (sum, float32, mixed sizes) and returns rank 0's
// outputs; the engines use `options`.
std::vector<std::vector<float>> allreduceRounds(const EngineOptions& options, int np, int ops,
                                                int iterations, EngineStats* stats) {
  std::vector<std::vector<float>> results;
  std::mutex mutex;
  Cluster cluster(np, options);
  cluster.run([&](int rank, Engine& engine) {
    for (int it = 0; it < iterations; ++it) {
      std::vector<std::vector<float>> in(ops), out(ops);
      std::vector<Handle> handles;
      for (int k = 0; k < ops; ++k) {
        const size_t n = 1 + (k * 37) % 300;
        in[k].resize(n);
        out[k].resize(n);
        for (size_t i = 0; i < n; ++i) in[k][i] = static_cast<float>(valueOf(rank, k + it, i));
        handles.push_back(engine.allreduce("r." + std::to_string(k), in[k].data(), out[k].data(),
                                           {static_cast<int64_t>(n)}, DataType::kFloat32,
                                           {ReduceOp::kSum}));
      }
      for (auto& h : handles) h.wait();
      if (rank == 0) {
        std::lock_guard<std::mutex> lock(mutex);
        for (auto& o : out) results.push_back(o);
      }
    }
  });
  if (stats) *stats = cluster.engine(0).stats();
  return results;
}

TEST(Engine, CacheOnAndOffAndFusionOnAndOffGiveIdenticalResults) {
  EngineOptions on;
  EngineOptions noCache;
  noCache.cacheCapacity = 0;
  EngineOptions noFusion;
  noFusion.fusionThreshold = 0;
  EngineOptions tiny;  // a cache that must evict all the time
  tiny.cacheCapacity = 3;
  EngineStats onStats, offStats, tinyStats;
  const auto a = allreduceRounds(on, 3, 20, 4, &onStats);
  const auto b = allreduceRounds(noCache, 3, 20, 4, &offStats);
  const auto c = allreduceRounds(noFusion, 3, 20, 4, nullptr);
  const auto d = allreduceRounds(tiny, 3, 20, 4, &tinyStats);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, c);
  EXPECT_EQ(a, d);
  EXPECT_GT(onStats.cacheHits, 0u);
  EXPECT_EQ(offStats.cacheHits, 0u);
  EXPECT_EQ(onStats.responses, 80u);
  // How many cycles negotiate depends on how the threads' submissions interleave with the
  // cycles; the test below pins the cache's steady state down deterministically.
}

// Each round, every rank submits the same 20 allreduces while the engines hold submissions
// back, then they run; returns rank 0's negotiations and cache hits per round.
std::vector<std::pair<uint64_t, uint64_t>> pausedRounds(const EngineOptions& options, int rounds) {
  constexpr int np = 3;
  constexpr int ops = 20;
  Cluster cluster(np, options);
  std::vector<std::pair<uint64_t, uint64_t>> perRound;
  for (int round = 0; round < rounds; ++round) {
    const EngineStats before = cluster.engine(0).stats();
    for (int r = 0; r < np; ++r) cluster.engine(r).setPaused(true);
    std::vector<std::vector<float>> data(np * ops, std::vector<float>(8));
    std::vector<Handle> handles;
    for (int r = 0; r < np; ++r) {
      for (int k = 0; k < ops; ++k) {
        auto& d = data[r * ops + k];
        for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<float>(valueOf(r, k + round, i));
        handles.push_back(cluster.engine(r).allreduce("p." + std::to_string(k), d.data(), d.data(),
                                                      {8}, DataType::kFloat32, {ReduceOp::kSum}));
      }
    }
    for (int r = 0; r < np; ++r) cluster.engine(r).setPaused(false);
    for (auto& h : handles) h.wait();
    for (int r = 0; r < np; ++r) {
      for (int k = 0; k < ops; ++k) {
        for (size_t i = 0; i < 8; ++i) {
          double sum = 0;
          for (int q = 0; q < np; ++q) sum += valueOf(q, k + round, i);
          EXPECT_EQ(data[r * ops + k][i], static_cast<float>(sum)) << "round " << round;
        }
      }
    }
    const EngineStats after = cluster.engine(0).stats();
    perRound.emplace_back(after.negotiations - before.negotiations,
                          after.cacheHits - before.cacheHits);
  }
  return perRound;
}

TEST(Engine, RepeatedOpsNegotiateOnlyInTheirFirstRoundWithTheCacheOn) {
  EngineOptions on;
  EngineOptions off;
  off.cacheCapacity = 0;
  const auto cached = pausedRounds(on, 4);
  const auto uncached = pausedRounds(off, 4);
  ASSERT_EQ(cached.size(), 4u);
  ASSERT_EQ(uncached.size(), 4u);
  // The first round has nothing cached: the ops are negotiated (once per rank that released
  // its submissions into a cycle, at most).
  EXPECT_GE(cached[0].first, 1u);
  EXPECT_LE(cached[0].first, 3u);
  EXPECT_EQ(cached[0].second, 0u);
  for (int round = 1; round < 4; ++round) {
    EXPECT_EQ(cached[round].first, 0u) << "round " << round;
    EXPECT_EQ(cached[round].second, 20u) << "round " << round;
  }
  for (int round = 0; round < 4; ++round) {
    EXPECT_GE(uncached[round].first, 1u) << "round " << round;
    EXPECT_EQ(uncached[round].second, 0u) << "round " << round;
  }
}

// Submits 50 small allreduces on every rank while the engines hold submissions back, so that
// they are negotiated in one cycle; returns rank 0's stats delta.
EngineStats fiftySmallAllreduces(size_t fusionThreshold) {
  EngineOptions options;
  options.fusionThreshold = fusionThreshold;
  Cluster cluster(2, options);
  const EngineStats before = cluster.engine(0).stats();
  for (int r = 0; r < 2; ++r) cluster.engine(r).setPaused(true);
  std::vector<std::vector<float>> data(2 * 50, std::vector<float>(16));
  std::vector<Handle> handles;
  for (int r = 0; r < 2; ++r) {
    for (int k = 0; k < 50; ++k) {
      auto& d = data[r * 50 + k];
      for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<float>(valueOf(r, k, i));
      handles.push_back(cluster.engine(r).allreduce("s." + std::to_string(k), d.data(), d.data(),
                                                    {16}, DataType::kFloat32, {ReduceOp::kSum}));
    }
  }
  for (int r = 0; r < 2; ++r) cluster.engine(r).setPaused(false);
  for (auto& h : handles) h.wait();
  for (int k = 0; k < 50; ++k) {
    for (size_t i = 0; i < 16; ++i) {
      EXPECT_EQ(data[k][i], static_cast<float>(valueOf(0, k, i) + valueOf(1, k, i)));
    }
  }
  EngineStats after = cluster.engine(0).stats();
  after.collectives -= before.collectives;
  after.fusedTensors -= before.fusedTensors;
  return after;
}

TEST(Engine, FusionRunsFiftySmallAllreducesAsOneCollective) {
  const EngineStats fused = fiftySmallAllreduces(size_t{128} << 20);
  EXPECT_LE(fused.collectives, 2u);
  EXPECT_GE(fused.fusedTensors, 49u);
  const EngineStats unfused = fiftySmallAllreduces(0);
  EXPECT_EQ(unfused.collectives, 50u);
  EXPECT_EQ(unfused.fusedTensors, 0u);
  // A threshold of 10 tensors' bytes: at least 5 collectives.
  const EngineStats bounded = fiftySmallAllreduces(16 * 4 * 10);
  EXPECT_GE(bounded.collectives, 5u);
  EXPECT_LE(bounded.collectives, 6u);
}

TEST(Engine, GroupedAllreduceRunsItsMembersAsOneCollectiveEvenWithFusionOff) {
  for (size_t threshold : {size_t{128} << 20, size_t{0}}) {
    EngineOptions options;
    options.fusionThreshold = threshold;
    Cluster cluster(3, options);
    cluster.run([&](int rank, Engine& engine) {
      const std::vector<size_t> sizes{5, 100, 1, 33};
      std::vector<std::vector<double>> in, out;
      std::vector<std::string> names;
      std::vector<const void*> inputs;
      std::vector<void*> outputs;
      std::vector<Shape> shapes;
      for (size_t m = 0; m < sizes.size(); ++m) {
        in.emplace_back(sizes[m]);
        out.emplace_back(sizes[m]);
        for (size_t i = 0; i < sizes[m]; ++i) in[m][i] = valueOf(rank, m, i);
        names.push_back("group.m" + std::to_string(m));
        shapes.push_back({static_cast<int64_t>(sizes[m])});
      }
      for (size_t m = 0; m < sizes.size(); ++m) {
        inputs.push_back(in[m].data());
        outputs.push_back(out[m].data());
      }
      const auto before = engine.stats().collectives;
      Handle h = engine.groupedAllreduce(names, inputs, outputs, shapes, DataType::kFloat64,
                                         {ReduceOp::kSum});
      h.wait();
      EXPECT_EQ(engine.stats().collectives - before, 1u);
      for (size_t m = 0; m < sizes.size(); ++m) {
        for (size_t i = 0; i < sizes[m]; ++i) {
          EXPECT_EQ(out[m][i], valueOf(0, m, i) + valueOf(1, m, i) + valueOf(2, m, i));
        }
      }
    });
  }
}

TEST(Engine, PrescaleAndPostscaleApplyBeforeAndAfterTheReduction) {
  Cluster cluster(3);
  cluster.run([&](int rank, Engine& engine) {
    for (DataType t :
         {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16}) {
      for (bool alone : {true, false}) {
        auto in = buffer(t, 64, [&](size_t i) { return valueOf(rank, 1, i); });
        auto out = in;
        auto other = in;
        OpOptions o{ReduceOp::kSum, 2.0, 0.25};  // (2x + 2y + 2z) / 4
        const std::string n = std::string("scaled.") + dataTypeName(t) + (alone ? ".a" : ".b");
        Handle h = engine.allreduce(n, in.data(), out.data(), {64}, t, o);
        Handle h2;
        if (!alone) h2 = engine.allreduce(n + ".2", other.data(), other.data(), {64}, t, o);
        h.wait();
        if (h2.valid()) h2.wait();
        for (size_t i = 0; i < 64; ++i) {
          const double want = (valueOf(0, 1, i) + valueOf(1, 1, i) + valueOf(2, 1, i)) * 0.5;
          EXPECT_EQ(loadElement(t, out.data(), i), want) << dataTypeName(t) << " " << i;
          if (h2.valid()) {
            EXPECT_EQ(loadElement(t, other.data(), i), want);
          }
        }
        // The input is untouched (out of place).
        EXPECT_EQ(loadElement(t, in.data(), 3), valueOf(rank, 1, 3));
      }
    }
  });
}

// Horovod scales integers in float64 and truncates toward zero: each rank's input by the
// prescale, then the sum (divided by the ranks for an average) by the postscale, rounded once
// at the end — in a fused allreduce, alone, and in a reducescatter.
TEST(Engine, IntegerPrescaleAndPostscaleTruncateTowardZeroAsHorovodDoes) {
  Cluster cluster(3);
  cluster.run([&](int rank, Engine& engine) {
    auto input = [&](int r, size_t i) { return static_cast<double>((r * 5 + i * 3) % 11) - 5; };
    for (DataType t : {DataType::kInt32, DataType::kInt64, DataType::kInt16, DataType::kInt8}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
        for (auto [pre, post] : {std::pair{1.5, 1.0}, {1.0, 0.7}, {2.5, -1.5}, {0.5, 3.0}}) {
          auto want = [&](size_t i) {
            double sum = 0;
            for (int r = 0; r < 3; ++r) sum += std::trunc(input(r, i) * pre);
            // An average without a postscale divides the integers as C does (toward zero).
            if (op == ReduceOp::kAverage) sum /= 3;
            return std::trunc(sum * post);
          };
          auto in = buffer(t, 9, [&](size_t i) { return input(rank, i); });
          auto out = in;
          auto alone = in;
          const std::string n = std::string("int.") + dataTypeName(t) + "." +
                                std::to_string(static_cast<int>(op)) + "." + std::to_string(pre) +
                                "." + std::to_string(post);
          OpOptions o{op, pre, post};
          Handle fused = engine.allreduce(n + ".a", in.data(), out.data(), {9}, t, o);
          Handle other = engine.allreduce(n + ".b", alone.data(), alone.data(), {9}, t, o);
          Handle scattered = engine.reducescatter(n + ".rs", in.data(), {9}, t, o);
          fused.wait();
          other.wait();
          scattered.wait();
          for (size_t i = 0; i < 9; ++i) {
            EXPECT_EQ(loadElement(t, out.data(), i), want(i)) << n << " element " << i;
            EXPECT_EQ(loadElement(t, alone.data(), i), want(i)) << n << " element " << i;
          }
          for (size_t i = 0; i < 3; ++i) {  // 9 rows over 3 ranks: rows 3r..3r+2
            EXPECT_EQ(loadElement(t, scattered.output().data(), i), want(3 * rank + i))
                << n << " reducescatter element " << i;
          }
        }
      }
    }
  });
}

// `v` as a buffer of type `t` holds it (the engine's own conversion, common/element.h).
double asStored(DataType t, double v) {
  uint8_t b[8];
  storeElement(t, b, 0, v);
  return loadElement(t, b, 0);
}

// Values that float16 cannot hold, so that compression changes the result: multiples of 2^-8
// in [0.5, 1) plus less than half a float16 ulp there (2^-12), exact in float32. Their float16
// roundings are those multiples of 2^-8, whose sums over 4 ranks (below 4) float16 holds
// exactly: the engine's float16 sum is the same in any reduction order, so the test can
// compute it.
double notHalfExact(int rank, size_t i) {
  return 0.5 + static_cast<double>((rank * 37 + i * 11) % 128) / 256 + 0.00005 * (rank + 1);
}

TEST(Engine, Fp16CompressionSendsHalfAndCastsBack) {
  constexpr int kRanks = 4;
  constexpr size_t kCount = 1000;
  Cluster cluster(kRanks);
  cluster.run([&](int rank, Engine& engine) {
    for (DataType t : {DataType::kFloat32, DataType::kFloat64}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMax}) {
        auto in = buffer(t, kCount, [&](size_t i) { return notHalfExact(rank, i); });
        auto out = in;
        auto plain = in;
        OpOptions o;
        o.op = op;
        o.fp16Compression = true;
        const std::string name = std::string("fp16.") + dataTypeName(t) + "." + reduceOpName(op);
        const uint64_t before = engine.stats().bytes;
        engine.allreduce(name, in.data(), out.data(), {kCount}, t, o).wait();
        const uint64_t compressedBytes = engine.stats().bytes - before;
        o.fp16Compression = false;
        engine.allreduce(name + ".plain", in.data(), plain.data(), {kCount}, t, o).wait();
        const uint64_t plainBytes = engine.stats().bytes - before - compressedBytes;
        // Each rank sends its tensor as float16: 2 bytes an element, against the type's size.
        EXPECT_EQ(compressedBytes, kCount * 2) << name;
        EXPECT_EQ(plainBytes, kCount * dataTypeSize(t)) << name;

        for (size_t i = 0; i < kCount; ++i) {
          // The engine's definition: each input cast to float16, reduced in float16 (exact
          // here, see notHalfExact), cast back; an average divides after the cast back.
          double viaHalf = op == ReduceOp::kMax ? -100 : 0;
          double exact = op == ReduceOp::kMax ? -100 : 0;
          for (int r = 0; r < kRanks; ++r) {
            const double x = asStored(t, notHalfExact(r, i));
            const double h = asStored(DataType::kFloat16, x);
            viaHalf = op == ReduceOp::kMax ? std::max(viaHalf, h) : viaHalf + h;
            exact = op == ReduceOp::kMax ? std::max(exact, x) : exact + x;
          }
          if (op == ReduceOp::kAverage) viaHalf /= kRanks;
          const double got = loadElement(t, out.data(), i);
          ASSERT_EQ(got, asStored(t, viaHalf)) << name << " element " << i;
          // Compression was not ignored: the uncompressed op gives another value.
          ASSERT_NE(got, loadElement(t, plain.data(), i)) << name << " element " << i;
          if (op != ReduceOp::kAverage) {
            ASSERT_EQ(loadElement(t, plain.data(), i), asStored(t, exact)) << name << " " << i;
          }
        }
      }
    }
  });
}

// EngineStats::bytes: the payload of each data collective as sent (hvd/engine.hpp).
TEST(Engine, StatsCountPayloadBytesAsSentForEveryOpType) {
  Cluster cluster(2);
  cluster.run([&](int rank, Engine& engine) {
    auto delta = [&](const std::function<Handle()>& submit) {
      const uint64_t before = engine.stats().bytes;
      submit().wait();
      return engine.stats().bytes - before;
    };
    std::vector<float> a(5, 1.0f), b(7, 2.0f);
    for (bool compressed : {false, true}) {
      OpOptions o{ReduceOp::kSum};
      o.fp16Compression = compressed;
      const std::string n = compressed ? "bytes.g16." : "bytes.g32.";
      // A fused batch counts its fused buffer: 12 elements.
      EXPECT_EQ(delta([&] {
                  return engine.groupedAllreduce({n + "a", n + "b"}, {a.data(), b.data()},
                                                 {a.data(), b.data()}, {{5}, {7}},
                                                 DataType::kFloat32, o);
                }),
                compressed ? 24u : 48u);
    }
    // Allgather: the gathered result (1 + 2 rows of 3 float64).
    std::vector<double> rows(static_cast<size_t>(3 * (rank + 1)), 1.0);
    EXPECT_EQ(
        delta([&] {
          return engine.allgather("bytes.gather", rows.data(), {rank + 1, 3}, DataType::kFloat64);
        }),
        72u);
    std::vector<int32_t> ints(10, rank);
    EXPECT_EQ(delta([&] {
                return engine.broadcast("bytes.bcast", ints.data(), {10}, DataType::kInt32, 1);
              }),
              40u);
    std::vector<float> rs(8, 1.0f);
    EXPECT_EQ(delta([&] {
                return engine.reducescatter("bytes.rs", rs.data(), {4, 2}, DataType::kFloat32,
                                            {ReduceOp::kSum});
              }),
              32u);
    // Alltoall: what this rank sends (4 rows of 1 byte, split unevenly).
    std::vector<int8_t> bytes(4, 1);
    const std::vector<int64_t> splits =
        rank == 0 ? std::vector<int64_t>{1, 3} : std::vector<int64_t>{2, 2};
    EXPECT_EQ(delta([&] {
                return engine.alltoall("bytes.a2a", bytes.data(), {4, 1}, splits, DataType::kInt8);
              }),
              4u);
    EXPECT_EQ(delta([&] { return engine.barrier(); }), 0u);
  });
}

TEST(Engine, EveryReduceOpOnEveryTypeIsExact) {
  Cluster cluster(3);
  cluster.run([&](int rank, Engine& engine) {
    std::vector<Handle> handles;
    std::vector<std::vector<uint8_t>> outs;
    std::vector<std::tuple<DataType, ReduceOp>> cases;
    outs.reserve(kNumDataTypes * kNumReduceOps);
    for (DataType t : kTypes) {
      for (int o = 0; o < kNumReduceOps; ++o) {
        const ReduceOp op = static_cast<ReduceOp>(o);
        if (op == ReduceOp::kAdasum) continue;  // not element-wise: adasum_test.cc
        // Products stay small: values in {1, 2, -1} (unsigned: {1, 2}).
        auto in = buffer(t, 50, [&](size_t i) {
          if (op != ReduceOp::kProduct) return nonNegative(t, valueOf(rank, o, i));
          const int v = static_cast<int>((rank + i) % 3);
          return v == 2 && t != DataType::kUInt8 ? -1.0 : static_cast<double>(v + 1);
        });
        outs.push_back(in);
        cases.emplace_back(t, op);
        handles.push_back(
            engine.allreduce(std::string("op.") + dataTypeName(t) + "." + reduceOpName(op),
                             outs.back().data(), outs.back().data(), {50}, t, {op}));
      }
    }
    for (size_t c = 0; c < handles.size(); ++c) {
      handles[c].wait();
      const auto [t, op] = cases[c];
      std::vector<uint8_t> want(50 * dataTypeSize(t) + 1);
      for (size_t i = 0; i < 50; ++i) {
        double acc = 0;
        for (int r = 0; r < 3; ++r) {
          double v;
          if (op == ReduceOp::kProduct) {
            const int k = static_cast<int>((r + i) % 3);
            v = k == 2 && t != DataType::kUInt8 ? -1.0 : k + 1;
          } else {
            v = nonNegative(t, valueOf(r, static_cast<int>(op), i));
          }
          if (r == 0) {
            acc = v;
          } else if (op == ReduceOp::kMin) {
            acc = std::min(acc, v);
          } else if (op == ReduceOp::kMax) {
            acc = std::max(acc, v);
          } else if (op == ReduceOp::kProduct) {
            acc *= v;
          } else {
            acc += v;
          }
        }
        storeElement(t, want.data(), i, acc);
      }
      if (op == ReduceOp::kAverage) coll::finishAverage(t, want.data(), 50, 3);
      for (size_t i = 0; i < 50; ++i) {
        ASSERT_EQ(loadElement(t, outs[c].data(), i), loadElement(t, want.data(), i))
            << dataTypeName(t) << " " << reduceOpName(op) << " element " << i;
      }
    }
  });
}

// Each round holds one rank back until the others have seen their n-th barrier stay pending
// through several cycles of their engines (engine threads cycle together whether or not the
// held rank's thread submits, so a barrier that completed without it would be done by then),
// then lets it submit: every n-th barrier completes only after that.
TEST(Engine, BarriersCompleteWhenEveryRankSubmittedTheNth) {
  constexpr int kRanks = 3;
  constexpr int kRounds = 5;
  Cluster cluster(kRanks);
  std::mutex mutex;
  std::condition_variable changed;
  int checked[kRounds] = {};  // ranks that saw their n-th barrier pending while one was held
  cluster.run([&](int rank, Engine& engine) {
    for (int n = 0; n < kRounds; ++n) {
      const int held = n % kRanks;
      if (rank == held) {
        std::unique_lock<std::mutex> lock(mutex);
        ASSERT_TRUE(changed.wait_for(lock, 60s, [&] { return checked[n] == kRanks - 1; }))
            << "round " << n << ": the other ranks never checked their barriers";
      }
      Handle h = engine.barrier();
      if (rank != held) {
        const uint64_t submitted = engine.stats().cycles;
        while (engine.stats().cycles < submitted + 3) std::this_thread::sleep_for(1ms);
        EXPECT_FALSE(h.poll()) << "rank " << rank << "'s barrier " << n << " completed before rank "
                               << held << " submitted its own";
        {
          std::lock_guard<std::mutex> lock(mutex);
          ++checked[n];
        }
        changed.notify_all();
      }
      ASSERT_TRUE(h.waitFor(60s)) << "rank " << rank << ": barrier " << n << " never completed";
      EXPECT_TRUE(h.poll());
    }
  });
}

TEST(Engine, ApiBeforeInitIsAnInvalidArgument) {
  ASSERT_FALSE(hvd::isInitialized());
  float x = 1;
  EXPECT_THROW(hvd::allreduceAsync("x", &x, &x, {1}, DataType::kFloat32), InvalidArgumentError);
  EXPECT_THROW(hvd::barrierAsync(), InvalidArgumentError);
  EXPECT_THROW(hvd::join(), InvalidArgumentError);
}

TEST(Engine, StopsInStepWithPendingOpsFailingClearly) {
  Handle pending;
  float x[4] = {1, 2, 3, 4};
  {
    Cluster cluster(2);
    // Only rank 0 submits: the op can never run; shutting down fails it instead of hanging.
    pending = cluster.engine(0).allreduce("never", x, x, {4}, DataType::kFloat32, {});
  }
  EXPECT_NE(errorOf(pending).find("shut hvd down"), std::string::npos) << errorOf(pending);
}

// A peer that goes away is a failure of the job (PeerError: HorovodInternalError in Python), on
// the op pending here and on every later submit, naming the rank and what it did — never an
// invalid argument of this rank's caller.
TEST(Engine, APeerThatExitsOrShutsDownFailsPendingOpsAndLaterSubmitsNamingIt) {
  for (const char* reason : {engine::kStopExiting, engine::kStopShutdown}) {
    Cluster cluster(3);
    float x[4] = {1, 2, 3, 4};
    Handle pending = cluster.engine(0).allreduce("never", x, x, {4}, DataType::kFloat32, {});
    cluster.destroy(2, reason);
    try {
      pending.wait();
      ADD_FAILURE() << "the pending op succeeded";
    } catch (const PeerError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("rank 2 ") + reason), std::string::npos)
          << e.what();
    }
    // Rank 1 may submit before its engine thread has taken in the stop (then the op fails at
    // wait) or after (then the submit throws): the same error either way.
    try {
      cluster.engine(1).allreduce("later", x, x, {4}, DataType::kFloat32, {}).wait();
      ADD_FAILURE() << "an op submitted after the stop succeeded";
    } catch (const PeerError& e) {
      EXPECT_NE(std::string(e.what()).find("rank 2 "), std::string::npos) << e.what();
    }
  }
}

// A name stays taken until its handle was waited on, however fast the engine ran the op: the
// second submit of a name is refused even when the first op has finished on every rank (polled
// until done, which gives nothing back), 200 times in a row.
TEST(Engine, ANameStaysInFlightUntilItsHandleIsWaitedOnNotUntilTheOpRan) {
  Cluster cluster(2);
  cluster.run([&](int rank, Engine& engine) {
    float x[2] = {1, 2};
    for (int round = 0; round < 200; ++round) {
      Handle first = engine.allreduce("dup", x, x, {2}, DataType::kFloat32, {ReduceOp::kSum});
      while (!first.poll()) std::this_thread::yield();  // the op ran on every rank
      EXPECT_THROW(engine.allreduce("dup", x, x, {2}, DataType::kFloat32, {}), InvalidArgumentError)
          << "rank " << rank << " round " << round;
      first.wait();  // gives the name back: the next round may submit it again
    }
    // A handle dropped without a wait gives its name back once the op has finished too.
    {
      Handle dropped = engine.allreduce("dropped", x, x, {2}, DataType::kFloat32, {});
      while (!dropped.poll()) std::this_thread::yield();
    }
    Handle again = engine.allreduce("dropped", x, x, {2}, DataType::kFloat32, {});
    again.wait();
  });
}

// hvd::engineStats(): an InvalidArgumentError before init, zeros until the first async op
// starts the engine (asking does not start it), then this rank's counters.
TEST(Engine, StatsThroughTheApiAreZeroUntilTheEngineStarts) {
  ASSERT_FALSE(hvd::isInitialized());
  EXPECT_THROW(hvd::engineStats(), InvalidArgumentError);
  for (const char* name : {"HVD_RANK", "HVD_LOCAL_RANK", "HVD_CROSS_RANK"}) setenv(name, "0", 1);
  for (const char* name : {"HVD_SIZE", "HVD_LOCAL_SIZE", "HVD_CROSS_SIZE"}) setenv(name, "1", 1);
  setenv("HVD_JOB_ID", "engine-stats-test", 1);
  hvd::init();
  const hvd::EngineStats idle = hvd::engineStats();
  EXPECT_EQ(idle.cycles, 0u);
  EXPECT_EQ(idle.responses, 0u);
  EXPECT_EQ(idle.bytes, 0u);
  std::vector<float> x(25, 1.0f);
  hvd::allreduceAsync("api.stats", x.data(), x.data(), {25}, DataType::kFloat32).wait();
  const hvd::EngineStats ran = hvd::engineStats();
  EXPECT_GE(ran.cycles, 1u);
  EXPECT_EQ(ran.responses, 1u);
  EXPECT_EQ(ran.collectives, 1u);
  EXPECT_EQ(ran.bytes, 100u);
  hvd::shutdown();
}

}  // namespace
}  // namespace hvd::enginetest
