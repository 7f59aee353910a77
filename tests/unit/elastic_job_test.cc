// The leader's elastic driver (agent/jobs/elastic_job.h) against fake agents, a manual clock and
// a real in-process store: the success rule (every worker of the last round exited 0 while no
// change was pending), a failure taking its host out while the survivors keep their processes
// and get their places in the next round, the reset limit and the wait for --min-np slots. The
// test plays the workers: it writes their "ready" keys and reads their assignments.
#include "agent/jobs/elastic_job.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "agent/coordinator/fake_node_agent.h"
#include "contract/elastic.h"
#include "hvd_support/tcp_store_server.h"

namespace hvd::agent::jobs {
namespace {

using coordinator::FakeNodeAgent;
using coordinator::JobOutcome;
using coordinator::JobResult;
using process::ExitStatus;
using std::chrono::milliseconds;

class ManualClock : public coordinator::Clock {
 public:
  std::chrono::steady_clock::time_point now() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return now_;
  }
  void advance(milliseconds d) {
    std::lock_guard<std::mutex> lock(mutex_);
    now_ += d;
  }

 private:
  std::mutex mutex_;
  std::chrono::steady_clock::time_point now_{};
};

struct Client : coordinator::ClientEvents {
  void onOutput(int, const std::string&, process::Stream, std::string_view) override {}
  void onJobEnd(const JobResult& result) override {
    std::lock_guard<std::mutex> lock(mutex);
    ended = result;
  }
  std::mutex mutex;
  std::optional<JobResult> ended;
};

// The job owns what connect() returns; the test keeps the fakes.
class Borrowed : public coordinator::NodeAgent {
 public:
  explicit Borrowed(FakeNodeAgent* fake) : fake_(fake) {}
  std::string host() const override { return fake_->host(); }
  std::string address() const override { return fake_->address(); }
  coordinator::DescribeResult describe() override { return fake_->describe(); }
  coordinator::ReserveResult reserve(const ledger::Request& r) override {
    return fake_->reserve(r);
  }
  void unreserve(const std::string& key) override { fake_->unreserve(key); }
  coordinator::LaunchStatus launch(const coordinator::LaunchRequest& r,
                                   coordinator::JobEvents* events) override {
    return fake_->launch(r, events);
  }
  void stop(const std::string& job, int signal, milliseconds grace) override {
    fake_->stop(job, signal, grace);
  }

 private:
  FakeNodeAgent* fake_;
};

class ElasticJobTest : public ::testing::Test {
 protected:
  ElasticJobTest() : a_("a"), b_("b") { store_.start(); }
  ~ElasticJobTest() override {
    job_.reset();
    store_.stop();
  }

  void start(int np, std::vector<elastic::DiscoveredHost> hosts,
             const std::function<void(coordinator::ElasticSpec&)>& adjust = {}) {
    coordinator::JobSpec spec;
    spec.jobId = "job-e";
    spec.argv = {"train"};
    spec.np = np;
    spec.elastic.enabled = true;
    spec.elastic.minNp = 1;
    spec.elastic.discoveryInterval = milliseconds(20);
    spec.elastic.timeout = milliseconds(5000);
    if (adjust) adjust(spec.elastic);
    ElasticSite site;
    site.store = &store_;
    site.storeHost = "127.0.0.1";
    site.connect = [this](const std::string& host) -> std::unique_ptr<coordinator::NodeAgent> {
      return std::make_unique<Borrowed>(host == "a" ? &a_ : &b_);
    };
    job_ = std::make_unique<ElasticJob>(
        spec, site, std::make_unique<elastic::FixedHosts>(std::move(hosts)), &client_, &clock_);
  }

  // Ticks until `done` holds (discovery answers on its own thread), at most 5 s.
  template <typename Pred>
  bool tickUntil(Pred done) {
    for (int i = 0; i < 500; ++i) {
      job_->tick();
      if (done()) return true;
      std::this_thread::sleep_for(milliseconds(10));
    }
    return false;
  }

  // The agents' side of a stop: once the job stopped a host's workers, they exit by the signal.
  bool stopsThenEnds(FakeNodeAgent& host, const std::vector<int>& workers) {
    if (!tickUntil([&] { return !host.stops().empty(); })) return false;
    for (int w : workers) host.emitExit(w, ExitStatus{0, 15});
    return tickUntil([&] { return job_->finished(); });
  }

