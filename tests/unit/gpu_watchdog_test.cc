// The NCCL watchdog against a gmock NcclApi. Intervals are short (5-20 ms) and time is only
// bounded loosely from above (seconds), so the tests hold on a loaded CI machine.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gpu/watchdog.h"
#include "hvd/error.hpp"

namespace hvd::gpu {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;
using ::testing::_;
using ::testing::HasSubstr;
using ::testing::Invoke;
using ::testing::NiceMock;
using ::testing::Return;

class MockNccl : public NcclApi {
 public:
  MOCK_METHOD(int, version, (), (override));
  MOCK_METHOD(NcclResult, getUniqueId, (NcclUniqueId * id), (override));
  MOCK_METHOD(NcclResult, commInitRank,
              (NcclComm * comm, int nranks, const NcclUniqueId& id, int rank, bool blocking),
              (override));
  MOCK_METHOD(NcclResult, commGetAsyncError, (NcclComm comm, NcclResult* asyncError), (override));
  MOCK_METHOD(NcclResult, commAbort, (NcclComm comm), (override));
  MOCK_METHOD(NcclResult, commDestroy, (NcclComm comm), (override));
  MOCK_METHOD(NcclResult, allReduce,
              (const void* send, void* recv, size_t count, DataType type, ReduceOp op,
               NcclComm comm, CudaStream stream),
              (override));
  MOCK_METHOD(NcclResult, broadcast,
              (const void* send, void* recv, size_t count, DataType type, int root, NcclComm comm,
               CudaStream stream),
              (override));
  MOCK_METHOD(NcclResult, allGather,
              (const void* send, void* recv, size_t sendCount, DataType type, NcclComm comm,
               CudaStream stream),
              (override));
  MOCK_METHOD(NcclResult, reduceScatter,
              (const void* send, void* recv, size_t recvCount, DataType type, ReduceOp op,
               NcclComm comm, CudaStream stream),
              (override));
  MOCK_METHOD(NcclResult, send,
              (const void* buffer, size_t count, DataType type, int peer, NcclComm comm,
               CudaStream stream),
              (override));
  MOCK_METHOD(NcclResult, recv,
              (void* buffer, size_t count, DataType type, int peer, NcclComm comm,
               CudaStream stream),
              (override));
  MOCK_METHOD(NcclResult, groupStart, (), (override));
  MOCK_METHOD(NcclResult, groupEnd, (), (override));
  MOCK_METHOD(std::string, errorString, (NcclResult result), (override));
  MOCK_METHOD(std::string, lastError, (NcclComm comm), (override));
};

// What the mock NCCL reports, changeable while the watchdog runs (gmock expectations must not
// change once other threads call the mock, so the actions read this instead).
class CommStates {
 public:
  void setAsyncError(NcclComm comm, NcclResult result) {
    std::lock_guard<std::mutex> lock(mutex_);
    errors_[comm] = result;
  }
  NcclResult poll(NcclComm comm) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++polls_[comm];
    const auto it = errors_.find(comm);
    return it == errors_.end() ? NcclResult::kSuccess : it->second;
  }
  int polls(NcclComm comm) {
    std::lock_guard<std::mutex> lock(mutex_);
    return polls_[comm];
  }

 private:
  std::mutex mutex_;
  std::map<NcclComm, NcclResult> errors_;
  std::map<NcclComm, int> polls_;
};

// Messages passed to onFailure and die, in order.
class Reports {
 public:
  std::function<void(const std::string&)> failureSink() {
    return [this](const std::string& m) { add(failures_, m); };
  }
  std::function<void(const std::string&)> dieSink() {
    return [this](const std::string& m) { add(deaths_, m); };
  }
  // Waits (up to 10 s) until onFailure was called `n` times; returns the messages.
  std::vector<std::string> waitFailures(size_t n) { return waitFor(failures_, n); }
  std::vector<std::string> waitDeaths(size_t n) { return waitFor(deaths_, n); }
  std::vector<std::string> failures() { return waitFor(failures_, 0); }
  std::vector<std::string> deaths() { return waitFor(deaths_, 0); }

