// One host reached through a SubtreeLink with no subtree, as a NodeAgent: for a caller that
// talks to hosts one at a time (the elastic driver, jobs/elastic_job.h) rather than as a tree.
// Every call is the link's tree call for the child alone, so the link's contract holds: failures
// are values, every call has its deadline.
#pragma once

#include <memory>
#include <string>

#include "agent/coordinator/node_agent.h"
#include "agent/relay/subtree_link.h"

namespace hvd::agent::relay {

class LinkAgent final : public coordinator::NodeAgent {
 public:
  explicit LinkAgent(std::unique_ptr<SubtreeLink> link) : link_(std::move(link)) {}
  // The link's destructor: its launch streams cancelled (the child stops those ranks), nothing
  // delivered after.
  ~LinkAgent() override = default;

  std::string host() const override { return link_->host(); }
  std::string address() const override { return link_->address(); }
  coordinator::DescribeResult describe() override;
  coordinator::ReserveResult reserve(const ledger::Request& request) override;
  void describeAsync(std::function<void(coordinator::DescribeResult)> done) override;
  void reserveAsync(const ledger::Request& request,
                    std::function<void(coordinator::ReserveResult)> done) override;
  void unreserve(const std::string& key) override;
  bool beginLaunch(const coordinator::LaunchRequest& request, coordinator::JobEvents* events,
                   std::string* error) override;
  coordinator::LaunchStatus awaitLaunch(const coordinator::LaunchRequest& request,
                                        coordinator::JobEvents* events) override;
  coordinator::LaunchStatus launch(const coordinator::LaunchRequest& request,
                                   coordinator::JobEvents* events) override;
  void stop(const std::string& jobId, int signal, std::chrono::milliseconds grace) override;

 private:
  const std::unique_ptr<SubtreeLink> link_;
};

}  // namespace hvd::agent::relay
