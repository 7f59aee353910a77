// hvdrun's commands about jobs that live on the agents: ps, status, logs, attach and
// cancel, plus what `hvdrun submit` and a remote run share with them (which agents to ask, the
// cluster key). Each command asks the agents of -H / --hostfile, else $HVD_AGENT_HOSTS, else the
// agent on this machine; the job lives on its leader agent, so the first agent that knows the
// job answers for it.
// What they print is launcher/job_render.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agent/auth/cluster_key.h"
#include "agent/rpc/credentials.h"
#include "hvd/v1/agent.pb.h"
#include "launcher/options.h"

namespace hvd::launcher {

// An agent to ask: the host as named and "host:port".
struct AgentTarget {
  std::string host;
  std::string address;
};

// The agents the job commands ask (see above); `agentHostsEnv` is $HVD_AGENT_HOSTS or null.
// Throws hvd::InvalidArgumentError for a malformed list.
std::vector<AgentTarget> jobCommandAgents(const Options& options, const char* agentHostsEnv);

// The cluster key of --key-file, or an hvd::InvalidArgumentError that says how to make one.
agent::auth::ClusterKey loadClusterKey(const Options& options);
agent::rpc::TlsOptions tlsOptions(const Options& options);

// Runs ps, status, logs, attach or cancel (options.action); returns hvdrun's exit code.
int runJobCommand(const Options& options);

}  // namespace hvd::launcher
