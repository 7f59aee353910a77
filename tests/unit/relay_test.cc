// The relay tree (agent/relay): its shape, and a job's calls carried through it. The children are
// fake links that play an agent the way the service does: answer for themselves and relay their
// subtree through a TreeHosts of their own, so a whole tree runs in-process, without threads.
// Every call a fake receives is logged with its caller, so the tests see who called whom.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agent/coordinator/fan_out.h"
#include "agent/coordinator/job_coordinator.h"
#include "agent/relay/tree_hosts.h"
#include "agent/relay/tree_shape.h"

namespace hvd::agent::relay {
namespace {

namespace coord = coordinator;
using namespace std::chrono_literals;

TEST(TreeShape, BranchesAreContiguousNearEqualAndCoverEveryHost) {
  EXPECT_EQ(splitBranches(0, 4), std::vector<Branch>{});
  EXPECT_EQ(splitBranches(3, 4), (std::vector<Branch>{{0, 1}, {1, 1}, {2, 1}}));
  EXPECT_EQ(splitBranches(7, 2), (std::vector<Branch>{{0, 4}, {4, 3}}));
  EXPECT_EQ(splitBranches(10, 3), (std::vector<Branch>{{0, 4}, {4, 3}, {7, 3}}));
  EXPECT_EQ(splitBranches(5, 0), (std::vector<Branch>{{0, 5}}));  // width < 1 counts as 1
  for (size_t count : {1u, 2u, 63u, 64u, 65u, 1000u, 9999u}) {
    for (int width : {1, 2, 3, 16, 64}) {
      const std::vector<Branch> branches = splitBranches(count, width);
      ASSERT_EQ(branches.size(), std::min<size_t>(count, static_cast<size_t>(width)));
      size_t next = 0;
      for (const Branch& b : branches) {
        EXPECT_EQ(b.first, next);
        EXPECT_LE(branches.front().count - b.count, 1u);
        next += b.count;
      }
      EXPECT_EQ(next, count);
    }
  }
}

TEST(TreeShape, DepthGrowsWithTheLogarithmOfTheHosts) {
  EXPECT_EQ(treeDepth(0, 2), 0);
  EXPECT_EQ(treeDepth(1, 2), 1);
  EXPECT_EQ(treeDepth(2, 2), 1);
  EXPECT_EQ(treeDepth(3, 2), 2);
  EXPECT_EQ(treeDepth(7, 2), 3);  // the e2e tree: 8 hosts, the leader and 7 others
  EXPECT_EQ(treeDepth(64, 64), 1);
  EXPECT_EQ(treeDepth(65, 64), 2);
  EXPECT_EQ(treeDepth(4159, 64), 2);  // 64 children with 64 each, and the 64 children
  EXPECT_EQ(treeDepth(9999, 64), 3);  // 10,000 nodes
  EXPECT_EQ(treeDepth(200, 1), 200);  // a chain
}

// What the fake agents saw.
struct World {
  struct Call {
    std::string kind;
    std::string caller;  // "leader" or the relaying host
    std::string host;
    size_t subtree = 0;
  };
  std::vector<Call> calls;
  std::map<std::string, int> depthOf;                // host -> hops from the leader
  std::map<std::string, int> stops;                  // host -> stop calls that reached it
  std::map<std::string, std::vector<int>> launched;  // host -> ranks started
  std::string dead;  // this host's agent answers nothing: every call fails
};

std::unique_ptr<SubtreeLink> fakeLink(World* world, std::string caller, int depth,
                                      const Target& target);

// One child agent: it answers for itself and relays its subtree as the service does.
class FakeLink : public SubtreeLink {
 public:
  FakeLink(World* world, std::string caller, int depth, Target target)
      : world_(world), caller_(std::move(caller)), depth_(depth), target_(std::move(target)) {}

  std::string host() const override { return target_.host; }
  std::string address() const override { return target_.address; }

  void describeTree(const std::vector<Target>& subtree, int width,
                    std::function<void(std::vector<coord::DescribeResult>)> done) override {
    record("describe", subtree);
    std::vector<coord::DescribeResult> results(1);
    if (dead()) {
      done(failAll(subtree));
      return;
    }
    results[0].description = coord::NodeDescription{target_.host, {}, 4, {}, "fake"};
    if (!subtree.empty()) {
      TreeHosts tree(subtree, width, factory());
      std::vector<coord::DescribeResult> relayed = coord::fanOut<coord::DescribeResult>(
          tree.size(),
          [&](size_t i, std::function<void(coord::DescribeResult)> d) {
            tree.agent(i)->describeAsync(std::move(d));
          },
          &tree);
      for (auto& r : relayed) results.push_back(std::move(r));
    }
    done(std::move(results));
  }

