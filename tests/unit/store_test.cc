// The Store contract (store.h), pinned down once and run over every implementation: the
// in-memory store, the file store in a fresh directory, and the TCP client against a server on
// an ephemeral loopback port.
#include "store/store.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/test_support.h"
#include "hvd/error.hpp"
#include "hvd_support/tcp_store_server.h"
#include "store/file_store.h"
#include "store/memory_store.h"
#include "store/tcp_store_client.h"

namespace hvd::store {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A factory owns what its stores need and hands out clients of one shared store; tests that
// need two parties call make() twice.
class MemoryFactory {
 public:
  std::shared_ptr<Store> make() { return store_; }

 private:
  std::shared_ptr<MemoryStore> store_ = std::make_shared<MemoryStore>();
};

class FileFactory {
 public:
  std::shared_ptr<Store> make() { return std::make_shared<FileStore>(directory_.path()); }

 private:
  test::TempDir directory_{"hvd-store-test"};
};

class TcpFactory {
 public:
  TcpFactory() {
    server_.addJob("job-1", "token-1");
    server_.start();
  }
  std::shared_ptr<Store> make() {
    return std::make_shared<TcpStore>(server_.address(), "job-1", "token-1", 5s);
  }

 private:
  TcpStoreServer server_;
};

template <typename Factory>
class StoreTest : public ::testing::Test {
 protected:
  Factory factory_;
  std::shared_ptr<Store> store_ = factory_.make();
};

class FactoryNames {
 public:
  template <typename T>
  static std::string GetName(int) {
    if (std::is_same_v<T, MemoryFactory>) return "Memory";
    if (std::is_same_v<T, FileFactory>) return "File";
    return "Tcp";
  }
};

using Implementations = ::testing::Types<MemoryFactory, FileFactory, TcpFactory>;
TYPED_TEST_SUITE(StoreTest, Implementations, FactoryNames);

// Runs `body` and returns the message of the TimeoutError it throws ("" if none).
template <typename Body>
std::string timeoutMessageOf(Body body) {
  try {
    body();
  } catch (const TimeoutError& e) {
    return e.what();
  }
  return "";
}

TYPED_TEST(StoreTest, SetThenGetReturnsTheValue) {
  this->store_->set("addr/0", "10.0.0.1:4000");
  EXPECT_EQ(this->store_->get("addr/0", 1s), "10.0.0.1:4000");
  auto other = this->factory_.make();
  EXPECT_EQ(other->get("addr/0", 1s), "10.0.0.1:4000");
}

TYPED_TEST(StoreTest, SetOverwritesThePreviousValue) {
  this->store_->set("k", "first");
  this->store_->set("k", "second, longer");
  EXPECT_EQ(this->store_->get("k", 1s), "second, longer");
  this->store_->set("k", "");
  EXPECT_EQ(this->store_->get("k", 1s), "");
}

TYPED_TEST(StoreTest, GetTimeoutNamesTheKey) {
  const auto start = Clock::now();
  const std::string message = timeoutMessageOf([&] { this->store_->get("never/set", 50ms); });
  const auto elapsed = Clock::now() - start;
  EXPECT_EQ(message, "timed out after 50 ms waiting for keys: 0 of 1 present; missing: never/set");
  EXPECT_GE(elapsed, 45ms);
  EXPECT_LT(elapsed, 5s);
}

TYPED_TEST(StoreTest, GetWaitsForAKeySetLater) {
  auto writer = this->factory_.make();
  std::thread late([&] {
    std::this_thread::sleep_for(50ms);
    writer->set("late", "arrived");
  });
  const auto start = Clock::now();
  EXPECT_EQ(this->store_->get("late", 10s), "arrived");
  EXPECT_LT(Clock::now() - start, 5s);
  late.join();
}

TYPED_TEST(StoreTest, WaitTimeoutCountsPresentKeysAndNamesMissingOnes) {
  this->store_->set("addr/0", "a");
  this->store_->set("addr/2", "c");
  const std::string message = timeoutMessageOf([&] {
    this->store_->wait({"addr/0", "addr/1", "addr/2", "addr/3"}, 100ms);
  });
  EXPECT_EQ(message,
            "timed out after 100 ms waiting for keys: 2 of 4 present; missing: addr/1, addr/3");
}

TYPED_TEST(StoreTest, WaitReturnsOnceEveryKeyArrives) {
  auto writer = this->factory_.make();
  std::thread ranks([&] {
    for (int i = 0; i < 4; ++i) {
      std::this_thread::sleep_for(10ms);
      writer->set("addr/" + std::to_string(i), std::to_string(i));
    }
  });
  this->store_->wait({"addr/0", "addr/1", "addr/2", "addr/3"}, 10s);
  EXPECT_TRUE(this->store_->check({"addr/0", "addr/1", "addr/2", "addr/3"}));
  EXPECT_EQ(this->store_->get("addr/3", 0ms), "3");
  ranks.join();
}

TYPED_TEST(StoreTest, GetManyReturnsTheValuesInTheOrderOfTheKeys) {
  auto writer = this->factory_.make();
  writer->set("rec/1", "one");
  std::thread late([&] {
    std::this_thread::sleep_for(20ms);
    writer->set("rec/0", "zero");
  });
  EXPECT_EQ(this->store_->getMany({"rec/1", "rec/0", "rec/1"}, 10s),
            (std::vector<std::string>{"one", "zero", "one"}));
  late.join();
  EXPECT_TRUE(this->store_->getMany({}, 0ms).empty());
}

TYPED_TEST(StoreTest, GetManyTimeoutNamesTheMissingKeys) {
  this->store_->set("rec/0", "a");
  const std::string message = timeoutMessageOf([&] {
    this->store_->getMany({"rec/0", "rec/1"}, 60ms);
  });
  EXPECT_EQ(message, "timed out after 60 ms waiting for keys: 1 of 2 present; missing: rec/1");
}

TYPED_TEST(StoreTest, AddFromEightThreadsCountsEveryIncrement) {
  constexpr int kThreads = 8;
  constexpr int kIncrements = 1000;
  std::vector<std::vector<int64_t>> seen(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    // Half the threads share one client (its thread safety), half have their own (atomicity
    // across clients).
    std::shared_ptr<Store> client = t % 2 == 0 ? this->store_ : this->factory_.make();
    threads.emplace_back([client, &seen, t] {
      for (int i = 0; i < kIncrements; ++i) seen[t].push_back(client->add("counter", 1));
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(this->store_->add("counter", 0), kThreads * kIncrements);
  EXPECT_EQ(this->store_->get("counter", 1s), std::to_string(kThreads * kIncrements));
  // Atomic increments hand out every intermediate value exactly once.
  std::vector<int64_t> all;
  for (const auto& values : seen) all.insert(all.end(), values.begin(), values.end());
  std::sort(all.begin(), all.end());
  ASSERT_EQ(all.size(), static_cast<size_t>(kThreads * kIncrements));
  for (size_t i = 0; i < all.size(); ++i) ASSERT_EQ(all[i], static_cast<int64_t>(i + 1));
}

TYPED_TEST(StoreTest, AddStartsAtZeroAndTakesNegativeDeltas) {
  EXPECT_EQ(this->store_->add("c", 5), 5);
  EXPECT_EQ(this->store_->add("c", -7), -2);
  EXPECT_EQ(this->store_->get("c", 1s), "-2");
  this->store_->set("c", "40");
  EXPECT_EQ(this->store_->add("c", 2), 42);
}

TYPED_TEST(StoreTest, AddOnANonIntegerIsAnInvalidArgument) {
  this->store_->set("text", "not a number");
  EXPECT_THROW(this->store_->add("text", 1), InvalidArgumentError);
  EXPECT_EQ(this->store_->get("text", 1s), "not a number");
  this->store_->set("big", std::to_string(INT64_MAX));
  EXPECT_THROW(this->store_->add("big", 1), InvalidArgumentError);
  // The store is still usable after refusing.
  EXPECT_EQ(this->store_->add("fine", 3), 3);
}

TYPED_TEST(StoreTest, CompareSetSwapsOnlyOnAMatch) {
  // Absent key: an empty `expected` matches and sets it.
  EXPECT_EQ(this->store_->compareSet("leader", "", "rank0"), "rank0");
  EXPECT_EQ(this->store_->get("leader", 1s), "rank0");
  // Mismatch: unchanged, returns the current value.
  EXPECT_EQ(this->store_->compareSet("leader", "rank7", "rank1"), "rank0");
  EXPECT_EQ(this->store_->get("leader", 1s), "rank0");
  // An empty expected does not match a present key.
  EXPECT_EQ(this->store_->compareSet("leader", "", "rank2"), "rank0");
  // Match: swapped.
  EXPECT_EQ(this->store_->compareSet("leader", "rank0", "rank1"), "rank1");
  EXPECT_EQ(this->store_->get("leader", 1s), "rank1");
  // Absent key with a non-empty expected: nothing stored, empty returned.
  EXPECT_EQ(this->store_->compareSet("absent", "x", "y"), "");
  EXPECT_FALSE(this->store_->check({"absent"}));
}

TYPED_TEST(StoreTest, CheckIsTrueOnlyWhenEveryKeyExists) {
  EXPECT_TRUE(this->store_->check({}));
  EXPECT_FALSE(this->store_->check({"a"}));
  this->store_->set("a", "1");
  EXPECT_TRUE(this->store_->check({"a"}));
  EXPECT_FALSE(this->store_->check({"a", "b"}));
  this->store_->set("b", "");
  EXPECT_TRUE(this->store_->check({"a", "b"}));
}

TYPED_TEST(StoreTest, EraseRemovesTheKeyAndIgnoresAbsentKeys) {
  this->store_->set("gone", "soon");
  this->store_->erase("gone");
  EXPECT_FALSE(this->store_->check({"gone"}));
  EXPECT_NE(timeoutMessageOf([&] { this->store_->get("gone", 20ms); }), "");
  this->store_->erase("never-existed");
  this->store_->set("gone", "back");
  EXPECT_EQ(this->store_->get("gone", 1s), "back");
}

TYPED_TEST(StoreTest, BinaryValuesKeepNulBytes) {
  const Bytes small("\0a\0\xff\x01", 5);
  this->store_->set("nccl/id", small);
  const Bytes back = this->store_->get("nccl/id", 1s);
  ASSERT_EQ(back.size(), 5u);
  EXPECT_EQ(back, small);

  std::mt19937 random(7);
  Bytes large(1 << 20, '\0');
  for (auto& c : large) c = static_cast<char>(random());
  this->store_->set("blob", large);
  EXPECT_EQ(this->store_->get("blob", 1s), large);
}

TYPED_TEST(StoreTest, KeysThatLookAlikeStayDistinct) {
  const std::vector<std::string> keys = {"a/b", "a%2Fb", "a_b", "a b", "a.b", "", "..", "A/B"};
  for (size_t i = 0; i < keys.size(); ++i) this->store_->set(keys[i], "v" + std::to_string(i));
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(this->store_->get(keys[i], 1s), "v" + std::to_string(i)) << "key '" << keys[i] << "'";
  }
}

TEST(StoreTimeoutMessageTest, ListsAtMostSixteenMissingKeys) {
  std::vector<std::string> keys;
  for (int i = 0; i < 20; ++i) keys.push_back("k" + std::to_string(i));
  const std::string message = timeoutMessage(keys, keys, 30000ms);
  EXPECT_EQ(message.rfind("timed out after 30000 ms waiting for keys: 0 of 20 present; missing: "
                          "k0, k1,",
                          0),
            0u)
      << message;
  EXPECT_NE(message.find("k15, ... (4 more)"), std::string::npos) << message;
  EXPECT_EQ(message.find("k16"), std::string::npos) << message;
}

TEST(StoreDeadlineTest, HugeTimeoutsSaturateInsteadOfOverflowing) {
  EXPECT_EQ(deadlineAfter(Timeout::max()), Clock::time_point::max());
  const auto before = Clock::now();
  const auto negative = deadlineAfter(-5ms);
  const auto after = Clock::now();
  EXPECT_GE(negative, before);
  EXPECT_LE(negative, after);
  const auto later = deadlineAfter(1000ms);
  EXPECT_GE(later - before, 1000ms);
  EXPECT_LT(later - before, 2000ms);
}

TEST(FileStoreTest, EncodesKeysIntoSafeDistinctFileNames) {
  EXPECT_EQ(FileStore::encodeKey("addr/3"), "kaddr%2F3");
  EXPECT_EQ(FileStore::encodeKey("a%2Fb"), "ka%252Fb");
  EXPECT_EQ(FileStore::encodeKey(""), "k");
  EXPECT_EQ(FileStore::encodeKey(".."), "k%2E%2E");
  EXPECT_EQ(FileStore::encodeKey(std::string("\0\xff", 2)), "k%00%FF");
  EXPECT_THROW(FileStore::encodeKey(std::string(200, '/')), InvalidArgumentError);
}

TEST(FileStoreTest, MissingDirectoryIsABackendError) {
  try {
    FileStore store("/nonexistent/hvd-store-test");
    FAIL() << "a missing directory was accepted";
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/hvd-store-test"), std::string::npos);
  }
}

}  // namespace
}  // namespace hvd::store
