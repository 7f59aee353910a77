// What the job coordinator needs from each host's agent (docs/architecture.md "How a job flows",
// steps 3-4). The coordinator is domain logic and never sees gRPC: the gRPC client of a remote
// agent, the in-process agent of the embedded default and FakeNodeAgent (tests) all implement
// NodeAgent, the way Ray's raylet code depends on a handler interface rather than on its RPC
// service.
//
// Contract shared by every implementation:
//   * Expected outcomes (an agent that cannot be reached, a launch that fails) are values, never
//     exceptions; nothing may throw out of these calls.
//   * Every call has its own deadline (the RPC deadline for the gRPC client): a call returns an
//     error value rather than blocking forever, so the coordinator never hangs on a dead host.
//   * Ranks are global ranks everywhere: the agent maps them to its local processes.
#pragma once

#include <chrono>
#include <csignal>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/ledger/resource_ledger.h"
#include "agent/node/node_description.h"
#include "agent/node/worker_env.h"
#include "agent/process/spawner.h"
#include "contract/placement.h"

namespace hvd::agent::coordinator {

// What an agent says about its node (the Describe RPC).
using node::NodeDescription;

// Why talking to an agent failed: enough for a one-line message the user can act on.
struct AgentError {
  std::string host;     // the host as the user named it (-H / hostfile)
  std::string address;  // where the agent was contacted ("10.0.0.2:7070", "in-process")
  std::string reason;   // "connection refused", "deadline exceeded after 5 s", ...
  // The agent answered but refused the caller's credentials (reason: "authentication failed:
  // ..."): a configuration error, reported with its own exit code rather than as unreachable.
  bool authenticationFailed = false;

  // "agent on host-b (10.0.0.2:7070) is unreachable: connection refused"
  std::string describeUnreachable() const {
    return "agent on " + host + " (" + address + ") is unreachable: " + reason;
  }
};

// A GPU of the node and a job that holds it in the agent's ledger.
struct GpuHolder {
  int gpu = 0;
  std::string job;
};

// describe(): exactly one of `description` / `error` is meaningful.
struct DescribeResult {
  DescribeResult() = default;
  // {description, {}} or {std::nullopt, error}, as callers spell them, leaving the facts below
  // unset.
  DescribeResult(std::optional<NodeDescription> described, AgentError failure)
      : description(std::move(described)), error(std::move(failure)) {}

  std::optional<NodeDescription> description;
  AgentError error;
  // What only `hvdrun doctor` reads, from a remote agent's own answer (not a relayed one): its
  // wall clock as it answered, in microseconds since the Unix epoch (0: not said), and which
  // jobs hold its GPUs (a shared GPU once per job).
  int64_t agentUnixTimeUs = 0;
  std::vector<GpuHolder> gpuHolders;

  bool ok() const { return description.has_value(); }
};

// reserve(): the agent's answer, or why it could not be asked (then `error.reason` is set).
struct ReserveResult {
  ledger::Grant grant;
  // false: the agent keeps no ledger (a test's in-process agent); the coordinator then uses the
  // GPUs it described, and the launch binds nothing.
  bool accounted = true;
  AgentError error;

  bool ok() const { return error.reason.empty(); }
};

// One rank to start on the agent's node: its global rank and its command (argv list, cwd). Its
// environment is either given whole in spec.env, or, for a job's ranks, built by the agent that
// starts it from the host's template (LaunchRequest::environment) and the rank's placement
// (rank_environments.h): the leader sends what the ranks share once per host.
struct RankLaunch {
  int rank = 0;
  process::SpawnSpec spec;
  std::optional<contract::RankPlacement> placement;  // with LaunchRequest::environment
};

// This host's share of a job. Ranks are ascending; the agent starts them all or none.
struct LaunchRequest {
  std::string jobId;
  std::vector<RankLaunch> ranks;
  // How the agent stops these ranks by itself when it loses its caller (the leader's stream
  // breaks): the job's stop signal, then SIGKILL after the grace.
  int stopSignal = SIGTERM;
  std::chrono::milliseconds grace{10000};
  // The coordinator reserved `jobId` here (reserve()): the launch binds that reservation and
  // fails when it is gone (its lease expired), instead of starting on resources another job may
  // hold by now.
  bool reserved = false;
  // The ranks' environments on this host without their placements: every rank with a
  // placement gets node::buildWorkerEnvironment of this and its placement, on its agent.
  std::optional<node::WorkerEnvInput> environment;
  // The ranks may leave the job gracefully (an elastic job's workers): an agent stopped
  // gracefully reports onHostDraining and gives them its shutdown grace before stopping them.
  bool drainable = false;
};

// Outcome of launch(): empty `error` means every rank was started.
struct LaunchStatus {
  LaunchStatus() = default;
  LaunchStatus(std::string why) : error(std::move(why)) {}  // NOLINT: a failure, implicitly

