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

namespace hvd::transport {
namespace {

std::vector<std::unique_ptr<Context>> connectAll(store::Store& store, int size, bool allowShm) {
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
