// One child of a relay tree, as its parent (the leader, or an interior agent) reaches it: every
// call is for the child itself and for the hosts of its subtree, which the child calls in turn
// (tree_shape.h). The gRPC client (client::RemoteNodeAgent) implements it; tests use fakes.
//
// Contract, as NodeAgent's: failures are values, never exceptions; every call has a deadline
// that covers the subtree's depth; answers list the child first, then `subtree` in order.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "agent/coordinator/node_agent.h"

namespace hvd::agent::relay {

// A host reached through the tree.
struct Target {
  std::string host;     // as the user named it
  std::string address;  // "host:port" of its hvdagent
};

class SubtreeLink {
 public:
  virtual ~SubtreeLink() = default;

  virtual std::string host() const = 0;
  virtual std::string address() const = 0;

  // `done` runs exactly once, on any thread, with 1 + subtree.size() results.
  virtual void describeTree(const std::vector<Target>& subtree, int width,
                            std::function<void(std::vector<coordinator::DescribeResult>)> done) = 0;
  // requests: the child's, then one per subtree host.
  virtual void reserveTree(const std::vector<ledger::Request>& requests,
                           const std::vector<Target>& subtree, int width,
                           std::function<void(std::vector<coordinator::ReserveResult>)> done) = 0;
  // Sent asynchronously; failures are only logged.
  virtual void unreserveTree(const std::string& key, const std::vector<Target>& subtree,
                             int width) = 0;
  virtual void stopTree(const std::string& jobId, int signal, std::chrono::milliseconds grace,
                        const std::vector<Target>& subtree, int width) = 0;
  // One launch for the child and its subtree (requests: the child's, then one per subtree host,
  // all of the same job). Returns at once: empty when it went out, else why not. The events of
  // every host's ranks then go to `events`; a subtree host whose agent is lost (or the child
  // itself) gets JobEvents::onAgentLost with that host's name.
  virtual std::string beginLaunchTree(const std::vector<coordinator::LaunchRequest>& requests,
                                      const std::vector<Target>& subtree, int width,
                                      coordinator::JobEvents* events) = 0;
  // What host `index` of that launch (0: the child) answered, waiting up to its deadline.
  virtual coordinator::LaunchStatus awaitLaunchTree(const std::string& jobId, size_t index) = 0;
  // Cancels every launch stream (the child stops its ranks and cancels its subtree's): launches
  // not yet answered fail, and hosts with running ranks are reported lost, so nobody waits on
  // them. Calls may still be made.
  virtual void cancelLaunches() = 0;
  // Cancels every launch stream and waits for each to end: nothing is delivered after it
  // returns (no host is reported lost), and nothing more is sent. Calls in flight go on; the
  // link's destructor waits for them.
  virtual void closeLaunches() = 0;
};

}  // namespace hvd::agent::relay