  std::string error;  // e.g. "rank 1: cannot execute 'train': No such file or directory"
  // Every started rank's pid on its host (for `hvdrun status`), when the agent knows them.
  std::vector<std::pair<int, int>> pids;  // (global rank, pid)

  bool ok() const { return error.empty(); }
};

// Events of a launched job, reported by the agent to the coordinator. Calls may come from any
// thread (the agent's stream reader), but the calls for one job never overlap each other; the
// implementation (JobCoordinator) is thread-safe regardless.
class JobEvents {
 public:
  virtual ~JobEvents() = default;
  // One complete line of a rank's output, without its '\n' (see process::OutputSink).
  virtual void onOutput(int rank, process::Stream stream, std::string_view line) = 0;
  // A rank ended; reported once per rank, after all of its output.
  virtual void onExit(int rank, const process::ExitStatus& status) = 0;
  // The agent of `host` can no longer be heard (stream broken, heartbeat missed): its ranks must
  // be presumed gone, and no further events come from it. `host` is NodeAgent::host().
  virtual void onAgentLost(const std::string& host, const std::string& reason) = 0;
  // The agent of `host` is stopping gracefully (only for a drainable launch): its ranks will
  // leave if they can within its grace, and be stopped after it. Ignored unless overridden.
  virtual void onHostDraining(const std::string& host) { (void)host; }
};

class NodeAgent {
 public:
  virtual ~NodeAgent() = default;

  // The host as the user named it, and the address the agent is contacted at; used in messages.
  virtual std::string host() const = 0;
  virtual std::string address() const = 0;

  virtual DescribeResult describe() = 0;
  // Holds this host's share of an attempt in the agent's ledger, all or nothing (the request's
  // key is the attempt's launch id). Busy and never-fits are grants with that verdict.
  virtual ReserveResult reserve(const ledger::Request& request) = 0;
  // describe() and reserve() for a coordinator that asks every host at once (fan_out.h): the
  // request goes out now and `done` runs exactly once with what the one-call form would have
  // returned, on any thread, possibly before this returns; `done` must not block. The default
  // answers with the one-call form before it returns (an in-process agent).
  virtual void describeAsync(std::function<void(DescribeResult)> done) { done(describe()); }
  virtual void reserveAsync(const ledger::Request& request,
                            std::function<void(ReserveResult)> done) {
    done(reserve(request));
  }
  // Gives back a reservation that will not be launched; returns at once, unknown keys ignored.
  virtual void unreserve(const std::string& key) = 0;
  // Starts `request.ranks` and from then on reports their events to `events`, which must outlive
  // the job on this agent (until every rank's exit, or onAgentLost, was reported).
  virtual LaunchStatus launch(const LaunchRequest& request, JobEvents* events) = 0;
  // launch() in two halves, so that a coordinator sends every host its launch before it waits
  // for any answer (a job's launch takes one round trip, not one per host). beginLaunch sends
  // the request and returns at once: true when it went out (or failed to: then *error says
  // why), after which one awaitLaunch of the same request returns what launch() would have;
  // false for an agent that launches in one call (the default: awaitLaunch is launch(), and a
  // coordinator skips it for the hosts after a failure).
  virtual bool beginLaunch(const LaunchRequest& request, JobEvents* events, std::string* error) {
    (void)request;
    (void)events;
    (void)error;
    return false;
  }
  virtual LaunchStatus awaitLaunch(const LaunchRequest& request, JobEvents* events) {
    return launch(request, events);
  }
  // Graceful stop of the job's ranks on this node: `signal` now, SIGKILL after `grace` (the
  // agent owns that timer, so a stop survives a coordinator that goes away). A second stop with
  // a shorter grace escalates. Returns at once; exits arrive through JobEvents.
  virtual void stop(const std::string& jobId, int signal, std::chrono::milliseconds grace) = 0;
};

}  // namespace hvd::agent::coordinator
