// The relayed part of Describe, Reserve, Unreserve and Stop (proto Relay, agent/relay): this
// agent calls the hosts of the subtree the request names, through the same tree code the leader
// uses (relay::TreeHosts, which splits them again beyond the width), and answers for each.
#include <utility>

#include "agent/coordinator/fan_out.h"
#include "agent/rpc/convert.h"
#include "agent/service/agent_service.h"
#include "hvd/error.hpp"

namespace hvd::agent::service {

namespace coord = coordinator;

std::unique_ptr<relay::TreeHosts> AgentService::subtreeOf(const v1::Relay& relay) {
  std::vector<relay::Target> hosts = rpc::fromProto(relay);
  if (hosts.empty()) return nullptr;
  if (!options_.remoteAgents) {
    throw InvalidArgumentError("this agent cannot reach other agents, so it cannot relay");
  }
  const std::chrono::milliseconds timeout = relay.call_timeout_ms() > 0
                                                ? std::chrono::milliseconds(relay.call_timeout_ms())
                                                : options_.defaultConnectTimeout;
  return std::make_unique<relay::TreeHosts>(
      std::move(hosts), relay.width(),
      [factory = options_.remoteAgents, timeout](const relay::Target& t) {
        return factory(jobs::RemoteHost{t.host, t.address, timeout});
      });
}

namespace {

// An error with the host and address it is about, for a relayed answer.
coord::AgentError named(coord::AgentError error, coord::NodeAgent* agent) {
  if (error.host.empty()) error.host = agent->host();
  if (error.address.empty()) error.address = agent->address();
  return error;
}

}  // namespace

void AgentService::relayDescribe(const v1::DescribeRequest& request,
                                 v1::DescribeResponse* response) {
  std::unique_ptr<relay::TreeHosts> tree = subtreeOf(request.relay());
  if (!tree) return;
  const std::vector<coord::DescribeResult> results = coord::fanOut<coord::DescribeResult>(
      tree->size(),
      [&](size_t i, std::function<void(coord::DescribeResult)> done) {
        tree->agent(i)->describeAsync(std::move(done));
      },
      tree.get());
  for (size_t i = 0; i < results.size(); ++i) {
    v1::RelayedDescribe* out = response->add_relayed();
    if (results[i].ok()) {
      *out->mutable_description() = rpc::toProto(*results[i].description);
    } else {
      *out->mutable_failure() = rpc::toProto(named(results[i].error, tree->agent(i)));
    }
  }
}

void AgentService::relayReserve(const v1::ReserveRequest& request, v1::ReserveResponse* response) {
  std::unique_ptr<relay::TreeHosts> tree = subtreeOf(request.relay());
  if (!tree) return;
  if (request.relayed_size() != static_cast<int>(tree->size())) {
    throw InvalidArgumentError("the reserve request relays " +
                               std::to_string(request.relayed_size()) + " requests for " +
                               std::to_string(tree->size()) + " hosts");
  }
  std::vector<ledger::Request> wanted;
  for (const v1::ReserveRequest& r : request.relayed()) wanted.push_back(rpc::fromProto(r));
  const std::vector<coord::ReserveResult> results = coord::fanOut<coord::ReserveResult>(
      tree->size(),
      [&](size_t i, std::function<void(coord::ReserveResult)> done) {
        tree->agent(i)->reserveAsync(wanted[i], std::move(done));
      },
      tree.get());
  for (size_t i = 0; i < results.size(); ++i) {
    v1::RelayedReserve* out = response->add_relayed();
    if (results[i].ok()) {
      *out->mutable_response() = rpc::toProto(results[i].grant);
    } else {
      *out->mutable_failure() = rpc::toProto(named(results[i].error, tree->agent(i)));
    }
  }
}

void AgentService::relayUnreserve(const v1::UnreserveRequest& request) {
  std::unique_ptr<relay::TreeHosts> tree = subtreeOf(request.relay());
  if (!tree) return;
  {
    coord::HeldRound round(tree.get());
    for (coord::NodeAgent* agent : tree->agents()) agent->unreserve(request.job_id());
  }
  detached_.keep(std::move(tree));
}

void AgentService::relayStop(const v1::StopRequest& request, int signal) {
  std::unique_ptr<relay::TreeHosts> tree = subtreeOf(request.relay());
  if (!tree) return;
  {
    coord::HeldRound round(tree.get());
    for (coord::NodeAgent* agent : tree->agents()) {
      agent->stop(request.job_id(), signal, std::chrono::milliseconds(request.grace_ms()));
    }
  }
  detached_.keep(std::move(tree));
}

}  // namespace hvd::agent::service