  std::string ns(int round) { return contract::elasticStoreJob("job-e", round); }
  // As a worker does: its ready key first, then the round's count.
  void ready(int round, int worker) {
    store_.set(ns(round), contract::readyKey(worker), "reset");
    const std::optional<std::string> count = store_.value(ns(round), contract::kReadyCountKey);
    store_.set(ns(round), contract::kReadyCountKey,
               std::to_string(count ? std::stoi(*count) + 1 : 1));
  }
  std::optional<contract::ElasticAssignment> assignment(int round, int worker) {
    const std::optional<std::string> text = store_.value(ns(round), contract::assignKey(worker));
    if (!text) return std::nullopt;
    return contract::parseAssignment(*text);
  }

  store::TcpStoreServer store_;
  FakeNodeAgent a_;
  FakeNodeAgent b_;
  ManualClock clock_;
  Client client_;
  std::unique_ptr<ElasticJob> job_;
};

TEST_F(ElasticJobTest, EveryWorkerOfTheRoundExitingZeroIsSuccess) {
  start(3, {{"a", 2}, {"b", 1}});
  ASSERT_TRUE(tickUntil([&] { return a_.launches().size() == 1 && b_.launches().size() == 1; }));
  ASSERT_EQ(a_.launches()[0].ranks.size(), 2u);
  EXPECT_EQ(a_.launches()[0].ranks[0].rank, 0);  // worker ids: a's two, then b's
  EXPECT_EQ(b_.launches()[0].ranks[0].rank, 2);
  a_.emitExit(0, ExitStatus{0, 0});
  a_.emitExit(1, ExitStatus{0, 0});
  job_->tick();
  EXPECT_FALSE(job_->finished());  // worker 2 still runs
  b_.emitExit(2, ExitStatus{0, 0});
  ASSERT_TRUE(tickUntil([&] { return job_->finished(); }));
  EXPECT_EQ(job_->result()->outcome, JobOutcome::kSucceeded);
  EXPECT_EQ(job_->result()->exitCode, 0);
  ASSERT_EQ(job_->rounds().size(), 1u);
  EXPECT_EQ(job_->rounds()[0].size, 3);
}

TEST_F(ElasticJobTest, AFailureTakesItsHostOutAndTheSurvivorsGetTheirPlacesInTheNextRound) {
  start(3, {{"a", 2}, {"b", 1}});
  ASSERT_TRUE(tickUntil([&] { return b_.launches().size() == 1; }));
  b_.emitExit(2, ExitStatus{1, 0});
  job_->tick();
  // The change is announced in round 0's namespace.
  const std::optional<std::string> notice = store_.value(ns(0), contract::kNoticeKey);
  ASSERT_TRUE(notice);
  EXPECT_EQ(contract::parseNotice(*notice)->round, 1);
  ready(0, 0);
  job_->tick();
  EXPECT_FALSE(assignment(0, 0));  // worker 1 is not ready yet: no round forms
  ready(0, 1);
  ASSERT_TRUE(tickUntil([&] { return assignment(0, 1).has_value(); }));
  for (int worker : {0, 1}) {
    const contract::ElasticAssignment a = *assignment(0, worker);
    EXPECT_FALSE(a.removed);
    EXPECT_EQ(a.round, 1);
    EXPECT_EQ(a.rank, worker);  // survivors keep their order
    EXPECT_EQ(a.size, 2);
    EXPECT_EQ(a.localSize, 2);
    EXPECT_EQ(a.host, "a");
    EXPECT_FALSE(a.token.empty());
  }
  EXPECT_EQ(a_.launches().size(), 1u);  // survivors keep their processes: nothing new started
  ASSERT_EQ(job_->rounds().size(), 2u);
  EXPECT_EQ(job_->rounds()[1].hosts, std::vector<std::string>{"a:2"});
  EXPECT_NE(job_->rounds()[1].cause.find("on b failed with exit code 1"), std::string::npos);
  // The job ends when round 1's workers exit 0.
  a_.emitExit(0, ExitStatus{0, 0});
  a_.emitExit(1, ExitStatus{0, 0});
  ASSERT_TRUE(tickUntil([&] { return job_->finished(); }));
  EXPECT_EQ(job_->result()->outcome, JobOutcome::kSucceeded);
}

TEST_F(ElasticJobTest, AnExitZeroWhileTheRoundChangesIsNotSuccess) {
  start(2, {{"a", 1}, {"b", 1}});
  ASSERT_TRUE(tickUntil([&] { return b_.launches().size() == 1; }));
  b_.emitExit(1, ExitStatus{1, 0});
  job_->tick();
  a_.emitExit(0, ExitStatus{0, 0});  // during the recovery: it left, the job did not succeed
  ASSERT_TRUE(tickUntil([&] { return job_->finished(); }));
  EXPECT_NE(job_->result()->outcome, JobOutcome::kSucceeded);
  EXPECT_NE(job_->result()->exitCode, 0);
}

TEST_F(ElasticJobTest, EveryHostBlacklistedEndsTheJobWithHorovodsMessage) {
  start(2, {{"a", 1}, {"b", 1}});
  ASSERT_TRUE(tickUntil([&] { return b_.launches().size() == 1; }));
  b_.emitExit(1, ExitStatus{1, 0});
  a_.emitExit(0, ExitStatus{0, 9});
  ASSERT_TRUE(tickUntil([&] { return job_->finished(); }));
  EXPECT_NE(job_->result()->summary.find(contract::kWorkersFailedMessage), std::string::npos)
      << job_->result()->summary;
}

TEST_F(ElasticJobTest, TheResetPastTheLimitEndsTheJobWithHorovodsMessage) {
  start(3, {{"a", 2}, {"b", 1}}, [](coordinator::ElasticSpec& e) { e.resetLimit = 0; });
  ASSERT_TRUE(tickUntil([&] { return b_.launches().size() == 1; }));
  b_.emitExit(2, ExitStatus{1, 0});
  ready(0, 0);
  ready(0, 1);
  ASSERT_TRUE(stopsThenEnds(a_, {0, 1}));
  EXPECT_NE(job_->result()->summary.find(contract::resetLimitMessage(0)), std::string::npos)
      << job_->result()->summary;
  EXPECT_FALSE(assignment(0, 0));
}

TEST_F(ElasticJobTest, ARoundWaitsForMinNpSlotsUntilTheElasticTimeout) {
  start(2, {{"a", 1}, {"b", 1}}, [](coordinator::ElasticSpec& e) { e.minNp = 2; });
  ASSERT_TRUE(tickUntil([&] { return b_.launches().size() == 1; }));
  b_.emitExit(1, ExitStatus{1, 0});
  ready(0, 0);
  for (int i = 0; i < 5; ++i) job_->tick();
  EXPECT_FALSE(job_->finished());  // one slot is left: the round waits
  EXPECT_TRUE(a_.stops().empty());
  clock_.advance(milliseconds(5001));
  ASSERT_TRUE(stopsThenEnds(a_, {0}));
  EXPECT_NE(job_->result()->summary.find(
                "Timed out waiting for minimum number of slots to become available"),
            std::string::npos)
      << job_->result()->summary;
}

}  // namespace
}  // namespace hvd::agent::jobs