 private:
  void add(std::vector<std::string>& to, const std::string& message) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      to.push_back(message);
    }
    changed_.notify_all();
  }
  std::vector<std::string> waitFor(std::vector<std::string>& list, size_t n) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait_for(lock, seconds(10), [&] { return list.size() >= n; });
    return list;
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::string> failures_;
  std::vector<std::string> deaths_;
};

// A gate a mock call waits behind until the test opens it.
class Gate {
 public:
  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return open_; });
  }
  void open() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      open_ = true;
    }
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool open_ = false;
};

bool eventually(const std::function<bool()>& condition, milliseconds limit = seconds(10)) {
  const auto deadline = Clock::now() + limit;
  while (!condition()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return true;
}

class WatchdogTest : public ::testing::Test {
 protected:
  WatchdogTest() {
    ON_CALL(nccl_, commGetAsyncError(_, _))
        .WillByDefault(Invoke([this](NcclComm comm, NcclResult* asyncError) {
          *asyncError = states_.poll(comm);
          return NcclResult::kSuccess;
        }));
    ON_CALL(nccl_, commAbort(_)).WillByDefault(Invoke([this](NcclComm) {
      ++aborts_;
      return NcclResult::kSuccess;
    }));
    ON_CALL(nccl_, errorString(NcclResult::kRemoteError))
        .WillByDefault(Return("remote process exited or there was a network error"));
    ON_CALL(nccl_, errorString(NcclResult::kInvalidArgument))
        .WillByDefault(Return("invalid argument (run with NCCL_DEBUG=WARN for details)"));
    ON_CALL(nccl_, lastError(_)).WillByDefault(Return(""));
    ON_CALL(nccl_, lastError(local_)).WillByDefault(Return("peer 3 closed the connection"));
  }

  WatchdogOptions options(milliseconds poll = milliseconds(5)) {
    WatchdogOptions o;
    o.pollInterval = poll;
    o.opTimeout = seconds(60);
    o.abortTimeout = seconds(10);
    o.onFailure = reports_.failureSink();
    o.die = reports_.dieSink();
    return o;
  }

  // Starts a watchdog over both communicators ("global" first).
  std::unique_ptr<Watchdog> start(const WatchdogOptions& o) {
    auto dog = std::make_unique<Watchdog>(nccl_, o);
    dog->watch(global_, "global", 1, "h1");
    dog->watch(local_, "local", 1, "h1");
    return dog;
  }

  int globalObject_ = 0;
  int localObject_ = 0;
  NcclComm global_ = &globalObject_;
  NcclComm local_ = &localObject_;
  CommStates states_;
  Reports reports_;
  std::atomic<int> aborts_{0};
  NiceMock<MockNccl> nccl_;  // after what its actions use, so it is destroyed first
};

TEST_F(WatchdogTest, HealthyCommunicatorsAreNeverAbortedAndShutdownIsClean) {
  EXPECT_CALL(nccl_, commAbort(_)).Times(0);
  auto dog = start(options());
  for (int i = 0; i < 20; ++i) {
    const Watchdog::OpToken t = dog->opStarted(global_, "allreduce 'w" + std::to_string(i) + "'");
    std::this_thread::sleep_for(milliseconds(2));
    dog->opFinished(t);
  }
  ASSERT_TRUE(
      eventually([&] { return states_.polls(global_) >= 5 && states_.polls(local_) >= 5; }));
  const auto before = Clock::now();
  dog.reset();
  EXPECT_LT(Clock::now() - before, seconds(2));
  EXPECT_TRUE(reports_.failures().empty());
  EXPECT_TRUE(reports_.deaths().empty());
}

TEST_F(WatchdogTest, DestructorDoesNotWaitForThePollInterval) {
  auto dog = start(options(seconds(30)));
  std::this_thread::sleep_for(milliseconds(20));
  const auto before = Clock::now();
  dog.reset();
  EXPECT_LT(Clock::now() - before, seconds(5));
  EXPECT_EQ(aborts_.load(), 0);
}

TEST_F(WatchdogTest, InProgressIsNotAnError) {
  EXPECT_CALL(nccl_, commAbort(_)).Times(0);
  states_.setAsyncError(global_, NcclResult::kInProgress);  // a non-blocking init still running
  auto dog = start(options());
  ASSERT_TRUE(eventually([&] { return states_.polls(global_) >= 10; }));
  dog.reset();
  EXPECT_TRUE(reports_.failures().empty());
}

TEST_F(WatchdogTest, AsyncErrorOnOneCommunicatorAbortsBothOnceAndReportsOnce) {
  EXPECT_CALL(nccl_, commAbort(global_)).Times(1);
  EXPECT_CALL(nccl_, commAbort(local_)).Times(1);
  int abortsWhenReported = -1;
  WatchdogOptions o = options();
  o.onFailure = [&, sink = reports_.failureSink()](const std::string& m) {
    abortsWhenReported = aborts_.load();
    sink(m);
  };
  auto dog = start(o);
  ASSERT_TRUE(eventually([&] { return states_.polls(local_) >= 2; }));
  EXPECT_FALSE(dog->failed());
  states_.setAsyncError(local_, NcclResult::kRemoteError);

  const std::vector<std::string> failures = reports_.waitFailures(1);
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0],
            "NCCL communicator 'local' on rank 1 (host h1) reported ncclRemoteError: remote "
            "process exited or there was a network error (peer 3 closed the connection); aborted "
            "all 2 communicators");
  // No more reports, polls or aborts after the failure.
  const int polls = states_.polls(global_);
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_EQ(states_.polls(global_), polls);
  EXPECT_EQ(reports_.failures().size(), 1u);
  EXPECT_TRUE(dog->failed());
  EXPECT_EQ(dog->failureMessage(), failures[0]);
  dog.reset();
  EXPECT_EQ(aborts_.load(), 2);
  ::testing::Mock::VerifyAndClearExpectations(&nccl_);
  // Then the handles failed: the aborts came first.
  EXPECT_EQ(abortsWhenReported, 2);
  EXPECT_TRUE(reports_.deaths().empty());
}

