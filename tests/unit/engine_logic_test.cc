// The engine's pure logic: request (de)serialisation, the response cache, mismatch messages,
// stall decisions with a fake clock, fusion planning, conversions, and the replicated
// negotiation state driven by hand (no transport).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "engine/controller.h"
#include "engine/executor.h"
#include "engine/mismatch.h"
#include "engine/request.h"
#include "engine/response_cache.h"
#include "engine/stall.h"
#include "hvd/error.hpp"

namespace hvd::engine {
namespace {

using namespace std::chrono_literals;

Request allreduce(const std::string& name, Shape shape, DataType type = DataType::kFloat32) {
  Request r;
  r.name = name;
  r.type = OpType::kAllreduce;
  r.dtype = type;
  r.shape = std::move(shape);
  r.reduceOp = ReduceOp::kSum;
  return r;
}

TEST(Request, BatchRoundTripsEveryField) {
  Request a = allreduce("fc1.weight", {17, 18}, DataType::kBFloat16);
  a.reduceOp = ReduceOp::kAverage;
  a.prescale = 0.5;
  a.postscale = 3.25;
  a.fp16 = true;
  a.groupId = 0x1234567890abcdefull;
  a.groupSize = 3;
  Request b;
  b.name = "";
  b.type = OpType::kAlltoall;
  b.dtype = DataType::kInt64;
  b.shape = {6, 2};
  b.root = 2;
  b.device = 1;
  b.splits = {1, 2, 3};
  Request c = allreduce("int16", {5}, DataType::kInt16);  // the highest dtype code, 8
  const std::string bytes = serializeRequests({a, b, c});
  const auto back = parseRequests(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  ASSERT_EQ(back.size(), 3u);
  EXPECT_TRUE(sameMetadata(back[0], a));
  EXPECT_TRUE(sameMetadata(back[1], b));
  EXPECT_TRUE(sameMetadata(back[2], c));
  EXPECT_EQ(back[2].dtype, DataType::kInt16);
  EXPECT_EQ(back[2].bytes(), 10u);
  const std::string empty = serializeRequests({});
  EXPECT_TRUE(parseRequests(reinterpret_cast<const uint8_t*>(empty.data()), empty.size()).empty());
}

TEST(Request, MalformedBatchesThrowInsteadOfReadingPastTheEnd) {
  const std::string bytes = serializeRequests({allreduce("x", {3, 4})});
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    EXPECT_THROW(parseRequests(data, cut), InternalError) << cut;
  }
  std::string trailing = bytes + "x";
  EXPECT_THROW(parseRequests(reinterpret_cast<const uint8_t*>(trailing.data()), trailing.size()),
               InternalError);
  std::string huge = bytes;
  const uint32_t count = 0x7fffffff;
  std::memcpy(&huge[4], &count, 4);  // a count the buffer cannot hold: refused before reserving
  EXPECT_THROW(parseRequests(reinterpret_cast<const uint8_t*>(huge.data()), huge.size()),
               InternalError);
  std::string badType = bytes;
  badType[8 + 2 + 1] = 99;  // after magic, count, name length and name
  EXPECT_THROW(parseRequests(reinterpret_cast<const uint8_t*>(badType.data()), badType.size()),
               InternalError);
}

TEST(Request, GroupIdsDependOnNamesAndTheirBoundaries) {
  EXPECT_EQ(groupIdOf({"a", "b"}), groupIdOf({"a", "b"}));
  EXPECT_NE(groupIdOf({"ab", "c"}), groupIdOf({"a", "bc"}));
  EXPECT_NE(groupIdOf({"a", "b"}), 0u);
}

TEST(ResponseCache, HitsOnlyIdenticalMetadataAndEvictsLeastRecentlyUsed) {
  ResponseCache cache(2);
  cache.put(allreduce("a", {4}));
  cache.put(allreduce("b", {4}));
  EXPECT_EQ(cache.lookup(allreduce("a", {4})), 0u);
  EXPECT_EQ(cache.lookup(allreduce("b", {4})), 1u);
  EXPECT_FALSE(cache.lookup(allreduce("a", {5})));  // same name, other shape
  EXPECT_EQ(cache.slotOf("a"), 0u);
  cache.touch(0);                  // b is now the least recently used
  cache.put(allreduce("c", {4}));  // evicts b, reuses its slot
  EXPECT_FALSE(cache.slotOf("b"));
  EXPECT_EQ(cache.lookup(allreduce("c", {4})), 1u);
  EXPECT_EQ(cache.slotCount(), 2u);
  cache.erase("a");
  EXPECT_EQ(cache.at(0), nullptr);
  cache.put(allreduce("d", {1}));  // lowest free slot first
  EXPECT_EQ(cache.slotOf("d"), 0u);
  cache.put(allreduce("d", {2}));  // same name: replaced in place
  EXPECT_EQ(cache.lookup(allreduce("d", {2})), 0u);
  EXPECT_EQ(cache.size(), 2u);
}

TEST(ResponseCache, CapacityZeroCachesNothing) {
  ResponseCache cache(0);
  cache.put(allreduce("a", {4}));
  EXPECT_EQ(cache.slotCount(), 0u);
  EXPECT_FALSE(cache.lookup(allreduce("a", {4})));
}

std::string check(const std::vector<Request>& requests) {
  std::vector<const Request*> pointers;
  for (const auto& r : requests) pointers.push_back(&r);
  return checkAgreement(pointers);
}

TEST(Mismatch, NamesTheOpTensorFieldAndRanksGroupedByValue) {
  EXPECT_EQ(check({allreduce("fc1.weight", {17, 17}), allreduce("fc1.weight", {17, 18}),
                   allreduce("fc1.weight", {17, 17})}),
            "allreduce 'fc1.weight': shape [17,18] on rank 1, [17,17] on ranks 0,2");
  EXPECT_EQ(check({allreduce("w", {17, 17}), allreduce("w", {17, 17}), allreduce("w", {289})}),
            "allreduce 'w': shape [289] on rank 2, [17,17] on ranks 0,1");
  EXPECT_EQ(check({allreduce("w", {2}, DataType::kFloat64), allreduce("w", {2})}),
            "allreduce 'w': dtype float64 on rank 0, float32 on rank 1");
  EXPECT_EQ(check({allreduce("w", {2}, DataType::kInt32), allreduce("w", {2}, DataType::kInt16),
                   allreduce("w", {2}, DataType::kInt16)}),
            "allreduce 'w': dtype int32 on rank 0, int16 on ranks 1,2");
  auto maxOp = allreduce("w", {2});
  maxOp.reduceOp = ReduceOp::kMax;
  EXPECT_EQ(check({allreduce("w", {2}), maxOp, allreduce("w", {2})}),
            "allreduce 'w': op max on rank 1, sum on ranks 0,2");
  auto scaled = allreduce("w", {2});
  scaled.prescale = 0.5;
  EXPECT_EQ(check({allreduce("w", {2}), scaled}),
            "allreduce 'w': prescale factor 1 on rank 0, 0.5 on rank 1");
  auto compressed = allreduce("w", {2});
  compressed.fp16 = true;
  EXPECT_EQ(check({compressed, allreduce("w", {2})}),
            "allreduce 'w': fp16 compression on on rank 0, off on rank 1");
  Request b = allreduce("x", {2});
  b.type = OpType::kBroadcast;
  EXPECT_EQ(check({allreduce("x", {2}), allreduce("x", {2}), b}),
            "'x': broadcast on rank 2, allreduce on ranks 0,1");
  Request root1 = b;
  root1.root = 1;
  EXPECT_EQ(check({b, b, root1}), "broadcast 'x': root 1 on rank 2, 0 on ranks 0,1");
  // Joined ranks (null) take no part; allgather's dimension 0 may differ.
  Request g0 = allreduce("g", {3, 4});
  g0.type = OpType::kAllgather;
  Request g1 = g0;
  g1.shape = {5, 4};
  std::vector<const Request*> withJoined{&g0, nullptr, &g1};
  EXPECT_EQ(checkAgreement(withJoined), "");
  Request g2 = g0;
  g2.shape = {3, 5};
  EXPECT_EQ(check({g0, g2}), "allgather 'g': shape [*,4] on rank 0, [*,5] on rank 1");
  EXPECT_EQ(check({allreduce("w", {2}), allreduce("w", {2})}), "");
}

TEST(Stall, WarnsOncePerOpAfterTheCheckTimeAndShutsDownAfterTheShutdownTime) {
  StallInspector inspector(1000ms, 3000ms);
  const auto t0 = Clock::now();
  std::vector<WaitingOp> waiting{{"w", {2}, t0}, {"v", {1, 2}, t0 + 500ms}};
  EXPECT_EQ(inspector.inspect(waiting, t0 + 900ms).warning, "");
  auto v = inspector.inspect(waiting, t0 + 1100ms);
  EXPECT_NE(v.warning.find("stalled ops: 'w' waits on rank 2"), std::string::npos) << v.warning;
  EXPECT_EQ(v.warning.find("'v'"), std::string::npos) << v.warning;
  EXPECT_FALSE(v.shutdown);
  v = inspector.inspect(waiting, t0 + 1600ms);  // 'w' already reported, 'v' is new
  EXPECT_NE(v.warning.find("'v' waits on ranks 1,2"), std::string::npos) << v.warning;
  EXPECT_EQ(v.warning.find("'w'"), std::string::npos) << v.warning;
  EXPECT_EQ(inspector.inspect(waiting, t0 + 2000ms).warning, "");
  EXPECT_TRUE(inspector.inspect(waiting, t0 + 3000ms).shutdown);
  EXPECT_EQ(inspector.shutdownMessage(waiting).find("stall:"), 0u);
  EXPECT_NE(inspector.shutdownMessage(waiting).find("'w' waits on rank 2; 'v' waits on ranks 1,2"),
            std::string::npos);
  // A new instance of a name (a later first-seen time) is reported again.
  std::vector<WaitingOp> again{{"w", {0}, t0 + 5000ms}};
  EXPECT_NE(inspector.inspect(again, t0 + 6100ms).warning.find("'w' waits on rank 0"),
            std::string::npos);
}

TEST(Stall, ZeroDisablesChecksAndShutdown) {
  StallInspector off(0ms, 3000ms);
  const auto t0 = Clock::now();
  const auto v = off.inspect({{"w", {2}, t0}}, t0 + 3600s);
  EXPECT_EQ(v.warning, "");
  EXPECT_FALSE(v.shutdown);
  StallInspector never(1000ms, 0ms);
  const auto w = never.inspect({{"w", {2}, t0}}, t0 + 3600s);
  EXPECT_NE(w.warning, "");
  EXPECT_FALSE(w.shutdown);
}

Response run(Request r) {
  Response response;
  response.request = std::move(r);
  return response;
}

TEST(Fusion, PlansBatchesOfCompatibleAllreducesUpToTheThresholdAndKeepsGroupsWhole) {
  std::vector<Response> rs;
  rs.push_back(run(allreduce("a", {10})));  // 40 bytes
  rs.push_back(run(allreduce("b", {10})));
  rs.push_back(run(allreduce("c", {10}, DataType::kFloat64)));  // other type: new batch
  rs.push_back(run(allreduce("d", {10})));
  Request g1 = allreduce("g1", {100}), g2 = allreduce("g2", {100});
  g1.groupId = g2.groupId = 7;
  g1.groupSize = g2.groupSize = 2;
  rs.push_back(run(g1));
  rs.push_back(run(g2));
  Request bc = allreduce("e", {1});
  bc.type = OpType::kBroadcast;
  rs.push_back(run(bc));
  using Batches = std::vector<std::pair<size_t, size_t>>;
  EXPECT_EQ(planBatches(rs, 80), (Batches{{0, 2}, {2, 3}, {3, 4}, {4, 6}, {6, 7}}));
  EXPECT_EQ(planBatches(rs, 1 << 20), (Batches{{0, 2}, {2, 3}, {3, 6}, {6, 7}}));
  EXPECT_EQ(planBatches(rs, 0), (Batches{{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 6}, {6, 7}}));
  // fp16 compression halves the bytes that count against the threshold.
  std::vector<Response> half;
  for (const char* n : {"x", "y"}) {
    Request r = allreduce(n, {10});
    r.fp16 = true;
    half.push_back(run(r));
  }
  EXPECT_EQ(planBatches(half, 40), (Batches{{0, 2}}));
  // int16 fuses with int16 only, at 2 bytes an element.
  std::vector<Response> shorts;
  shorts.push_back(run(allreduce("s1", {10}, DataType::kInt16)));  // 20 bytes
  shorts.push_back(run(allreduce("s2", {10}, DataType::kInt16)));
  shorts.push_back(run(allreduce("i", {5}, DataType::kInt32)));  // 20 bytes, other type
  shorts.push_back(run(allreduce("s3", {10}, DataType::kInt16)));
  EXPECT_EQ(planBatches(shorts, 40), (Batches{{0, 2}, {2, 3}, {3, 4}}));
}

TEST(Fusion, ConvertScaledCastsAndScales) {
  const float in[3] = {1, 2, 3};
  uint16_t half[3];
  convertScaled(DataType::kFloat32, in, DataType::kFloat16, half, 3, 2.0, 1);
  float back[3];
  convertScaled(DataType::kFloat16, half, DataType::kFloat32, back, 3, 1.0, 2);
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_EQ(back[2], 3.0f);
  int32_t ints[2] = {1, 2}, copy[2];
  convertScaled(DataType::kInt32, ints, DataType::kInt32, copy, 2, 1.0, 1);
  EXPECT_EQ(copy[1], 2);
  // Integers are scaled in float64 and truncated toward zero, as Horovod scales them.
  convertScaled(DataType::kInt32, ints, DataType::kInt32, copy, 2, 2.5, 1);
  EXPECT_EQ(copy[0], 2);
  EXPECT_EQ(copy[1], 5);
  int16_t shorts[2] = {-7, 32767}, shortCopy[2];
  convertScaled(DataType::kInt16, shorts, DataType::kInt16, shortCopy, 2, 1.0, 1);
  EXPECT_EQ(shortCopy[0], -7);
  EXPECT_EQ(shortCopy[1], 32767);
  convertScaled(DataType::kInt16, shorts, DataType::kInt16, shortCopy, 2, 0.5, 1);
  EXPECT_EQ(shortCopy[0], -3);  // -3.5 toward zero
  EXPECT_EQ(shortCopy[1], 16383);
  int64_t longs[2] = {7, -9}, longCopy[2];
  // v / 2 * 3: 10.5 and -13.5, toward zero.
  convertScaled(DataType::kInt64, longs, DataType::kInt64, longCopy, 2, 3.0, 2);
  EXPECT_EQ(longCopy[0], 10);
  EXPECT_EQ(longCopy[1], -13);
}

// The controller driven by hand for 3 ranks: what every rank computes from the same inputs.
TEST(Controller, TableMakesOpsReadyWhenEveryRankSentThemThenTheCacheTakesOver) {
  Controller c(0, 3, 16);
  auto bits = [&](std::vector<std::vector<size_t>> hits, std::vector<BitFlags> flags) {
    std::vector<uint8_t> reduced;
    for (int r = 0; r < 3; ++r) {
      // Flags and slot bytes do not depend on the rank (only the "joined" byte does).
      auto mine = c.makeBits(hits[r], flags[r]);
      if (reduced.empty()) {
        reduced = mine;
      } else {
        for (size_t i = 0; i < mine.size(); ++i) reduced[i] = std::min(reduced[i], mine[i]);
      }
    }
    return reduced;
  };
  BitFlags sent;
  sent.uncached = true;
  auto any = c.applyBits(bits({{}, {}, {}}, {sent, {}, {}}));
  EXPECT_TRUE(any.uncached);
  c.applyRequests({{allreduce("a", {4})}, {}, {}}, Clock::now());
  EXPECT_TRUE(c.takeResponses().empty());
  ASSERT_EQ(c.waitingOps().size(), 1u);
  EXPECT_EQ(c.waitingOps()[0].missingRanks, (std::vector<int>{1, 2}));
  c.applyBits(bits({{}, {}, {}}, {{}, sent, sent}));
  c.applyRequests({{}, {allreduce("a", {4})}, {allreduce("a", {4})}}, Clock::now());
  auto responses = c.takeResponses();
  ASSERT_EQ(responses.size(), 1u);
  EXPECT_EQ(responses[0].kind, Response::Kind::kRun);
  EXPECT_EQ(responses[0].cacheSlot, -1);
  c.recordSuccess(responses[0]);
  ASSERT_EQ(c.cache().lookup(allreduce("a", {4})), 0u);
  // Next time every rank sets the slot's bit: ready from the cache alone.
  any = c.applyBits(bits({{0}, {0}, {0}}, {{}, {}, {}}));
  EXPECT_FALSE(any.uncached);
  responses = c.takeResponses();
  ASSERT_EQ(responses.size(), 1u);
  EXPECT_EQ(responses[0].cacheSlot, 0);
  // One rank missing: not ready.
  c.applyBits(bits({{0}, {}, {0}}, {{}, {}, {}}));
  EXPECT_TRUE(c.takeResponses().empty());
}

TEST(Controller, JoinTiesGoToTheHighestRankAndJoinedRanksDoNotHoldOpsBack) {
  auto reduce = [](const std::vector<std::vector<uint8_t>>& all) {
    std::vector<uint8_t> out = all[0];
    for (const auto& v : all) {
      for (size_t i = 0; i < v.size(); ++i) out[i] = std::min(out[i], v[i]);
    }
    return out;
  };
  std::vector<Controller> ranks;
  for (int r = 0; r < 3; ++r) ranks.emplace_back(r, 3, 4);
  BitFlags joined;
  joined.joined = true;
  // Rank 0 joins; an op sent by ranks 1 and 2 is ready without it.
  std::vector<std::vector<uint8_t>> bits;
  for (int r = 0; r < 3; ++r) {
    BitFlags f = r == 0 ? joined : BitFlags{};
    f.uncached = r != 0;
    bits.push_back(ranks[r].makeBits({}, f));
  }
  for (auto& c : ranks) {
    const BitFlags any = c.applyBits(reduce(bits));
    EXPECT_FALSE(any.joined);
    EXPECT_EQ(c.lastJoined(), 0);
    c.applyRequests({{}, {allreduce("x", {2})}, {allreduce("x", {2})}}, Clock::now());
    const auto responses = c.takeResponses();
    ASSERT_EQ(responses.size(), 1u);
    EXPECT_EQ(responses[0].kind, Response::Kind::kRun);
  }
  // Ranks 1 and 2 join in the same cycle: the last to join is 2.
  bits.clear();
  for (int r = 0; r < 3; ++r) bits.push_back(ranks[r].makeBits({}, joined));
  for (auto& c : ranks) {
    EXPECT_TRUE(c.applyBits(reduce(bits)).joined);
    EXPECT_EQ(c.lastJoined(), 2);
    c.resetJoin();
    EXPECT_FALSE(c.anyJoined());
  }
}

}  // namespace
}  // namespace hvd::engine