namespace hvd::agent::jobs {
namespace {

TEST_F(ElasticJobTest, ADrainedHostLeavesWithoutBlameAndItsWorkersAreToldWhy) {
  start(3, {{"a", 2}, {"b", 1}});
  ASSERT_TRUE(tickUntil([&] { return b_.launches().size() == 1; }));
  job_->drain("b");
  ASSERT_TRUE(tickUntil([&] { return store_.value(ns(0), contract::kNoticeKey).has_value(); }));
  // At their next commit every worker asks for its place; b's worker is told it leaves.
  for (int worker : {0, 1, 2}) ready(0, worker);
  ASSERT_TRUE(tickUntil([&] { return assignment(0, 2).has_value(); }));
  const contract::ElasticAssignment removed = *assignment(0, 2);
  EXPECT_TRUE(removed.removed);
  EXPECT_EQ(removed.reason, "its host b is draining");
  EXPECT_EQ(assignment(0, 0)->size, 2);
  EXPECT_NE(job_->rounds()[1].cause.find("host b is draining"), std::string::npos);
  // Its exit, whatever it is, is not a failure of the job.
  b_.emitExit(2, ExitStatus{0, 15});
  a_.emitExit(0, ExitStatus{0, 0});
  a_.emitExit(1, ExitStatus{0, 0});
  ASSERT_TRUE(tickUntil([&] { return job_->finished(); }));
  EXPECT_EQ(job_->result()->outcome, JobOutcome::kSucceeded);
}

}  // namespace
}  // namespace hvd::agent::jobs

namespace hvd::agent::jobs {
namespace {

TEST_F(ElasticJobTest, AWorkerThatResetsOnItsOwnEndsTheRoundForEveryone) {
  // No exit, no host change: one worker's op failed (it timed out, say) and it asked for its
  // next place; its peers' ops fail in turn and they ask too. A new round with the same workers.
  start(3, {{"a", 2}, {"b", 1}});
  ASSERT_TRUE(tickUntil([&] { return b_.launches().size() == 1; }));
  ready(0, 2);
  ASSERT_TRUE(tickUntil([&] { return store_.value(ns(0), contract::kNoticeKey).has_value(); }));
  ready(0, 0);
  ready(0, 1);
  ASSERT_TRUE(tickUntil([&] { return assignment(0, 2).has_value(); }));
  for (int worker : {0, 1, 2}) {
    const contract::ElasticAssignment a = *assignment(0, worker);
    EXPECT_EQ(a.round, 1);
    EXPECT_EQ(a.rank, worker);
    EXPECT_EQ(a.size, 3);
  }
  EXPECT_EQ(a_.launches().size(), 1u);
  EXPECT_EQ(b_.launches().size(), 1u);
}

}  // namespace
}  // namespace hvd::agent::jobs