TEST_F(WatchdogTest, FailingGetAsyncErrorIsAFailureToo) {
  ON_CALL(nccl_, commGetAsyncError(global_, _)).WillByDefault(Return(NcclResult::kInvalidArgument));
  auto dog = start(options());
  const std::vector<std::string> failures = reports_.waitFailures(1);
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_THAT(failures[0], HasSubstr("NCCL communicator 'global' on rank 1 (host h1) failed "
                                     "ncclCommGetAsyncError with ncclInvalidArgument: invalid "
                                     "argument"));
  EXPECT_THAT(failures[0], HasSubstr("aborted all 2 communicators"));
  dog.reset();
  EXPECT_EQ(aborts_.load(), 2);
}

TEST_F(WatchdogTest, OpOlderThanTheTimeoutAbortsAndNamesTheOp) {
  EXPECT_CALL(nccl_, commAbort(_)).Times(2);
  WatchdogOptions o = options();
  o.opTimeout = milliseconds(200);
  auto dog = start(o);
  const auto started = Clock::now();
  dog->opFinished(dog->opStarted(local_, "broadcast 'params'"));
  dog->opStarted(global_, "allreduce 'x'");  // never finishes: a peer stopped without an error

  const std::vector<std::string> failures = reports_.waitFailures(1);
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_GE(Clock::now() - started, milliseconds(200));
  EXPECT_EQ(failures[0],
            "allreduce 'x' on communicator 'global' has not finished after 0.2 s on rank 1 (host "
            "h1); aborted all 2 communicators");
  dog.reset();
}

