// Mesh bootstrap through a store: ranks find each other, pick shared memory on one host or TCP
// when told to, and a rank that never arrives is a timeout naming the missing rank.
#include "transport/mesh.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "collectives/collectives.h"
#include "common/rank_errors.h"
#include "hvd_support/fd_limit.h"
#include "store/memory_store.h"
#include "transport/shm_link.h"
#include "transport/shm_sizing.h"

namespace hvd::transport {
namespace {

std::vector<std::unique_ptr<Context>> connectAll(store::Store& store, int size, bool allowShm,
                                                 size_t shmPeerBudgetBytes = 16 << 20,
                                                 int fullMeshRanks = 64) {
  std::vector<std::unique_ptr<Context>> contexts(size);
  std::vector<std::exception_ptr> errors(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        MeshConfig config;
        config.rank = r;
        config.size = size;
        config.hostKey = "this-host";
        config.hostName = "localhost";
        config.allowShm = allowShm;
        config.shmRingBytes = 64 << 10;
        config.shmPeerBudgetBytes = shmPeerBudgetBytes;
        config.options.fullMeshRanks = fullMeshRanks;
        config.options.timeout = std::chrono::seconds(20);
        config.setupTimeout = std::chrono::seconds(20);
        contexts[r] = connectMesh(store, config);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  return contexts;
}

void expectWorkingAllreduce(std::vector<std::unique_ptr<Context>>& contexts) {
  const int size = static_cast<int>(contexts.size());
  std::vector<std::thread> threads;
  std::vector<int64_t> results(size);
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      int64_t value = r + 1;
      coll::allreduce(*contexts[r], &value, &value, 1, DataType::kInt64);
      results[r] = value;
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < size; ++r) EXPECT_EQ(results[r], size * (size + 1) / 2);
}

TEST(Mesh, SameHostRanksUseSharedMemory) {
  store::MemoryStore store;
  auto contexts = connectAll(store, 3, /*allowShm=*/true);
  for (auto& c : contexts) EXPECT_EQ(c->describeTransports(), "shm");
  expectWorkingAllreduce(contexts);
}

TEST(Mesh, ForcedTcpUsesTcpLinks) {
  store::MemoryStore store;
  auto contexts = connectAll(store, 3, /*allowShm=*/false);
  for (auto& c : contexts) EXPECT_EQ(c->describeTransports(), "tcp");
  expectWorkingAllreduce(contexts);
}

TEST(Mesh, ARankThatNeverArrivesIsATimeoutNamingIt) {
  store::MemoryStore store;
  MeshConfig config;
  config.rank = 0;
  config.size = 2;
  config.hostKey = "this-host";
  config.setupTimeout = std::chrono::milliseconds(300);
  try {
    connectMesh(store, config);
    FAIL() << "connectMesh returned without rank 1";
  } catch (const TimeoutError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("1 of 2"), std::string::npos) << message;
    EXPECT_NE(message.find("mesh/1"), std::string::npos) << message;
  }
}

// Counts the requests each thread makes of a shared store, and the bytes of the values it reads.
class CountingStore final : public store::Store {
 public:
  explicit CountingStore(store::Store& inner) : inner_(inner) {}
  void set(const std::string& k, const store::Bytes& v) override { count(), inner_.set(k, v); }
  store::Bytes get(const std::string& k, store::Timeout t) override {
    count();
    return read(inner_.get(k, t));
  }
  int64_t add(const std::string& k, int64_t d) override {
    count();
    return inner_.add(k, d);
  }
  store::Bytes compareSet(const std::string& k, const store::Bytes& e,
                          const store::Bytes& d) override {
    count();
    return read(inner_.compareSet(k, e, d));
  }
  void wait(const std::vector<std::string>& k, store::Timeout t) override {
    count();
    inner_.wait(k, t);
  }
  std::vector<store::Bytes> getMany(const std::vector<std::string>& k, store::Timeout t) override {
    count();
    auto values = inner_.getMany(k, t);
    for (const auto& v : values) read(v);
    return values;
  }
  bool check(const std::vector<std::string>& k) override {
    count();
    return inner_.check(k);
  }
  void erase(const std::string& k) override { count(), inner_.erase(k); }
  int requests() const { return requests_.load(); }
  int64_t bytesRead() const { return bytes_.load(); }

