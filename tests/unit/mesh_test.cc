// Mesh bootstrap through a store: ranks find each other, pick shared memory on one host or TCP
// when told to, and a rank that never arrives is a timeout naming the missing rank.
#include "transport/mesh.h"

#include <gtest/gtest.h>
#include <unistd.h>

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
