// Conversions between the control plane's messages (proto/hvd/v1/agent.proto) and the domain
// types of the coordinator and process supervision. One place, so client and server agree and
// the domain code never sees protobuf.
#pragma once

#include <string>
#include <vector>

#include "agent/coordinator/job_coordinator.h"
#include "agent/coordinator/job_state.h"
#include "agent/coordinator/node_agent.h"
#include "agent/relay/subtree_link.h"
#include "hvd/v1/agent.pb.h"

namespace hvd::agent::rpc {

v1::DescribeResponse toProto(const coordinator::NodeDescription& node);
coordinator::NodeDescription fromProto(const v1::DescribeResponse& response);

v1::OutputStream toProto(process::Stream stream);
process::Stream fromProto(v1::OutputStream stream);

v1::LaunchRequest toProto(const coordinator::LaunchRequest& request);
coordinator::LaunchRequest fromProto(const v1::LaunchRequest& request);
// A launch's environment template and a rank's placement (RankSpec.rank is the rank).
v1::WorkerEnvironment toProto(const node::WorkerEnvInput& input);
node::WorkerEnvInput fromProto(const v1::WorkerEnvironment& environment);
v1::RankPlacement toProto(const contract::RankPlacement& placement);
contract::RankPlacement fromProto(const v1::RankPlacement& placement, int rank);

v1::JobOutcome toProto(coordinator::JobOutcome outcome);
coordinator::JobOutcome fromProto(v1::JobOutcome outcome);
v1::JobEnd toProto(const coordinator::JobResult& result);
coordinator::JobResult fromProto(const v1::JobEnd& end);

// The request hvdrun sends, from a JobSpec whose hosts carry their agents' addresses.
v1::SubmitJobRequest toProto(const coordinator::JobSpec& spec,
                             const std::vector<std::string>& agentAddresses);
// The JobSpec the leader runs (jobId left empty: the leader names the job). Throws
// hvd::InvalidArgumentError for values no hvdrun sends (np < 1, no hosts, no program, negative
// slots or grace), so a malformed request is refused before anything is started.
coordinator::JobSpec fromProto(const v1::SubmitJobRequest& request);

// The most restarts a job may ask for, and the longest lease a reservation may ask for.
inline constexpr int kMaxRestarts = 1000000;
inline constexpr long long kMaxLeaseMs = 3600 * 1000;

v1::ReserveRequest toProto(const ledger::Request& request);
// Throws hvd::InvalidArgumentError for a request no leader sends (no key, ranks < 1, a
// negative or huge lease).
ledger::Request fromProto(const v1::ReserveRequest& request);
v1::ReserveResponse toProto(const ledger::Grant& grant);
ledger::Grant fromProto(const v1::ReserveResponse& response);

// The relay part of a call (agent/relay): the other hosts it is for, the tree's width and the
// per-hop call timeout; and back.
v1::Relay toProto(const std::vector<relay::Target>& hosts, int width,
                  std::chrono::milliseconds callTimeout);
std::vector<relay::Target> fromProto(const v1::Relay& relay);
v1::AgentFailure toProto(const coordinator::AgentError& error);
coordinator::AgentError fromProto(const v1::AgentFailure& failure);
v1::LaunchResult toProto(const coordinator::LaunchStatus& status);
coordinator::LaunchStatus fromProto(const v1::LaunchResult& result);

// A led job's record (JobInfo): its ranks, what it holds on each host, and where it stands.
v1::RankInfo toProto(const coordinator::RankSnapshot& rank);
v1::HostResources toProto(const coordinator::HostResources& resources);
v1::JobState toProto(coordinator::JobState state);
coordinator::JobState fromProto(v1::JobState state);

// Where a job is: COMPLETED, FAILED, CANCELLED, TIMEOUT and LOST are final.
bool isFinalState(v1::JobState state);
// "RUNNING", "COMPLETED", ...: what `hvdrun ps` and `status` print.
std::string jobStateName(v1::JobState state);

}  // namespace hvd::agent::rpc

// Describe's answer from the node's facts (agent/node/node_facts.h): its description plus the
// interface and feature lists. Declared apart so that this header, which hvdrun includes too,
// does not pull in the node's interface types.
namespace hvd::agent::node {
struct NodeFacts;
}  // namespace hvd::agent::node

namespace hvd::agent::rpc {

v1::DescribeResponse toProto(const node::NodeFacts& facts);

}  // namespace hvd::agent::rpc