 private:
  void count() { ++requests_; }
  const store::Bytes& read(const store::Bytes& value) {
    bytes_ += static_cast<int64_t>(value.size());
    return value;
  }
  store::Store& inner_;
  std::atomic<int> requests_{0};
  std::atomic<int64_t> bytes_{0};
};

struct RendezvousCost {
  int requests = 0;
  int64_t bytesRead = 0;
};

// The store work of a whole rendezvous, summed over the ranks.
RendezvousCost rendezvousCost(int size) {
  store::MemoryStore memory;
  CountingStore counting(memory);
  auto contexts = connectAll(counting, size, /*allowShm=*/false);
  EXPECT_EQ(static_cast<int>(contexts.size()), size);
  return {counting.requests(), counting.bytesRead()};
}

TEST(Mesh, StoreWorkOfARendezvousGrowsLinearlyWithTheRanks) {
  // Each rank publishes its record, counts itself on its host, claims its full-mesh size,
  // counts itself in, reads the verdict and its host's count, and reads the records it opens
  // links to in one request; the last to arrive also raises the verdict: 7 per rank plus 2, at
  // any size.
  hvd::raiseOpenFileLimit();  // R = 64 is a full mesh of TCP pairs: 4032 sockets here
  EXPECT_EQ(rendezvousCost(4).requests, 7 * 4 + 2);
  const RendezvousCost full = rendezvousCost(64);
  EXPECT_EQ(full.requests, 7 * 64 + 2);
  // Beyond the full mesh (64 ranks) a rank reads its two ring neighbours' records, not every
  // rank's: the bytes grow with the ranks, not with their square (an all-gather of the records
  // would read 4 x 4 = 16 times as much at 512 as at 128).
  const RendezvousCost r128 = rendezvousCost(128);
  const RendezvousCost r512 = rendezvousCost(512);
  EXPECT_EQ(r128.requests, 7 * 128 + 2);
  EXPECT_EQ(r512.requests, 7 * 512 + 2);
  const double growth = static_cast<double>(r512.bytesRead) / static_cast<double>(r128.bytesRead);
  EXPECT_GT(growth, 3.5) << r128.bytesRead << " -> " << r512.bytesRead;
  EXPECT_LT(growth, 4.5) << r128.bytesRead << " -> " << r512.bytesRead;
  // A full mesh reads every record: 63 per rank, about 64 times what one lazy rank reads.
  EXPECT_GT(full.bytesRead / 64, 20 * (r128.bytesRead / 128));
}

class TwoChannels : public ::testing::TestWithParam<int> {};

TEST_P(TwoChannels, ShareOneRendezvousAndCarryCollectivesAtOnce) {
  // The runtime's collectives and the engine's use channels 0 and 1 of one rendezvous, each
  // from a thread of its own, at once: in a full mesh (fullMeshRanks 64) and beyond it (2).
  const int n = 6;
  const int fullMeshRanks = GetParam();
  store::MemoryStore memory;
  CountingStore counting(memory);
  std::vector<std::unique_ptr<Mesh>> meshes(n);
  std::vector<std::unique_ptr<Context>> first(n), second(n);
  std::vector<std::string> errors(n);
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r) {
    ranks.emplace_back([&, r] {
      try {
        MeshConfig config;
        config.rank = r;
        config.size = n;
        config.hostKey = r < 3 ? "host-a" : "host-b";  // shared memory within, TCP across
        config.hostName = r < 3 ? "a" : "b";
        config.shmRingBytes = 64 << 10;
        config.options.fullMeshRanks = fullMeshRanks;
        config.options.timeout = std::chrono::seconds(20);
        config.setupTimeout = std::chrono::seconds(20);
        meshes[r] = Mesh::join(counting, config);
        first[r] = meshes[r]->connect(0, config.options, config.setupTimeout);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < n; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
  // Channel 1 reads no record the rendezvous or channel 0 has not read already.
  const int afterInit = counting.requests();
  EXPECT_EQ(afterInit, 7 * n + 2);

  ranks.clear();
  std::vector<std::string> channelErrors(2 * n);
  for (int r = 0; r < n; ++r) {
    for (int c = 0; c < 2; ++c) {
      ranks.emplace_back([&, r, c] {
        try {
          std::unique_ptr<Context>& context = c == 0 ? first[r] : second[r];
          if (c == 1) {
            ContextOptions options;
            options.fullMeshRanks = fullMeshRanks;
            options.timeout = std::chrono::seconds(20);
            context = meshes[r]->connect(1, options, std::chrono::seconds(20));
          }
          for (int round = 0; round < 20; ++round) {
            const size_t count = round % 2 ? 70000 : 3;
            std::vector<int64_t> data(count, (c + 1) * 1000 + r + round);
            coll::allreduce(*context, data.data(), data.data(), count, DataType::kInt64);
            const int64_t expected = n * ((c + 1) * 1000 + round) + n * (n - 1) / 2;
            for (size_t i = 0; i < count; i += 4999) {
              if (data[i] != expected) {
                throw std::runtime_error("channel " + std::to_string(c) + " round " +
                                         std::to_string(round) + ": " + std::to_string(data[i]) +
                                         " != " + std::to_string(expected));
              }
            }
          }
        } catch (const std::exception& e) {
          channelErrors[2 * r + c] = e.what();
        }
      });
    }
  }
  for (auto& t : ranks) t.join();
  for (int i = 0; i < 2 * n; ++i)
    EXPECT_EQ(channelErrors[i], "") << "rank " << i / 2 << " channel " << i % 2;
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(first[r]->describeTransports(), "tcp+shm");
    EXPECT_EQ(second[r]->describeTransports(), "tcp+shm");
  }
  if (fullMeshRanks < n) {
    // Beyond the full mesh the links opened later read their peers' records, each once per
    // rank whichever channel opens it first: far fewer requests than a second rendezvous.
    EXPECT_LT(counting.requests() - afterInit, 4 * n);
  } else {
    EXPECT_EQ(counting.requests(), afterInit);
  }
}

INSTANTIATE_TEST_SUITE_P(Meshes, TwoChannels, ::testing::Values(64, 2),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param == 64 ? std::string("full") : std::string("lazy");
                         });

TEST(ShmRingSize, NeighboursKeepTheRingAndTheRestShareTheBudget) {
  const size_t mib = 1 << 20;
  // Within the budget (16 MiB for 15 peers of 1 MiB) every pair keeps 1 MiB, populated: the
  // usual 8- or 16-rank host is unchanged.
  for (int p = 1; p < 16; ++p) {
    const ShmRingSize s = shmRingSize(0, p, 16, 15, mib, 16 * mib);
    EXPECT_EQ(s.capacity, mib) << p;
    EXPECT_TRUE(s.populate) << p;
  }
  // 128 ranks on a host: rank +/- 1 (and the wrap-around pair) keep 1 MiB, the rest 128 KiB,
  // faulted in only as used.
  EXPECT_EQ(shmRingSize(5, 6, 128, 127, mib, 16 * mib).capacity, mib);
  EXPECT_EQ(shmRingSize(5, 4, 128, 127, mib, 16 * mib).capacity, mib);
  EXPECT_EQ(shmRingSize(0, 127, 128, 127, mib, 16 * mib).capacity, mib);
  EXPECT_TRUE(shmRingSize(0, 127, 128, 127, mib, 16 * mib).populate);
  const ShmRingSize far = shmRingSize(5, 70, 128, 127, mib, 16 * mib);
  EXPECT_EQ(far.capacity, 128u << 10);
  EXPECT_FALSE(far.populate);
  // Never below a page, never above the configured ring, and the same from both ends.
  EXPECT_EQ(shmRingSize(3, 900, 4096, 4095, mib, 16 * mib).capacity, 4096u);
  EXPECT_EQ(shmRingSize(3, 9, 12, 11, 4096, 16 * mib).capacity, 4096u);
  for (int a = 0; a < 40; ++a) {
    for (int b = 0; b < 40; ++b) {
      if (a == b) continue;
      const ShmRingSize ab = shmRingSize(a, b, 40, 39, mib, 16 * mib);
      const ShmRingSize ba = shmRingSize(b, a, 40, 39, mib, 16 * mib);
      EXPECT_EQ(ab.capacity, ba.capacity) << a << "," << b;
      EXPECT_EQ(ab.populate, ba.populate) << a << "," << b;
    }
  }
}

TEST(Mesh, OnlyRingNeighboursGetFullSharedMemoryRingsBeyondTheBudget) {
  // 6 ranks, 64 KiB rings, 128 KiB per rank for the 5 peers: ring neighbours keep 64 KiB, the
  // others get 16 KiB (128 KiB / 5 = 25.6 KiB, down to a power of two), and still work.
  store::MemoryStore store;
  auto contexts = connectAll(store, 6, /*allowShm=*/true, /*shmPeerBudgetBytes=*/128 << 10);
  for (int r = 0; r < 6; ++r) {
    for (int p = 0; p < 6; ++p) {
      if (p == r) continue;
      auto* link = dynamic_cast<ShmLink*>(&contexts[r]->link(p));
      ASSERT_NE(link, nullptr) << r << "->" << p;
      const bool neighbour = (r + 1) % 6 == p || (p + 1) % 6 == r;
      EXPECT_EQ(link->capacity(), neighbour ? 64u << 10 : 16u << 10) << r << "->" << p;
    }
  }
  expectWorkingAllreduce(contexts);
  // An alltoall moves data between every pair, through the small rings too (several laps).
  std::vector<std::thread> threads;
  std::vector<std::vector<int32_t>> received(6);
  const size_t perPeer = 40000;  // 160 KB per pair: ten laps of a 16 KiB ring
  for (int r = 0; r < 6; ++r) {
    threads.emplace_back([&, r] {
      std::vector<int32_t> send(perPeer * 6);
      for (int p = 0; p < 6; ++p) {
        for (size_t i = 0; i < perPeer; ++i)
          send[p * perPeer + i] = r * 1000000 + p * 100000 + i % 1000;
      }
      received[r].resize(perPeer * 6);
      coll::alltoall(*contexts[r], send.data(), std::vector<size_t>(6, perPeer), received[r].data(),
                     std::vector<size_t>(6, perPeer), DataType::kInt32);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 6; ++r) {
    for (int p = 0; p < 6; ++p) {
      for (size_t i = 0; i < perPeer; i += 997) {
        ASSERT_EQ(received[r][p * perPeer + i],
                  p * 1000000 + r * 100000 + static_cast<int>(i % 1000))
            << r << " from " << p << " at " << i;
      }
    }
  }
}

// Runs body(ctx) on every context at once; fails the test on any rank's error.
template <typename Body>
void onEveryRank(std::vector<std::unique_ptr<Context>>& contexts, Body body) {
  test::expectNoErrors(test::runRanks(contexts, body));
}

void expectOpenLinks(std::vector<std::unique_ptr<Context>>& contexts, int expected,
                     const char* after) {
  for (auto& c : contexts)
    EXPECT_EQ(c->openLinkCount(), expected) << "rank " << c->rank() << " after " << after;
}

class LazyMesh : public ::testing::TestWithParam<bool> {};

TEST_P(LazyMesh, BeyondTheFullMeshLinksOpenOnFirstUseAndOnlyThoseTheSchedulesNeed) {
  // 8 ranks with fullMeshRanks 2: init opens rank +/- 1; a barrier's gathered agreement adds
  // rank +/- 2 and rank + 4 (= rank - 4): 5 links, not 7; the ring adds none; alltoall opens
  // the rest.
  store::MemoryStore store;
  const int n = 8;
  auto contexts = connectAll(store, n, /*allowShm=*/GetParam(), 16 << 20, /*fullMeshRanks=*/2);
  expectOpenLinks(contexts, 2, "init");
  for (auto& c : contexts) EXPECT_EQ(c->describeTransports(), GetParam() ? "shm" : "tcp");
  onEveryRank(contexts, [](Context& ctx) { coll::barrier(ctx); });
  expectOpenLinks(contexts, 5, "a barrier");
  onEveryRank(contexts, [&](Context& ctx) {
    for (size_t count : {size_t{3}, size_t{100000}}) {
      std::vector<int64_t> data(count, ctx.rank() + 1);
      coll::allreduce(ctx, data.data(), data.data(), count, DataType::kInt64);
      for (size_t i = 0; i < count; i += 997) ASSERT_EQ(data[i], n * (n + 1) / 2) << count;
    }
  });
  expectOpenLinks(contexts, 5, "small and large allreduces");
  onEveryRank(contexts, [&](Context& ctx) {
    std::vector<int32_t> send(n), recv(n, -1);
    for (int p = 0; p < n; ++p) send[p] = 100 * ctx.rank() + p;
    const std::vector<size_t> ones(n, 1);
    coll::alltoall(ctx, send.data(), ones, recv.data(), ones, DataType::kInt32);
    for (int p = 0; p < n; ++p) ASSERT_EQ(recv[p], 100 * p + ctx.rank());
  });
  expectOpenLinks(contexts, n - 1, "an alltoall");
}

INSTANTIATE_TEST_SUITE_P(Transports, LazyMesh, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "shm" : "tcp");
                         });

TEST(Mesh, ARankMissingFromALazyLinkIsATimeoutNamingIt) {
  // 4 ranks beyond the full mesh; rank 2 never calls the barrier. Rank 0 waits in round 2 for
  // the link to rank 2 that only rank 2 would open; the others wait for its data. None hangs.
  store::MemoryStore store;
  auto contexts = connectAll(store, 4, /*allowShm=*/false, 16 << 20, /*fullMeshRanks=*/2);
  for (auto& c : contexts) c->mutableOptions().timeout = std::chrono::milliseconds(500);
  std::vector<std::string> errors(4);
  std::vector<std::thread> threads;
  for (int r : {0, 1, 3}) {
    threads.emplace_back([&, r] {
      try {
        coll::barrier(*contexts[r]);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  // Rank 0's round-1 peer (rank 2) never opens its side of their link.
  EXPECT_NE(errors[0].find("could not connect to rank(s) 2"), std::string::npos) << errors[0];
  for (int r : {1, 3}) EXPECT_NE(errors[r], "") << "rank " << r << " returned without rank 2";
}

TEST(Mesh, RanksThatDisagreeOnTheFullMeshSizeAllFailAtInitNamingTheValues) {
  // Rank 2 alone was told a smaller full mesh: it would take the gathered schedules while the
  // others take the direct ones, and each side would wait for the other's messages.
  store::MemoryStore store;
  std::vector<std::string> errors(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      MeshConfig config;
      config.rank = r;
      config.size = 3;
      config.hostKey = "this-host";
      config.allowShm = false;
      config.options.fullMeshRanks = r == 2 ? 2 : 64;
      config.setupTimeout = std::chrono::seconds(20);
      try {
        connectMesh(store, config);
      } catch (const InvalidArgumentError& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_NE(errors[0].find("HVD_FULL_MESH_RANKS is 64 on rank 0 but 2 on rank 2"),
            std::string::npos)
      << errors[0];
  EXPECT_NE(errors[1].find("is 64 on rank 1 but 2 on rank 2"), std::string::npos) << errors[1];
  // Rank 2's error names one of the ranks that disagree with it (whichever claimed first).
  EXPECT_TRUE(errors[2].find("is 2 on rank 2 but 64 on rank 0") != std::string::npos ||
              errors[2].find("is 2 on rank 2 but 64 on rank 1") != std::string::npos)
      << errors[2];
}

TEST(Mesh, NoSharedMemorySegmentIsLeftBehind) {
  store::MemoryStore store;
  auto contexts = connectAll(store, 2, /*allowShm=*/true);
  // The creator unlinks each segment as soon as the peer has mapped it.
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    const std::string name = entry.path().filename().string();
    EXPECT_EQ(name.rfind("hvd-" + std::to_string(::getpid()) + "-", 0), std::string::npos)
        << "leftover " << name;
  }
}

}  // namespace
}  // namespace hvd::transport