namespace hvd::agent::jobs {
namespace {

std::vector<node::GpuInfo> fakeGpus(int n) {
  std::vector<node::GpuInfo> out;
  for (int i = 0; i < n; ++i) out.push_back({i, "GPU-fake-" + std::to_string(i), "", "", 0});
  return out;
}

std::string envValue(const std::vector<std::string>& env, const std::string& name) {
  for (const std::string& entry : env) {
    if (entry.rfind(name + "=", 0) == 0) return entry.substr(name.size() + 1);
  }
  return "";
}

TEST_F(ElasticJobTest, NewWorkersHoldTheirSlotsAndGpusInTheLedgerAsAJobStartDoes) {
  ledger::ResourceLedger ledgerA("a", fakeGpus(4), 0, [] { return ledger::TimePoint{}; });
  ledger::ResourceLedger ledgerB("b", fakeGpus(2), 0, [] { return ledger::TimePoint{}; });
  a_.useLedger(&ledgerA);
  b_.useLedger(&ledgerB);
  // Another job holds b's GPU 0: the elastic job's worker there gets GPU 1.
  ledger::Request other;
  other.key = other.job = "other-job";
  other.ranks = 1;
  other.preferredGpus = {0};
  ASSERT_EQ(ledgerB.reserve(other).verdict, ledger::Verdict::kGranted);
  start(3, {{"a", 2}, {"b", 1}});
  ASSERT_TRUE(tickUntil([&] { return b_.launches().size() == 1; }));
  const coordinator::LaunchRequest onA = a_.launches().at(0);
  const coordinator::LaunchRequest onB = b_.launches().at(0);
  EXPECT_TRUE(onA.reserved);
  EXPECT_EQ(envValue(onA.ranks.at(0).spec.env, "HVD_GPU"), "0");
  EXPECT_EQ(envValue(onA.ranks.at(1).spec.env, "HVD_GPU"), "1");
  EXPECT_EQ(envValue(onB.ranks.at(0).spec.env, "HVD_GPU"), "1");
  // Each launch holds under a key of its own, so a later round's reservation on a host never
  // takes the survivors' holdings over.
  std::set<std::string> keys;
  for (const ledger::Holding& h : ledgerA.holdings()) keys.insert(h.key);
  EXPECT_EQ(keys, std::set<std::string>{onA.jobId});
}

TEST_F(ElasticJobTest, AHostWhoseSlotsOtherJobsHoldGetsNoNewWorkersAndTheRoundGoesOnWithout) {
  ledger::ResourceLedger ledgerA("a", {}, 0, [] { return ledger::TimePoint{}; });
  ledger::ResourceLedger ledgerB("b", {}, 2, [] { return ledger::TimePoint{}; });
  a_.useLedger(&ledgerA);
  b_.useLedger(&ledgerB);
  ledger::Request other;
  other.key = other.job = "other-job";
  other.ranks = 2;
  ASSERT_EQ(ledgerB.reserve(other).verdict, ledger::Verdict::kGranted);  // b is full
  start(2, {{"a", 2}, {"b", 2}});
  ASSERT_TRUE(tickUntil([&] { return a_.launches().size() == 1; }));
  EXPECT_EQ(a_.launches().at(0).ranks.size(), 2u);
  EXPECT_TRUE(b_.launches().empty());
  ASSERT_EQ(job_->rounds().size(), 1u);
  EXPECT_EQ(job_->rounds()[0].size, 2);
  EXPECT_EQ(job_->rounds()[0].hosts, std::vector<std::string>{"a:2"});
  // Discovery keeps listing b: while other jobs hold it, no round is ended for it...
  for (int i = 0; i < 20; ++i) {
    job_->tick();
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_FALSE(store_.value(ns(0), contract::kNoticeKey).has_value());
  // ...and once they let it go, the job grows into it.
  ledgerB.release("other-job");
  ASSERT_TRUE(tickUntil([&] { return store_.value(ns(0), contract::kNoticeKey).has_value(); }));
}

}  // namespace
}  // namespace hvd::agent::jobs