TEST_F(WatchdogTest, OpsThatFinishInTimeNeverTimeOut) {
  EXPECT_CALL(nccl_, commAbort(_)).Times(0);
  WatchdogOptions o = options();
  o.opTimeout = milliseconds(200);
  auto dog = start(o);
  const auto until = Clock::now() + milliseconds(500);
  while (Clock::now() < until) {
    const Watchdog::OpToken t = dog->opStarted(global_, "allreduce 'y'");
    std::this_thread::sleep_for(milliseconds(10));
    dog->opFinished(t);
  }
  dog.reset();
  EXPECT_TRUE(reports_.failures().empty());
}

TEST_F(WatchdogTest, RequestStopAbortsAndReportsTheReasonOnce) {
  EXPECT_CALL(nccl_, commAbort(global_)).Times(1);
  EXPECT_CALL(nccl_, commAbort(local_)).Times(1);
  auto dog = start(options(seconds(30)));  // a stop does not wait for the next poll
  const auto before = Clock::now();
  dog->requestStop("stall shutdown: 'w' waits on rank 2");
  dog->requestStop("a second stop is ignored");

  const std::vector<std::string> failures = reports_.waitFailures(1);
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_LT(Clock::now() - before, seconds(5));
  EXPECT_EQ(failures[0], "stall shutdown: 'w' waits on rank 2; aborted all 2 communicators");
  dog->requestStop("after the failure");
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_EQ(reports_.failures().size(), 1u);
  dog.reset();
}

TEST_F(WatchdogTest, StopRequestedJustBeforeDestructionStillAborts) {
  EXPECT_CALL(nccl_, commAbort(_)).Times(2);
  auto dog = start(options(seconds(30)));
  dog->requestStop("shutting down after an error");
  dog.reset();
  const std::vector<std::string> failures = reports_.failures();
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0], "shutting down after an error; aborted all 2 communicators");
}

TEST_F(WatchdogTest, StopWithoutCommunicatorsStillReports) {
  Watchdog dog(nccl_, options());
  dog.requestStop("job cancelled");
  const std::vector<std::string> failures = reports_.waitFailures(1);
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0], "job cancelled; there were no NCCL communicators to abort");
}

TEST_F(WatchdogTest, FailedAbortIsNamedInTheMessage) {
  EXPECT_CALL(nccl_, commAbort(global_)).Times(1);
  EXPECT_CALL(nccl_, commAbort(local_)).WillOnce(Return(NcclResult::kSystemError));
  auto dog = start(options());
  dog->requestStop("stop");
  const std::vector<std::string> failures = reports_.waitFailures(1);
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0],
            "stop; aborted all 2 communicators (ncclCommAbort failed for 'local': "
            "ncclSystemError)");
}

TEST_F(WatchdogTest, HungAbortEndsTheProcessThroughDie) {
  Gate gate;
  EXPECT_CALL(nccl_, commAbort(global_)).WillOnce(Invoke([&](NcclComm) {
    gate.wait();  // a wedged driver
    return NcclResult::kSuccess;
  }));
  EXPECT_CALL(nccl_, commAbort(local_)).Times(1);
  WatchdogOptions o = options();
  o.abortTimeout = milliseconds(200);
  auto dog = start(o);
  states_.setAsyncError(global_, NcclResult::kRemoteError);

  const auto failedAt = Clock::now();
  const std::vector<std::string> deaths = reports_.waitDeaths(1);
  ASSERT_EQ(deaths.size(), 1u);
  EXPECT_GE(Clock::now() - failedAt, milliseconds(200));
  EXPECT_EQ(deaths[0],
            "NCCL communicator 'global' on rank 1 (host h1) reported ncclRemoteError: remote "
            "process exited or there was a network error; ncclCommAbort of communicator 'global' "
            "did not return within 0.2 s; ending the process so the GPU is released");
  // While the abort hangs nothing is reported as done.
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_TRUE(reports_.failures().empty());
  EXPECT_TRUE(dog->failed());

  // This die() returned (a real one does not): once the abort returns, the report follows.
  gate.open();
  const std::vector<std::string> failures = reports_.waitFailures(1);
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_THAT(failures[0], HasSubstr("aborted all 2 communicators"));
  dog.reset();
  EXPECT_EQ(reports_.deaths().size(), 1u);
}

