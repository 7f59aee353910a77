// The agent's side of a launch's environments: each rank of a LaunchRequest that carries a
// template (LaunchRequest::environment) and a placement gets its complete environment here, on
// the agent that starts it (node::buildWorkerEnvironment), so the leader sends what a host's
// ranks share once, not once per rank. Every NodeAgent that starts ranks calls this first (the
// in-process LocalHost, FakeNodeAgent in tests); the relays in between pass the template on.
#pragma once

#include "agent/coordinator/node_agent.h"

namespace hvd::agent::coordinator {

// Fills spec.env of every rank with a placement from the request's template; ranks without one
// keep theirs. Throws hvd::InvalidArgumentError (node::buildWorkerEnvironment's) for a template
// that cannot give a rank its environment, or a placement without a template.
void buildRankEnvironments(LaunchRequest* request);

}  // namespace hvd::agent::coordinator
