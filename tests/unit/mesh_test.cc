// Mesh bootstrap through a store: ranks find each other, pick shared memory on one host or TCP
// when told to, and a rank that never arrives is a timeout naming the missing rank.
#include "transport/mesh.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "collectives/collectives.h"
#include "store/memory_store.h"
#include "transport/shm_link.h"
#include "transport/shm_sizing.h"

namespace hvd::transport {
namespace {

std::vector<std::unique_ptr<Context>> connectAll(store::Store& store, int size, bool allowShm,
                                                 size_t shmPeerBudgetBytes = 16 << 20) {
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

// Counts the requests each thread makes of a shared store.
class CountingStore final : public store::Store {
 public:
  explicit CountingStore(store::Store& inner) : inner_(inner) {}
  void set(const std::string& k, const store::Bytes& v) override { count(), inner_.set(k, v); }
  store::Bytes get(const std::string& k, store::Timeout t) override {
    count();
    return inner_.get(k, t);
  }
  int64_t add(const std::string& k, int64_t d) override {
    count();
    return inner_.add(k, d);
  }
  store::Bytes compareSet(const std::string& k, const store::Bytes& e,
                          const store::Bytes& d) override {
    count();
    return inner_.compareSet(k, e, d);
  }
  void wait(const std::vector<std::string>& k, store::Timeout t) override {
    count();
    inner_.wait(k, t);
  }
  std::vector<store::Bytes> getMany(const std::vector<std::string>& k, store::Timeout t) override {
    count();
    return inner_.getMany(k, t);
  }
  bool check(const std::vector<std::string>& k) override {
    count();
    return inner_.check(k);
  }
  void erase(const std::string& k) override { count(), inner_.erase(k); }
  int requests() const { return requests_.load(); }

 private:
  void count() { ++requests_; }
  store::Store& inner_;
  std::atomic<int> requests_{0};
};

// The store requests of a whole rendezvous, summed over the ranks.
int rendezvousRequests(int size) {
  store::MemoryStore memory;
  CountingStore counting(memory);
  auto contexts = connectAll(counting, size, /*allowShm=*/false);
  EXPECT_EQ(static_cast<int>(contexts.size()), size);
  return counting.requests();
}

TEST(Mesh, StoreRequestsOfARendezvousGrowLinearlyWithTheRanks) {
  // Each rank publishes, counts itself in, waits on one key and fetches the records in one
  // request (the last to arrive also raises the key): 4 per rank plus 1, at any size. The old
  // scan was 2 + size per rank.
  EXPECT_EQ(rendezvousRequests(4), 4 * 4 + 1);
  EXPECT_EQ(rendezvousRequests(24), 4 * 24 + 1);
}

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