TEST_F(WatchdogTest, AnInjectedAbortReplacesNcclCommAbort) {
  EXPECT_CALL(nccl_, commAbort(_)).Times(0);
  std::atomic<int> cacheAborts{0};
  WatchdogOptions o = options();
  o.abortAll = [&] { ++cacheAborts; };  // e.g. CommCache::abortAll
  auto dog = start(o);
  states_.setAsyncError(global_, NcclResult::kRemoteError);
  const std::vector<std::string> failures = reports_.waitFailures(1);
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_THAT(failures[0], HasSubstr("reported ncclRemoteError"));
  EXPECT_THAT(failures[0], HasSubstr("; aborted the job's NCCL communicators"));
  dog.reset();
  EXPECT_EQ(cacheAborts.load(), 1);
}

TEST_F(WatchdogTest, AHungInjectedAbortEndsTheProcessToo) {
  Gate gate;
  WatchdogOptions o = options();
  o.abortTimeout = milliseconds(100);
  o.abortAll = [&] { gate.wait(); };
  auto dog = start(o);
  dog->requestStop("stop");
  const std::vector<std::string> deaths = reports_.waitDeaths(1);
  ASSERT_EQ(deaths.size(), 1u);
  EXPECT_EQ(deaths[0],
            "stop; aborting the NCCL communicators did not return within 0.1 s; ending the "
            "process so the GPU is released");
  gate.open();
  EXPECT_EQ(reports_.waitFailures(1).size(), 1u);
  dog.reset();
}

TEST_F(WatchdogTest, UnwatchStopsPollingAndAbortingACommunicator) {
  EXPECT_CALL(nccl_, commAbort(global_)).Times(1);
  EXPECT_CALL(nccl_, commAbort(local_)).Times(0);
  auto dog = start(options());
  ASSERT_TRUE(eventually([&] { return states_.polls(local_) >= 2; }));
  dog->unwatch(local_);
  const int localPolls = states_.polls(local_);
  const int globalPolls = states_.polls(global_);
  ASSERT_TRUE(eventually([&] { return states_.polls(global_) >= globalPolls + 5; }));
  EXPECT_EQ(states_.polls(local_), localPolls);

  // An error on the unwatched communicator is not the watchdog's business any more.
  states_.setAsyncError(local_, NcclResult::kRemoteError);
  std::this_thread::sleep_for(milliseconds(30));
  EXPECT_TRUE(reports_.failures().empty());
  EXPECT_THROW(dog->opStarted(local_, "allreduce 'z'"), InternalError);

  dog->requestStop("stop");
  const std::vector<std::string> failures = reports_.waitFailures(1);
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0], "stop; aborted communicator 'global'");
}

TEST_F(WatchdogTest, UnwatchForgetsTheCommunicatorsOps) {
  EXPECT_CALL(nccl_, commAbort(_)).Times(0);
  WatchdogOptions o = options();
  o.opTimeout = milliseconds(100);
  auto dog = start(o);
  dog->opStarted(local_, "allreduce 'left behind'");
  dog->unwatch(local_);
  std::this_thread::sleep_for(milliseconds(300));
  dog.reset();
  EXPECT_TRUE(reports_.failures().empty());
}

TEST_F(WatchdogTest, OpsAreTrackedFromManyThreads) {
  EXPECT_CALL(nccl_, commAbort(_)).Times(0);
  WatchdogOptions o = options();
  o.opTimeout = seconds(5);
  auto dog = start(o);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        dog->opFinished(dog->opStarted(t % 2 == 0 ? global_ : local_, "allreduce"));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  dog.reset();
  EXPECT_TRUE(reports_.failures().empty());
}

}  // namespace
}  // namespace hvd::gpu
