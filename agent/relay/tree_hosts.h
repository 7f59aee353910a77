// The other hosts of a job as the coordinator sees them (one NodeAgent each), reached through a
// relay tree (tree_shape.h) of SubtreeLinks. Used by the leader for its job's hosts and by an
// interior agent for the subtree a relayed call names, so both ends split the same way.
//
// As a CallBatch (coordinator/call_batch.h): the calls of a held round are queued, and flush()
// splits the hosts each kind of call is for into branches and sends one call per branch to its
// first host, for the whole branch. Up to `width` hosts every host is its own branch: the star,
// with exactly the messages of a direct call. A call made while nothing is held is sent at once,
// as a round of one.
//
// A branch's child that fails takes its subtree's answers with it: each of those hosts gets an
// answer that names the child it was reached through.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/coordinator/call_batch.h"
#include "agent/coordinator/node_agent.h"
#include "agent/relay/subtree_link.h"

namespace hvd::agent::relay {

class TreeHosts final : public coordinator::CallBatch {
 public:
  // Builds the link to a child; called on first use of each child, from any thread.
  using LinkFactory = std::function<std::unique_ptr<SubtreeLink>(const Target&)>;

  TreeHosts(std::vector<Target> hosts, int width, LinkFactory links);
  // Same as shutdown().
  ~TreeHosts() override;
  TreeHosts(const TreeHosts&) = delete;
  TreeHosts& operator=(const TreeHosts&) = delete;

  size_t size() const { return agents_.size(); }
  int width() const { return width_; }
  // hosts[i] as a NodeAgent; valid until this is destroyed.
  coordinator::NodeAgent* agent(size_t i) const;
  std::vector<coordinator::NodeAgent*> agents() const;
  // How many children have been called (links built), for tests and logs.
  size_t linksBuilt() const;

  void hold() override;
  void flush() override;

  // Cancels every launch stream (SubtreeLink::cancelLaunches): a launch being awaited answers,
  // and hosts with running ranks are reported lost. Safe while another thread awaits a launch.
  void cancelLaunches();
  // SubtreeLink::closeLaunches on every link: after it, no event is delivered and nothing is
  // sent; only the calls in flight remain, which the destructor waits for (a DetachedTrees may
  // do that instead of the caller).
  void closeLaunches();
  // Cancels every launch (the children stop their ranks and relay the cancel down) and waits for
  // the calls in flight; nothing is delivered after it returns, and nothing more is sent. No
  // thread may be inside awaitLaunch of one of these hosts.
  void shutdown();

 private:
  class HostAgent;
  enum class Kind { kDescribe, kReserve, kUnreserve, kStop, kLaunch };
  struct Call {
    Kind kind = Kind::kDescribe;
    size_t host = 0;
    std::function<void(coordinator::DescribeResult)> described;
    ledger::Request reserve;
    std::function<void(coordinator::ReserveResult)> reserved;
    std::string jobId;  // unreserve key, stop and launch job id
    int signal = 0;
    std::chrono::milliseconds grace{0};
    coordinator::LaunchRequest launch;
    coordinator::JobEvents* events = nullptr;
  };
  // Where a launch of a host went: the branch's link and the host's index in it.
  struct LaunchSlot {
    bool sent = false;
    SubtreeLink* link = nullptr;
    size_t index = 0;
    std::string error;  // the branch could not be launched
  };

  void submit(Call call);
  void sendQueued();
  // Answers a describe or reserve that will never be sent (the tree is shut down).
  void answerShutDown(Call& call) const;
  // Sends calls of one kind (and the same job, signal, grace), `calls` in host order.
  void sendRound(std::vector<Call> calls);
  SubtreeLink* linkOf(size_t host);
  std::vector<Target> targetsOf(const std::vector<Call>& calls, size_t first, size_t count) const;
  coordinator::LaunchStatus awaitLaunch(size_t host, const std::string& jobId);

  const std::vector<Target> hosts_;
  const int width_;
  const LinkFactory factory_;
  std::vector<std::unique_ptr<HostAgent>> agents_;

  mutable std::mutex mutex_;
  std::condition_variable launchSent_;
  int held_ = 0;
  bool shutdown_ = false;
  std::vector<Call> queued_;
  std::map<size_t, std::unique_ptr<SubtreeLink>> links_;     // by host index of the child
  std::vector<std::map<std::string, LaunchSlot>> launches_;  // per host, by job id
};

// "agent on <host> (<address>) ..." answers for the hosts a failed child took with it: the
// reason says which child they were reached through.
std::string reachedThrough(const std::string& child, const std::string& address,
                           const std::string& reason);

}  // namespace hvd::agent::relay
