// NCCL communicators over the fake NCCL (ranks as threads, host memory as device memory) and an
// in-memory store: the unique-id exchange, the error and timeout paths of the bootstrap, the
// abort path, and the lazy communicator cache.
#include "gpu/nccl_comm.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/fake_nccl.h"
#include "gpu/comm_cache.h"
#include "hvd/error.hpp"
#include "hvd_support/logging.h"
#include "store/memory_store.h"

namespace {

using namespace std::chrono_literals;
using hvd::BackendError;
using hvd::DataType;
using hvd::ErrorKind;
using hvd::ReduceOp;
using hvd::TimeoutError;
using hvd::gpu::bootstrapComm;
using hvd::gpu::CommCache;
using hvd::gpu::commIdKey;
using hvd::gpu::CommSpec;
using hvd::gpu::NcclCommunicator;
using hvd::gpu::NcclResult;
using hvd::gpu::NcclUniqueId;
using hvd::test::FakeNcclApi;
using hvd::test::FakeNcclWorld;
using Clock = std::chrono::steady_clock;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string hex(const char* data, size_t size) {
  std::string out;
  char digits[3];
  for (size_t i = 0; i < size; ++i) {
    std::snprintf(digits, sizeof(digits), "%02x", static_cast<unsigned char>(data[i]));
    out += digits;
  }
  return out;
}

CommSpec makeSpec(const std::string& name, int rank, int size, std::chrono::milliseconds timeout) {
  CommSpec spec;
  spec.name = name;
  spec.rank = rank;
  spec.size = size;
  spec.timeout = timeout;
  spec.host = "h" + std::to_string(rank);
  return spec;
}

// Runs fn(rank) for each of `ranks` on its own thread and waits for all; an exception that
// escapes fn is a test failure.
template <class Fn>
void onRanks(const std::vector<int>& ranks, Fn fn) {
  std::vector<std::thread> threads;
  for (int rank : ranks) {
    threads.emplace_back([&fn, rank] {
      try {
        fn(rank);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "thread " << rank << " threw: " << e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
}

std::vector<int> allRanks(int np) {
  std::vector<int> ranks(static_cast<size_t>(np));
  for (int r = 0; r < np; ++r) ranks[static_cast<size_t>(r)] = r;
  return ranks;
}

// What bootstrapComm gave one rank.
struct Outcome {
  std::unique_ptr<NcclCommunicator> comm;
  std::string error;  // what() of the exception, empty without one
  std::optional<ErrorKind> kind;
  std::chrono::milliseconds took{0};
};

// Everything a subsystem's logger writes while this lives, and only here (not on stderr).
class LogCapture {
 public:
  explicit LogCapture(const std::string& subsystem)
      : logger_(hvd::logging::get(subsystem)),
        previousLevel_(logger_->level()),
        previousSinks_(logger_->sinks()) {
    logger_->set_level(spdlog::level::trace);
    logger_->sinks() = {std::make_shared<spdlog::sinks::ostream_sink_mt>(captured_)};
  }
  ~LogCapture() {
    logger_->sinks() = previousSinks_;
    logger_->set_level(previousLevel_);
  }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  std::string text() {
    logger_->flush();
    return captured_.str();
  }

 private:
  std::shared_ptr<spdlog::logger> logger_;
  spdlog::level::level_enum previousLevel_;
  std::vector<spdlog::sink_ptr> previousSinks_;
  std::ostringstream captured_;
};

// Records what passes through a MemoryStore (who set, read and erased which key).
class RecordingStore : public hvd::store::Store {
 public:
  void set(const std::string& key, const hvd::store::Bytes& value) override {
    note("set " + key);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      values_[key] = value;
    }
    inner_.set(key, value);
  }
  hvd::store::Bytes get(const std::string& key, hvd::store::Timeout timeout) override {
    note("get " + key);
    return inner_.get(key, timeout);
  }
  int64_t add(const std::string& key, int64_t delta) override { return inner_.add(key, delta); }
  hvd::store::Bytes compareSet(const std::string& key, const hvd::store::Bytes& expected,
                               const hvd::store::Bytes& desired) override {
    return inner_.compareSet(key, expected, desired);
  }
  void wait(const std::vector<std::string>& keys, hvd::store::Timeout timeout) override {
    inner_.wait(keys, timeout);
  }
  bool check(const std::vector<std::string>& keys) override { return inner_.check(keys); }
  void erase(const std::string& key) override {
    note("erase " + key);
    inner_.erase(key);
  }

  std::multiset<std::string> calls() {
    std::lock_guard<std::mutex> lock(mutex_);
    return calls_;
  }
  std::map<std::string, hvd::store::Bytes> values() {
    std::lock_guard<std::mutex> lock(mutex_);
    return values_;
  }

 private:
  void note(const std::string& call) {
    std::lock_guard<std::mutex> lock(mutex_);
    calls_.insert(call);
  }
  hvd::store::MemoryStore inner_;
  std::mutex mutex_;
  std::multiset<std::string> calls_;
  std::map<std::string, hvd::store::Bytes> values_;
};

class NcclCommTest : public ::testing::Test {
 protected:
  void makeApis(int np) {
    for (int r = 0; r < np; ++r) apis_.push_back(std::make_unique<FakeNcclApi>(world_));
  }

  // Bootstraps communicator `name` on each of `ranks` (of `size`); outcomes indexed by rank.
  std::vector<Outcome> bootstrap(const std::vector<int>& ranks, int size,
                                 std::chrono::milliseconds timeout,
                                 const std::string& name = "global", uint64_t generation = 0) {
    if (apis_.empty()) makeApis(size);
    std::vector<Outcome> outcomes(static_cast<size_t>(size));
    onRanks(ranks, [&](int rank) {
      CommSpec spec = makeSpec(name, rank, size, timeout);
      spec.generation = generation;
      Outcome& out = outcomes[static_cast<size_t>(rank)];
      const auto start = Clock::now();
      try {
        out.comm = bootstrapComm(*apis_[static_cast<size_t>(rank)], *store_, spec);
      } catch (const hvd::Error& e) {
        out.error = e.what();
        out.kind = e.kind();
      }
      out.took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    });
    return outcomes;
  }

  FakeNcclWorld world_;
  std::unique_ptr<hvd::store::Store> store_ = std::make_unique<hvd::store::MemoryStore>();
  std::vector<std::unique_ptr<FakeNcclApi>> apis_;
};

// ---- Bootstrap and a real collective through it.

class NcclCommSizes : public NcclCommTest, public ::testing::WithParamInterface<int> {};

TEST_P(NcclCommSizes, BootstrapThenAllreduceSumsEveryRanksInput) {
  const int np = GetParam();
  auto outcomes = bootstrap(allRanks(np), np, 5s);
  for (int r = 0; r < np; ++r) {
    const Outcome& out = outcomes[static_cast<size_t>(r)];
    ASSERT_TRUE(out.comm) << "rank " << r << ": " << out.error;
    EXPECT_EQ(out.comm->rank(), r);
    EXPECT_EQ(out.comm->size(), np);
    EXPECT_EQ(out.comm->name(), "global");
    EXPECT_EQ(out.comm->asyncError(), NcclResult::kSuccess);
  }
  std::vector<std::vector<float>> results(static_cast<size_t>(np));
  onRanks(allRanks(np), [&](int r) {
    NcclCommunicator& comm = *outcomes[static_cast<size_t>(r)].comm;
    std::vector<float> in(7);
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>((r + 1) * (i + 1));
    auto& out = results[static_cast<size_t>(r)];
    out.assign(in.size(), -1.0f);
    comm.check(comm.api().allReduce(in.data(), out.data(), in.size(), DataType::kFloat32,
                                    ReduceOp::kSum, comm.comm(), nullptr),
               "ncclAllReduce");
  });
  const float ranksSum = static_cast<float>(np * (np + 1) / 2);
  for (int r = 0; r < np; ++r) {
    for (size_t i = 0; i < 7; ++i) {
      EXPECT_EQ(results[static_cast<size_t>(r)][i], ranksSum * static_cast<float>(i + 1))
          << "rank " << r << " element " << i;
    }
    EXPECT_EQ(world_.collectives(outcomes[static_cast<size_t>(r)].comm->comm()), 1u);
  }
  EXPECT_EQ(world_.counters().inits, np);
  outcomes.clear();  // destroys the communicators
  const auto counters = world_.counters();
  EXPECT_EQ(counters.destroys, np);
  EXPECT_EQ(counters.aborts, 0);
  EXPECT_EQ(counters.misuses, 0);
}

INSTANTIATE_TEST_SUITE_P(Np, NcclCommSizes, ::testing::Values(1, 2, 4));

TEST_F(NcclCommTest, UniqueIdTravelsThroughTheStoreFromRankZeroOnly) {
  auto recording = std::make_unique<RecordingStore>();
  RecordingStore& store = *recording;
  store_ = std::move(recording);
  const int np = 3;
  auto outcomes = bootstrap(allRanks(np), np, 5s);
  for (const auto& out : outcomes) ASSERT_TRUE(out.comm) << out.error;

  const std::string key = commIdKey(makeSpec("global", 0, np, 5s));
  EXPECT_EQ(key, "nccl/0/global/id");
  EXPECT_EQ(apis_[0]->uniqueIdCalls(), 1);
  EXPECT_EQ(apis_[1]->uniqueIdCalls(), 0);
  EXPECT_EQ(apis_[2]->uniqueIdCalls(), 0);
  EXPECT_EQ(world_.counters().uniqueIds, 1);

  // Rank 0 set it once, each other rank read it, and rank 0 erased it once everyone had joined.
  const auto calls = store.calls();
  EXPECT_EQ(calls.count("set " + key), 1u);
  EXPECT_EQ(calls.count("get " + key), 2u);
  EXPECT_EQ(calls.count("erase " + key), 1u);
  EXPECT_EQ(calls.size(), 4u);
  const auto ids = world_.issuedIds();
  ASSERT_EQ(ids.size(), 1u);
  EXPECT_EQ(store.values().at(key), std::string(ids[0].bytes.data(), ids[0].bytes.size()));
  EXPECT_FALSE(store.check({key}));
}

TEST_F(NcclCommTest, IdKeysAreDistinctPerNameGenerationAndPrefix) {
  CommSpec spec = makeSpec("local/1", 0, 2, 1s);
  EXPECT_EQ(commIdKey(spec), "nccl/0/local/1/id");
  spec.generation = 3;
  EXPECT_EQ(commIdKey(spec), "nccl/3/local/1/id");
  spec.keyPrefix = "job7/";
  EXPECT_EQ(commIdKey(spec), "job7/nccl/3/local/1/id");
  std::set<std::string> keys;
  for (const char* name : {"global", "local", "cross", "local/0", "local/1", "cross/0"}) {
    for (uint64_t generation : {0u, 1u, 10u}) {
      CommSpec s = makeSpec(name, 0, 2, 1s);
      s.generation = generation;
      keys.insert(commIdKey(s));
    }
  }
  EXPECT_EQ(keys.size(), 18u);
}

// ---- Error paths of the bootstrap.

TEST_F(NcclCommTest, InitFailureNamesRankHostAndNcclsLastErrorOnEveryRank) {
  const std::string lastError = "socket connect to 10.0.0.7<57213> failed: Connection refused";
  world_.failInit(1, NcclResult::kSystemError, lastError);
  const int np = 3;
  auto outcomes = bootstrap(allRanks(np), np, 10s);

  const Outcome& failed = outcomes[1];
  EXPECT_FALSE(failed.comm);
  EXPECT_EQ(failed.kind, ErrorKind::kBackend);
  EXPECT_EQ(failed.error,
            "NCCL: ncclCommInitRank of communicator 'global' failed on rank 1 (host h1): "
            "ncclSystemError: unhandled system error (run with NCCL_DEBUG=INFO for details) (" +
                lastError + ")");
  // The peers learn of it as NCCL reports a closed bootstrap connection: a remote error, long
  // before their deadline.
  for (int r : {0, 2}) {
    const Outcome& out = outcomes[static_cast<size_t>(r)];
    EXPECT_FALSE(out.comm);
    EXPECT_EQ(out.kind, ErrorKind::kBackend) << out.error;
    EXPECT_TRUE(contains(out.error, "ncclCommInitRank of communicator 'global' failed on rank " +
                                        std::to_string(r) + " (host h" + std::to_string(r) +
                                        "): ncclRemoteError"))
        << out.error;
    EXPECT_TRUE(contains(out.error, "rank 1 failed during ncclCommInitRank")) << out.error;
    EXPECT_LT(out.took, 5s);
  }
  const auto counters = world_.counters();
  EXPECT_EQ(counters.aborts, 3);  // no communicator is left behind
  EXPECT_EQ(counters.destroys, 0);
  EXPECT_EQ(counters.misuses, 0);
  EXPECT_EQ(world_.blocked(), 0);
}

TEST_F(NcclCommTest, InitFailingAtOnceLeavesNoCommunicator) {
  world_.failInit(0, NcclResult::kInvalidUsage, "Duplicate GPU detected : rank 0 and rank 1",
                  /*immediate=*/true);
  auto outcomes = bootstrap(allRanks(2), 2, 10s);
  EXPECT_EQ(outcomes[0].error,
            "NCCL: ncclCommInitRank of communicator 'global' failed on rank 0 (host h0): "
            "ncclInvalidUsage: invalid usage (run with NCCL_DEBUG=WARN for details) (Duplicate "
            "GPU detected : rank 0 and rank 1)");
  EXPECT_TRUE(contains(outcomes[1].error, "failed on rank 1 (host h1): ncclRemoteError"))
      << outcomes[1].error;
  const auto counters = world_.counters();
  EXPECT_EQ(counters.aborts, 1);  // rank 1's; rank 0 never got a communicator
  EXPECT_EQ(counters.misuses, 0);
}

TEST_F(NcclCommTest, UniqueIdFailureIsABackendErrorOfRankZero) {
  world_.failUniqueId(NcclResult::kSystemError, "Bootstrap : no socket interface found");
  auto outcomes = bootstrap({0}, 2, 300ms);
  EXPECT_EQ(outcomes[0].kind, ErrorKind::kBackend);
  EXPECT_EQ(outcomes[0].error,
            "NCCL: ncclGetUniqueId of communicator 'global' failed on rank 0 (host h0): "
            "ncclSystemError: unhandled system error (run with NCCL_DEBUG=INFO for details) "
            "(Bootstrap : no socket interface found)");
  EXPECT_EQ(world_.counters().inits, 0);
}

TEST_F(NcclCommTest, RankThatNeverJoinsTimesOutEveryRankWithinTheDeadline) {
  world_.neverArrive(2);
  const int np = 3;
  auto outcomes = bootstrap(allRanks(np), np, 300ms);
  for (int r = 0; r < np; ++r) {
    const Outcome& out = outcomes[static_cast<size_t>(r)];
    EXPECT_FALSE(out.comm);
    EXPECT_EQ(out.kind, ErrorKind::kTimeout) << out.error;
    EXPECT_EQ(out.error, "NCCL: ncclCommInitRank of communicator 'global' timed out on rank " +
                             std::to_string(r) + " (host h" + std::to_string(r) +
                             ") after 300 ms: not all of its 3 ranks joined (a rank failed, hung "
                             "or never reached this communicator); the communicator was aborted");
    EXPECT_GE(out.took, 300ms);
    EXPECT_LT(out.took, 3s);
  }
  const auto counters = world_.counters();
  EXPECT_EQ(counters.aborts, 3);
  EXPECT_EQ(counters.destroys, 0);
  EXPECT_EQ(counters.misuses, 0);
  EXPECT_EQ(world_.blocked(), 0);
}

TEST_F(NcclCommTest, AbsentRankTimesOutTheOthersAndTheirCommunicatorsAreAborted) {
  auto outcomes = bootstrap({0, 1}, 3, 300ms);  // rank 2 never starts at all
  for (int r : {0, 1}) {
    const Outcome& out = outcomes[static_cast<size_t>(r)];
    EXPECT_EQ(out.kind, ErrorKind::kTimeout) << out.error;
    EXPECT_TRUE(contains(out.error, "communicator 'global' timed out on rank " + std::to_string(r)))
        << out.error;
    EXPECT_LT(out.took, 3s);
  }
  EXPECT_EQ(world_.counters().inits, 2);
  EXPECT_EQ(world_.counters().aborts, 2);
}

TEST_F(NcclCommTest, RankZeroNeverPublishingTimesOutReadersNamingTheKey) {
  auto outcomes = bootstrap({1, 2}, 3, 300ms, "local/4");
  for (int r : {1, 2}) {
    const Outcome& out = outcomes[static_cast<size_t>(r)];
    EXPECT_EQ(out.kind, ErrorKind::kTimeout) << out.error;
    EXPECT_EQ(out.error, "NCCL: communicator 'local/4': rank " + std::to_string(r) + " (host h" +
                             std::to_string(r) +
                             ") timed out after 300 ms waiting for rank 0 to publish the NCCL "
                             "unique id: store key 'nccl/0/local/4/id' is absent (rank 0 failed, "
                             "hung or never reached this communicator)");
    EXPECT_GE(out.took, 300ms);
    EXPECT_LT(out.took, 3s);
  }
  EXPECT_EQ(world_.counters().inits, 0);
  EXPECT_EQ(world_.counters().uniqueIds, 0);
}

TEST_F(NcclCommTest, NextGenerationDoesNotReadTheIdOfAnAbortedAttempt) {
  // Generation 0: rank 1 never comes; rank 0 publishes, times out and aborts, leaving its id.
  auto first = bootstrap({0}, 2, 200ms);
  ASSERT_EQ(first[0].kind, ErrorKind::kTimeout) << first[0].error;
  ASSERT_TRUE(store_->check({"nccl/0/global/id"}));

  // Generation 1: both ranks; rank 1 must wait for the new id, not join the dead attempt.
  auto second = bootstrap({0, 1}, 2, 5s, "global", 1);
  ASSERT_TRUE(second[0].comm) << second[0].error;
  ASSERT_TRUE(second[1].comm) << second[1].error;
  const auto ids = world_.issuedIds();
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_NE(ids[0].bytes, ids[1].bytes);
  // Had rank 1 used generation 0's id, it would sit alone in that dead communicator.
  EXPECT_EQ(world_.counters().inits, 3);
  EXPECT_FALSE(store_->check({"nccl/1/global/id"}));  // erased after success
}

TEST_F(NcclCommTest, UniqueIdAppearsInNoMessageAndNoLog) {
  LogCapture capture("gpu");
  std::vector<std::string> messages;
  {  // A success, then a failing collective.
    world_.asyncErrorAfter(1, 1, NcclResult::kRemoteError, "NET/Socket : peer closed");
    auto ok = bootstrap(allRanks(2), 2, 5s);
    for (const auto& out : ok) ASSERT_TRUE(out.comm) << out.error;
    onRanks({0, 1}, [&](int r) {
      NcclCommunicator& comm = *ok[static_cast<size_t>(r)].comm;
      int64_t value = r;
      comm.check(comm.api().allReduce(&value, &value, 1, DataType::kInt64, ReduceOp::kSum,
                                      comm.comm(), nullptr),
                 "ncclAllReduce");
    });
    NcclCommunicator& broken = *ok[1].comm;
    int64_t value = 0;
    try {
      broken.check(broken.api().allReduce(&value, &value, 1, DataType::kInt64, ReduceOp::kSum,
                                          broken.comm(), nullptr),
                   "ncclAllReduce");
    } catch (const hvd::Error& e) {
      messages.push_back(e.what());
    }
  }
  // An init failure, a timeout of the init and a timeout waiting for the id.
  for (int round = 0; round < 3; ++round) {
    FakeNcclWorld world;
    if (round == 0) world.failInit(1, NcclResult::kSystemError, "connection refused");
    if (round == 1) world.neverArrive(1);
    hvd::store::MemoryStore store;
    std::vector<int> ranks = round == 2 ? std::vector<int>{1} : std::vector<int>{0, 1};
    std::mutex mutex;
    std::vector<NcclUniqueId> ids;
    onRanks(ranks, [&](int r) {
      FakeNcclApi api(world);
      try {
        bootstrapComm(api, store, makeSpec("global", r, 2, 300ms));
      } catch (const hvd::Error& e) {
        std::lock_guard<std::mutex> lock(mutex);
        messages.push_back(e.what());
      }
    });
    for (const auto& id : world.issuedIds()) {
      const std::string idHex = hex(id.bytes.data(), id.bytes.size());
      for (const auto& m : messages) {
        EXPECT_FALSE(contains(m, idHex.substr(0, 16))) << m;
        EXPECT_FALSE(contains(m, std::string(id.bytes.data(), 8))) << m;
      }
    }
  }
  EXPECT_EQ(messages.size(), 1u + 2u + 2u + 1u);
  const std::string log = capture.text();
  EXPECT_TRUE(contains(log, "NCCL communicator 'global' ready: rank 0 (host h0) of 2")) << log;
  EXPECT_TRUE(contains(log, "id key 'nccl/0/global/id'")) << log;
  for (const auto& id : world_.issuedIds()) {
    const std::string idHex = hex(id.bytes.data(), id.bytes.size());
    EXPECT_FALSE(contains(log, idHex.substr(0, 16)));
    EXPECT_FALSE(contains(log, std::string(id.bytes.data(), 8)));
    for (const auto& m : messages) EXPECT_FALSE(contains(m, idHex.substr(0, 16))) << m;
  }
}

// ---- The communicator's own error handling.

TEST_F(NcclCommTest, FailedCollectiveBecomesBackendErrorAndTheBrokenCommIsAbortedNotDestroyed) {
  world_.asyncErrorAfter(1, 1, NcclResult::kRemoteError, "NET/IB : Got completion with error 12");
  auto outcomes = bootstrap(allRanks(2), 2, 5s);
  for (const auto& out : outcomes) ASSERT_TRUE(out.comm) << out.error;
  onRanks({0, 1}, [&](int r) {
    NcclCommunicator& comm = *outcomes[static_cast<size_t>(r)].comm;
    double value = 1.5;
    comm.check(comm.api().allReduce(&value, &value, 1, DataType::kFloat64, ReduceOp::kMax,
                                    comm.comm(), nullptr),
               "ncclAllReduce");
    EXPECT_EQ(value, 1.5);
  });
  NcclCommunicator& broken = *outcomes[1].comm;
  EXPECT_EQ(broken.asyncError(), NcclResult::kRemoteError);
  EXPECT_EQ(outcomes[0].comm->asyncError(), NcclResult::kSuccess);
  double value = 0;
  try {
    broken.check(broken.api().allReduce(&value, &value, 1, DataType::kFloat64, ReduceOp::kSum,
                                        broken.comm(), nullptr),
                 "ncclAllReduce");
    ADD_FAILURE() << "no error";
  } catch (const BackendError& e) {
    EXPECT_EQ(std::string(e.what()),
              "NCCL: ncclAllReduce on communicator 'global' failed on rank 1 (host h1): "
              "ncclRemoteError: remote process exited or there was a network error (NET/IB : "
              "Got completion with error 12)");
  }
  EXPECT_NO_THROW(broken.check(NcclResult::kSuccess, "ncclAllReduce"));
  const auto brokenHandle = broken.comm();
  const auto healthyHandle = outcomes[0].comm->comm();
  outcomes.clear();
  EXPECT_TRUE(world_.isAborted(brokenHandle));
  EXPECT_TRUE(world_.isDestroyed(healthyHandle));
  const auto counters = world_.counters();
  EXPECT_EQ(counters.aborts, 1);
  EXPECT_EQ(counters.destroys, 1);
  EXPECT_EQ(counters.misuses, 0);
}

TEST_F(NcclCommTest, AbortFreesABlockedCollectiveAndIsIdempotentAcrossThreads) {
  auto outcomes = bootstrap(allRanks(2), 2, 5s);
  for (const auto& out : outcomes) ASSERT_TRUE(out.comm) << out.error;
  NcclCommunicator& comm = *outcomes[0].comm;
  std::string error;
  std::thread blocked([&] {
    float value = 1;
    try {
      // Rank 1 never joins this allreduce.
      comm.check(comm.api().allReduce(&value, &value, 1, DataType::kFloat32, ReduceOp::kSum,
                                      comm.comm(), nullptr),
                 "ncclAllReduce");
    } catch (const BackendError& e) {
      error = e.what();
    }
  });
  ASSERT_TRUE(world_.waitBlocked(1, 5s));
  const auto start = Clock::now();
  onRanks({0, 1, 2, 3}, [&](int) { comm.abort(); });
  blocked.join();
  EXPECT_LT(Clock::now() - start, 2s);
  EXPECT_EQ(error,
            "NCCL: ncclAllReduce on communicator 'global' failed on rank 0 (host h0): "
            "ncclSystemError: the communicator was aborted");
  EXPECT_TRUE(comm.aborted());
  EXPECT_EQ(comm.asyncError(), NcclResult::kSystemError);
  comm.abort();
  EXPECT_EQ(world_.counters().aborts, 1);
  EXPECT_EQ(world_.blocked(), 0);
  outcomes.clear();
  const auto counters = world_.counters();
  EXPECT_EQ(counters.aborts, 1);
  EXPECT_EQ(counters.destroys, 1);  // rank 1's; rank 0's was aborted
  EXPECT_EQ(counters.misuses, 0);
}

// ---- The fake's collectives (what GPU-path tests above this build on).

TEST_F(NcclCommTest, FakeCollectivesComputeEveryOpAndTypeAcrossThreeRanks) {
  const int np = 3;
  auto outcomes = bootstrap(allRanks(np), np, 5s);
  for (const auto& out : outcomes) ASSERT_TRUE(out.comm) << out.error;
  onRanks(allRanks(np), [&](int r) {
    NcclCommunicator& c = *outcomes[static_cast<size_t>(r)].comm;
    hvd::gpu::NcclApi& api = c.api();
    // Inputs rank+1 and rank+2 (2, 3, 4 and 3, 4, 5 over three ranks).
    auto run = [&](auto zero, DataType type) {
      using T = decltype(zero);
      const T in[2] = {static_cast<T>(r + 1), static_cast<T>(r + 2)};
      const std::map<ReduceOp, std::pair<T, T>> want = {{ReduceOp::kSum, {T(6), T(9)}},
                                                        {ReduceOp::kAverage, {T(2), T(3)}},
                                                        {ReduceOp::kMin, {T(1), T(2)}},
                                                        {ReduceOp::kMax, {T(3), T(4)}},
                                                        {ReduceOp::kProduct, {T(6), T(24)}}};
      for (const auto& [op, expected] : want) {
        T out[2] = {T(-7), T(-7)};
        c.check(api.allReduce(in, out, 2, type, op, c.comm(), nullptr), "ncclAllReduce");
        EXPECT_EQ(out[0], expected.first)
            << hvd::reduceOpName(op) << " " << hvd::dataTypeName(type);
        EXPECT_EQ(out[1], expected.second)
            << hvd::reduceOpName(op) << " " << hvd::dataTypeName(type);
      }
    };
    run(float{}, DataType::kFloat32);
    run(double{}, DataType::kFloat64);
    run(int32_t{}, DataType::kInt32);
    run(int64_t{}, DataType::kInt64);

    // In place.
    int32_t inPlace[2] = {r, 10 * r};
    c.check(api.allReduce(inPlace, inPlace, 2, DataType::kInt32, ReduceOp::kSum, c.comm(), nullptr),
            "ncclAllReduce");
    EXPECT_EQ(inPlace[0], 3);
    EXPECT_EQ(inPlace[1], 30);

    int64_t root[2] = {100 + r, 200 + r};
    int64_t got[2] = {0, 0};
    c.check(api.broadcast(root, got, 2, DataType::kInt64, 2, c.comm(), nullptr), "ncclBroadcast");
    EXPECT_EQ(got[0], 102);
    EXPECT_EQ(got[1], 202);

    const float mine[2] = {static_cast<float>(r), static_cast<float>(r) + 0.5f};
    float all[6] = {};
    c.check(api.allGather(mine, all, 2, DataType::kFloat32, c.comm(), nullptr), "ncclAllGather");
    for (int k = 0; k < np; ++k) {
      EXPECT_EQ(all[2 * k], static_cast<float>(k));
      EXPECT_EQ(all[2 * k + 1], static_cast<float>(k) + 0.5f);
    }

    double blocks[6];
    for (int i = 0; i < 6; ++i) blocks[i] = i + 10 * r;  // sum over ranks: 3 i + 30
    double mineBlock[2] = {0, 0};
    c.check(api.reduceScatter(blocks, mineBlock, 2, DataType::kFloat64, ReduceOp::kSum, c.comm(),
                              nullptr),
            "ncclReduceScatter");
    EXPECT_EQ(mineBlock[0], 3.0 * (2 * r) + 30);
    EXPECT_EQ(mineBlock[1], 3.0 * (2 * r + 1) + 30);

    // A ring exchange in a group: receive first, as nothing would complete without the group.
    const int next = (r + 1) % np;
    const int prev = (r + np - 1) % np;
    int32_t outgoing = 1000 + r;
    int32_t incoming = -1;
    c.check(api.groupStart(), "ncclGroupStart");
    c.check(api.recv(&incoming, 1, DataType::kInt32, prev, c.comm(), nullptr), "ncclRecv");
    c.check(api.send(&outgoing, 1, DataType::kInt32, next, c.comm(), nullptr), "ncclSend");
    c.check(api.groupEnd(), "ncclGroupEnd");
    EXPECT_EQ(incoming, 1000 + prev);
  });
  // 4 types x 5 ops + in place + broadcast + allgather + reducescatter + send + recv.
  for (const auto& out : outcomes) EXPECT_EQ(world_.collectives(out.comm->comm()), 26u);
}

TEST_F(NcclCommTest, FakeRejectsRanksThatDisagreeAboutACollective) {
  auto outcomes = bootstrap(allRanks(2), 2, 5s);
  for (const auto& out : outcomes) ASSERT_TRUE(out.comm) << out.error;
  std::vector<NcclResult> results(2);
  onRanks({0, 1}, [&](int r) {
    NcclCommunicator& c = *outcomes[static_cast<size_t>(r)].comm;
    float data[4] = {1, 2, 3, 4};
    results[static_cast<size_t>(r)] = c.api().allReduce(
        data, data, r == 0 ? 4 : 3, DataType::kFloat32, ReduceOp::kSum, c.comm(), nullptr);
  });
  EXPECT_EQ(results[0], NcclResult::kInvalidUsage);
  EXPECT_EQ(results[1], NcclResult::kInvalidUsage);
}

TEST_F(NcclCommTest, FakeAbortReachesPeersWhenConfigured) {
  world_.setAbortReachesPeers(true);
  auto outcomes = bootstrap(allRanks(2), 2, 5s);
  for (const auto& out : outcomes) ASSERT_TRUE(out.comm) << out.error;
  NcclResult peerResult = NcclResult::kSuccess;
  std::thread peer([&] {
    NcclCommunicator& c = *outcomes[1].comm;
    float value = 1;
    peerResult =
        c.api().allReduce(&value, &value, 1, DataType::kFloat32, ReduceOp::kSum, c.comm(), nullptr);
  });
  ASSERT_TRUE(world_.waitBlocked(1, 5s));
  outcomes[0].comm->abort();
  peer.join();
  EXPECT_EQ(peerResult, NcclResult::kRemoteError);
  EXPECT_EQ(outcomes[1].comm->asyncError(), NcclResult::kRemoteError);
}

// ---- The lazy cache.

// Per rank: a CommCache whose factory bootstraps over the fake and counts its calls by name.
class CommCacheTest : public NcclCommTest {
 protected:
  void makeCaches(int np, std::chrono::milliseconds timeout = 5s) {
    makeApis(np);
    for (int r = 0; r < np; ++r) {
      caches_.push_back(std::make_unique<CommCache>(
          [this, r, np, timeout](const std::string& name, const std::atomic<bool>& cancel) {
            {
              std::lock_guard<std::mutex> lock(mutex_);
              ++factoryCalls_[name];
            }
            // Widens the window in which other threads ask for the same name.
            std::this_thread::sleep_for(20ms);
            CommSpec spec = makeSpec(name, r, np, timeout);
            spec.cancel = &cancel;
            return bootstrapComm(*apis_[static_cast<size_t>(r)], *store_, spec);
          }));
    }
  }
  int factoryCalls(const std::string& name) {
    std::lock_guard<std::mutex> lock(mutex_);
    return factoryCalls_[name];
  }

  std::mutex mutex_;
  std::map<std::string, int> factoryCalls_;  // over all ranks
  std::vector<std::unique_ptr<CommCache>> caches_;

  void TearDown() override { caches_.clear(); }  // before the apis they use
};

TEST_F(CommCacheTest, CreatesEachNameOnceUnderConcurrentFirstUseAndNotBefore) {
  const int np = 2;
  makeCaches(np);
  EXPECT_TRUE(caches_[0]->created().empty());
  EXPECT_EQ(world_.counters().inits, 0);

  const std::vector<std::string> names = {"global", "local", "cross"};
  // 8 threads per rank ask at once, each for one of the names.
  std::vector<std::vector<NcclCommunicator*>> got(static_cast<size_t>(np),
                                                  std::vector<NcclCommunicator*>(8, nullptr));
  std::vector<int> ranksAndThreads;
  for (int i = 0; i < np * 8; ++i) ranksAndThreads.push_back(i);
  onRanks(ranksAndThreads, [&](int i) {
    const int r = i / 8;
    const int t = i % 8;
    got[static_cast<size_t>(r)][static_cast<size_t>(t)] =
        &caches_[static_cast<size_t>(r)]->get(names[static_cast<size_t>(t) % names.size()]);
  });
  for (int r = 0; r < np; ++r) {
    for (int t = 0; t < 8; ++t) {
      NcclCommunicator* c = got[static_cast<size_t>(r)][static_cast<size_t>(t)];
      ASSERT_NE(c, nullptr);
      EXPECT_EQ(c->name(), names[static_cast<size_t>(t) % names.size()]);
      EXPECT_EQ(c->rank(), r);
      EXPECT_EQ(c, got[static_cast<size_t>(r)][static_cast<size_t>(t % 3)]);  // one per name
    }
    EXPECT_EQ(caches_[static_cast<size_t>(r)]->created(),
              (std::vector<std::string>{"cross", "global", "local"}));
  }
  for (const auto& name : names) EXPECT_EQ(factoryCalls(name), np) << name;
  const auto counters = world_.counters();
  EXPECT_EQ(counters.uniqueIds, 3);
  EXPECT_EQ(counters.inits, 3 * np);
  caches_.clear();
  EXPECT_EQ(world_.counters().destroys, 3 * np);
  EXPECT_EQ(world_.counters().misuses, 0);
}

TEST_F(CommCacheTest, OnlyTheCommunicatorsAskedForAreBootstrapped) {
  makeCaches(2);
  onRanks({0, 1}, [&](int r) {
    NcclCommunicator& first = caches_[static_cast<size_t>(r)]->get("global");
    EXPECT_EQ(&caches_[static_cast<size_t>(r)]->get("global"), &first);
  });
  EXPECT_EQ(caches_[0]->created(), std::vector<std::string>{"global"});
  EXPECT_EQ(factoryCalls("global"), 2);
  EXPECT_EQ(factoryCalls("local"), 0);
  EXPECT_EQ(factoryCalls("cross"), 0);
  EXPECT_EQ(world_.counters().uniqueIds, 1);
  EXPECT_EQ(world_.counters().inits, 2);
}

TEST_F(CommCacheTest, AbortAllAbortsEachOnceAndLaterGetThrowsInsteadOfRebootstrapping) {
  const int np = 2;
  makeCaches(np);
  std::vector<hvd::gpu::NcclComm> handles;
  std::mutex mutex;
  onRanks({0, 1}, [&](int r) {
    auto& global = caches_[static_cast<size_t>(r)]->get("global");
    auto& local = caches_[static_cast<size_t>(r)]->get("local");
    std::lock_guard<std::mutex> lock(mutex);
    handles.push_back(global.comm());
    handles.push_back(local.comm());
  });
  ASSERT_EQ(world_.counters().inits, 4);
  // Twice on each rank, from two threads at once, then once more.
  onRanks({0, 1, 2, 3},
          [&](int i) { caches_[static_cast<size_t>(i % np)]->abortAll("rank 3 failed"); });
  caches_[0]->abortAll("a later reason");
  EXPECT_EQ(world_.counters().aborts, 4);
  for (auto handle : handles) EXPECT_TRUE(world_.isAborted(handle));
  EXPECT_TRUE(caches_[0]->aborted());

  for (const char* name : {"global", "cross"}) {
    try {
      caches_[0]->get(name);
      ADD_FAILURE() << name << ": no error";
    } catch (const BackendError& e) {
      EXPECT_EQ(std::string(e.what()),
                std::string("NCCL communicator '") + name +
                    "' is unavailable: the job's NCCL communicators were aborted (rank 3 failed); "
                    "they are not re-created within the same job");
    }
  }
  EXPECT_EQ(factoryCalls("cross"), 0);
  EXPECT_EQ(world_.counters().inits, 4);
  caches_.clear();
  const auto counters = world_.counters();
  EXPECT_EQ(counters.aborts, 4);
  EXPECT_EQ(counters.destroys, 0);
  EXPECT_EQ(counters.misuses, 0);
}

TEST_F(CommCacheTest, AbortAllCancelsACreationInProgress) {
  makeCaches(2, 20s);  // rank 1 never asks: rank 0's init would wait the full 20 s
  std::string error;
  const auto start = Clock::now();
  std::thread creator([&] {
    try {
      caches_[0]->get("global");
    } catch (const BackendError& e) {
      error = e.what();
    }
  });
  while (world_.counters().inits < 1 && Clock::now() - start < 5s) std::this_thread::sleep_for(1ms);
  ASSERT_EQ(world_.counters().inits, 1);
  caches_[0]->abortAll("job stopped");
  creator.join();
  EXPECT_LT(Clock::now() - start, 5s);
  EXPECT_EQ(error,
            "NCCL communicator 'global' is unavailable: the job's NCCL communicators were aborted "
            "(job stopped); they are not re-created within the same job");
  EXPECT_EQ(world_.counters().aborts, 1);  // the half-made communicator
  EXPECT_TRUE(caches_[0]->created().empty());
}

TEST_F(CommCacheTest, ReaderWaitingForRankZeroIsCancelledToo) {
  makeCaches(2, 20s);
  std::string error;
  const auto start = Clock::now();
  std::thread reader([&] {
    try {
      caches_[1]->get("local");  // rank 0 never publishes
    } catch (const BackendError& e) {
      error = e.what();
    }
  });
  std::this_thread::sleep_for(100ms);
  caches_[1]->abortAll();
  reader.join();
  EXPECT_LT(Clock::now() - start, 5s);
  EXPECT_EQ(error,
            "NCCL communicator 'local' is unavailable: the job's NCCL communicators were aborted; "
            "they are not re-created within the same job");
  EXPECT_EQ(world_.counters().inits, 0);
}

TEST(CommCache, FailedCreationIsRememberedNotRetried) {
  std::atomic<int> calls{0};
  CommCache cache([&](const std::string& name, const std::atomic<bool>&) {
    ++calls;
    std::this_thread::sleep_for(20ms);
    throw TimeoutError("bootstrap of '" + name + "' timed out");
    return std::unique_ptr<NcclCommunicator>();
  });
  std::vector<std::string> errors(4);
  onRanks({0, 1, 2, 3}, [&](int t) {
    try {
      cache.get("global");
    } catch (const TimeoutError& e) {
      errors[static_cast<size_t>(t)] = e.what();
    }
  });
  for (const auto& e : errors) EXPECT_EQ(e, "bootstrap of 'global' timed out");
  EXPECT_THROW(cache.get("global"), TimeoutError);
  EXPECT_EQ(calls.load(), 1);
  EXPECT_TRUE(cache.created().empty());
}

}  // namespace