  void reserveTree(const std::vector<ledger::Request>& requests, const std::vector<Target>& subtree,
                   int width,
                   std::function<void(std::vector<coord::ReserveResult>)> done) override {
    record("reserve", subtree);
    std::vector<coord::ReserveResult> results(1);
    results[0].accounted = false;  // the described GPUs (none)
    if (!subtree.empty()) {
      TreeHosts tree(subtree, width, factory());
      std::vector<coord::ReserveResult> relayed = coord::fanOut<coord::ReserveResult>(
          tree.size(),
          [&](size_t i, std::function<void(coord::ReserveResult)> d) {
            tree.agent(i)->reserveAsync(requests[i + 1], std::move(d));
          },
          &tree);
      for (auto& r : relayed) results.push_back(std::move(r));
    }
    done(std::move(results));
  }

  void unreserveTree(const std::string&, const std::vector<Target>& subtree, int) override {
    record("unreserve", subtree);
  }

  void stopTree(const std::string& jobId, int signal, std::chrono::milliseconds grace,
                const std::vector<Target>& subtree, int width) override {
    record("stop", subtree);
    ++world_->stops[target_.host];
    if (subtree.empty()) return;
    TreeHosts tree(subtree, width, factory());
    coord::HeldRound round(&tree);
    for (coord::NodeAgent* a : tree.agents()) a->stop(jobId, signal, grace);
  }

  // Starts every host's ranks "at once"; the ranks have all exited 0 by the time the launch is
  // awaited (reported then, after the answer, as an agent reports exits after LaunchResult).
  std::string beginLaunchTree(const std::vector<coord::LaunchRequest>& requests,
                              const std::vector<Target>& subtree, int width,
                              coord::JobEvents* events) override {
    record("launch", subtree);
    events_ = events;
    for (const coord::RankLaunch& r : requests[0].ranks) {
      world_->launched[target_.host].push_back(r.rank);
      exits_.push_back(r.rank);
    }
    if (!subtree.empty()) {
      tree_ = std::make_unique<TreeHosts>(subtree, width, factory());
      coord::HeldRound round(tree_.get());
      for (size_t i = 0; i < subtree.size(); ++i) {
        std::string error;
        tree_->agent(i)->beginLaunch(requests[i + 1], events, &error);
      }
    }
    subtreeRequests_.assign(requests.begin() + 1, requests.end());
    return "";
  }

  coord::LaunchStatus awaitLaunchTree(const std::string&, size_t index) override {
    if (index == 0) {
      for (int rank : exits_) events_->onExit(rank, process::ExitStatus{});
      exits_.clear();
      return {};
    }
    return tree_->agent(index - 1)->awaitLaunch(subtreeRequests_[index - 1], events_);
  }

  void cancelLaunches() override {}
  void closeLaunches() override {}

 private:
  void record(const std::string& kind, const std::vector<Target>& subtree) {
    world_->calls.push_back({kind, caller_, target_.host, subtree.size()});
    world_->depthOf[target_.host] = depth_;
  }
  bool dead() const { return world_->dead == target_.host; }
  std::vector<coord::DescribeResult> failAll(const std::vector<Target>& subtree) const {
    std::vector<coord::DescribeResult> out(1 + subtree.size());
    out[0].error = {target_.host, target_.address, "connection refused"};
    for (size_t i = 0; i < subtree.size(); ++i) {
      out[i + 1].error = {subtree[i].host, subtree[i].address,
                          reachedThrough(target_.host, target_.address, "connection refused")};
    }
    return out;
  }
  TreeHosts::LinkFactory factory() const {
    World* world = world_;
    const std::string caller = target_.host;
    const int depth = depth_ + 1;
    return [world, caller, depth](const Target& t) { return fakeLink(world, caller, depth, t); };
  }

  World* const world_;
  const std::string caller_;
  const int depth_;
  const Target target_;
  coord::JobEvents* events_ = nullptr;
  std::vector<int> exits_;
  std::unique_ptr<TreeHosts> tree_;
  std::vector<coord::LaunchRequest> subtreeRequests_;
};

std::unique_ptr<SubtreeLink> fakeLink(World* world, std::string caller, int depth,
                                      const Target& target) {
  return std::make_unique<FakeLink>(world, std::move(caller), depth, target);
}

std::vector<Target> hosts(size_t n) {
  std::vector<Target> out;
  for (size_t i = 0; i < n; ++i) {
    out.push_back({"h" + std::to_string(i + 1), "10.0.0." + std::to_string(i + 2) + ":7475"});
  }
  return out;
}

TreeHosts::LinkFactory leaderLinks(World* world) {
  return [world](const Target& t) { return fakeLink(world, "leader", 1, t); };
}

// One held round of describes through the tree, the answers in host order.
std::vector<coord::DescribeResult> describeAll(TreeHosts* tree) {
  return coord::fanOut<coord::DescribeResult>(
      tree->size(),
      [&](size_t i, std::function<void(coord::DescribeResult)> done) {
        tree->agent(i)->describeAsync(std::move(done));
      },
      tree);
}

TEST(TreeHosts, EveryHostIsDescribedExactlyOnceAtTheDepthTheShapeSays) {
  for (size_t n : {1u, 5u, 64u, 65u, 200u, 1000u}) {
    for (int width : {1, 2, 3, 16, 64}) {
      if (width == 1 && n > 200) continue;  // a chain that long only deepens the stack
      SCOPED_TRACE("hosts " + std::to_string(n) + ", width " + std::to_string(width));
      World world;
      TreeHosts tree(hosts(n), width, leaderLinks(&world));
      const std::vector<coord::DescribeResult> results = describeAll(&tree);
      ASSERT_EQ(results.size(), n);
      for (size_t i = 0; i < n; ++i) {
        ASSERT_TRUE(results[i].ok()) << i;
        EXPECT_EQ(results[i].description->hostname, "h" + std::to_string(i + 1));
      }
      std::map<std::string, int> calledTimes;
      std::map<std::string, int> childrenOf;
      int deepest = 0;
      for (const World::Call& c : world.calls) {
        ++calledTimes[c.host];
        ++childrenOf[c.caller];
        deepest = std::max(deepest, world.depthOf[c.host]);
      }
      EXPECT_EQ(calledTimes.size(), n);
      for (const auto& [host, times] : calledTimes) EXPECT_EQ(times, 1) << host;
      for (const auto& [caller, children] : childrenOf) EXPECT_LE(children, width) << caller;
      EXPECT_EQ(childrenOf["leader"], std::min<int>(static_cast<int>(n), width));
      EXPECT_EQ(tree.linksBuilt(), std::min<size_t>(n, static_cast<size_t>(width)));
      EXPECT_EQ(deepest, treeDepth(n, width));
    }
  }
}

TEST(TreeHosts, AHeldRoundSendsNothingUntilItIsFlushedAndAnUnheldCallGoesAtOnce) {
  World world;
  TreeHosts tree(hosts(6), 2, leaderLinks(&world));
  tree.hold();
  tree.agent(0)->stop("job", 15, 1000ms);
  tree.agent(4)->stop("job", 15, 1000ms);
  EXPECT_TRUE(world.calls.empty());
  EXPECT_EQ(tree.linksBuilt(), 0u);
  tree.flush();
  // The round of two hosts is two branches of one: h1 and h5 each called for itself.
  ASSERT_EQ(world.calls.size(), 2u);
  EXPECT_EQ(world.calls[0].host, "h1");
  EXPECT_EQ(world.calls[0].subtree, 0u);
  EXPECT_EQ(world.calls[1].host, "h5");
  tree.agent(2)->stop("job", 9, 0ms);  // nothing held: sent now
  ASSERT_EQ(world.calls.size(), 3u);
  EXPECT_EQ(world.calls[2].host, "h3");
  EXPECT_EQ(world.stops, (std::map<std::string, int>{{"h1", 1}, {"h3", 1}, {"h5", 1}}));
}

TEST(TreeHosts, AFailedChildAnswersForItsSubtreeNamingItself) {
  World world;
  world.dead = "h1";
  TreeHosts tree(hosts(7), 2, leaderLinks(&world));
  const std::vector<coord::DescribeResult> results = describeAll(&tree);
  ASSERT_EQ(results.size(), 7u);
  // h1's branch is h1..h4: all fail, and the subtree's reasons name h1; h5..h7 answer.
  EXPECT_EQ(results[0].error.reason, "connection refused");
  for (size_t i = 1; i < 4; ++i) {
    EXPECT_FALSE(results[i].ok());
    EXPECT_EQ(results[i].error.host, "h" + std::to_string(i + 1));
    EXPECT_NE(results[i].error.reason.find("reached through the agent on h1 (10.0.0.2:7475)"),
              std::string::npos)
        << results[i].error.reason;
  }
  for (size_t i = 4; i < 7; ++i) EXPECT_TRUE(results[i].ok()) << i;
}

TEST(TreeHosts, CallsHeldWhenTheTreeShutsDownAreAnsweredNotDropped) {
  World world;
  std::vector<coord::DescribeResult> described;
  std::vector<coord::ReserveResult> reserved;
  TreeHosts tree(hosts(3), 2, leaderLinks(&world));
  tree.hold();
  tree.agent(0)->describeAsync([&](coord::DescribeResult r) { described.push_back(r); });
  tree.agent(2)->reserveAsync(ledger::Request{},
                              [&](coord::ReserveResult r) { reserved.push_back(r); });
  tree.shutdown();
  // Nothing was sent, yet whoever waits on these answers gets one, naming its host.
  EXPECT_TRUE(world.calls.empty());
  ASSERT_EQ(described.size(), 1u);
  EXPECT_FALSE(described[0].ok());
  EXPECT_EQ(described[0].error.host, "h1");
  EXPECT_EQ(described[0].error.reason, "the agent connection is shut down");
  ASSERT_EQ(reserved.size(), 1u);
  EXPECT_EQ(reserved[0].error.host, "h3");
  EXPECT_EQ(reserved[0].error.reason, "the agent connection is shut down");
  // And a call after the shutdown is answered the same way, at once.
  tree.agent(1)->describeAsync([&](coord::DescribeResult r) { described.push_back(r); });
  ASSERT_EQ(described.size(), 2u);
  EXPECT_EQ(described[1].error.host, "h2");
  EXPECT_TRUE(world.calls.empty());
}

struct Client : coord::ClientEvents {
  void onOutput(int, const std::string&, process::Stream, std::string_view) override {}
  void onJobEnd(const coord::JobResult& r) override { ends.push_back(r); }
  std::vector<coord::JobResult> ends;
};

// The local agent of the leader: one more host, launched in one call, its ranks exiting at once.
class LeaderHost : public coord::NodeAgent {
 public:
  std::string host() const override { return "h0"; }
  std::string address() const override { return "this agent"; }
  coord::DescribeResult describe() override {
    return {coord::NodeDescription{"h0", {}, 4, {}, "fake"}, {}};
  }
  coord::ReserveResult reserve(const ledger::Request&) override {
    coord::ReserveResult r;
    r.accounted = false;
    return r;
  }
  void unreserve(const std::string&) override {}
  coord::LaunchStatus launch(const coord::LaunchRequest& request,
                             coord::JobEvents* events) override {
    for (const coord::RankLaunch& r : request.ranks) events->onExit(r.rank, process::ExitStatus{});
    return {};
  }
  void stop(const std::string&, int, std::chrono::milliseconds) override {}
};

TEST(TreeHosts, AJobRunsThroughTheTreeWithTheLeaderCallingOnlyItsChildren) {
  constexpr size_t kOthers = 19;
  constexpr int kWidth = 3;
  World world;
  TreeHosts tree(hosts(kOthers), kWidth, leaderLinks(&world));
  LeaderHost leader;
  std::vector<coord::NodeAgent*> agents = {&leader};
  for (coord::NodeAgent* a : tree.agents()) agents.push_back(a);
  coord::JobSpec spec;
  spec.jobId = "job-tree";
  spec.argv = {"/bin/true"};
  spec.np = static_cast<int>(2 * (kOthers + 1));
  spec.hosts.push_back({"h0", 2});
  for (const Target& t : hosts(kOthers)) spec.hosts.push_back({t.host, 2});
  coord::SteadyClock clock;
  Client client;
  coord::JobCoordinator job(spec, agents, coord::StoreEndpoint{"10.0.0.1:1", "t"}, &client, &clock,
                            &tree);
  ASSERT_TRUE(job.tryStart(false) == coord::JobCoordinator::Start::kRunning);
  ASSERT_TRUE(job.finished());
  ASSERT_EQ(client.ends.size(), 1u);
  EXPECT_EQ(client.ends[0].outcome, coord::JobOutcome::kSucceeded) << client.ends[0].summary;
  // Per round, the leader sent one call to each of its 3 children, for the whole tree.
  std::map<std::string, int> leaderCalls;
  std::map<std::string, std::map<std::string, int>> hostCalls;  // kind -> host -> calls
  for (const World::Call& c : world.calls) {
    if (c.caller == "leader") ++leaderCalls[c.kind];
    ++hostCalls[c.kind][c.host];
  }
  EXPECT_EQ(leaderCalls, (std::map<std::string, int>{
                             {"describe", kWidth}, {"reserve", kWidth}, {"launch", kWidth}}));
  for (const std::string kind : {"describe", "reserve", "launch"}) {
    EXPECT_EQ(hostCalls[kind].size(), kOthers) << kind;
    for (const auto& [host, n] : hostCalls[kind]) EXPECT_EQ(n, 1) << kind << " " << host;
  }
  // Every host started exactly its own two ranks, in -H order.
  for (size_t h = 1; h <= kOthers; ++h) {
    const int first = static_cast<int>(2 * h);
    EXPECT_EQ(world.launched["h" + std::to_string(h)], (std::vector<int>{first, first + 1})) << h;
  }
}

}  // namespace
}  // namespace hvd::agent::relay
