// One Launch on this agent: this node's share of a job, plus the launches it relays to the hosts
// of its subtree (a relay tree, agent/relay/tree_hosts.h), followed until every rank it owes
// its caller has exited. The gRPC service (agent/service) only converts the request and writes
// what comes out; this is the logic, testable without gRPC:
//
//   * the local ranks start first; when they cannot, nothing is relayed and the caller learns
//     why for every relayed host;
//   * the subtree's launches go out as one round and are answered one host at a time, on a
//     thread of their own, while the caller's thread writes events;
//   * events (output, exits, relayed hosts' launch results and losses) reach the caller in the
//     order they happened; output beyond the queue's budget is dropped visibly (event_queue.h);
//   * a caller that goes away (hvdrun killed, the leader agent lost) stops every rank, here and
//     on the relayed hosts: no worker outlives its leader;
//   * a drainable launch (an elastic job's workers) told that this agent is stopping gracefully
//     (drain()) tells its caller so (kDraining) and runs on: its ranks leave at their next
//     commit, and the agent stops what is left after its grace;
//   * the launch ends once every rank's exit is written (or its host was lost or never
//     launched), and its ranks are released here.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "agent/coordinator/node_agent.h"
#include "agent/jobs/local_host.h"
#include "agent/process/spawner.h"
#include "agent/relay/tree_hosts.h"

namespace hvd::agent::jobs {

// One event of a launch, as its caller receives it.
struct LaunchEvent {
  enum class Kind {
    kOutput,        // rank, stream, line
    kExit,          // rank, exit
    kHostLaunched,  // host, result: a relayed host's launch answered
    kHostLost,      // host, reason: a relayed host's agent went away
    kDraining,      // host ("" for this agent): it is stopping gracefully
  };
  Kind kind = Kind::kOutput;
  int rank = -1;
  process::Stream stream = process::Stream::kStdout;
  std::string line;
  process::ExitStatus exit;
  std::string host;
  coordinator::LaunchStatus result;
  std::string reason;
};

// The launch a relayed host gets.
struct RelayedLaunch {
  std::string host;
  coordinator::LaunchRequest request;
};

// The caller's side, used from the thread that runs the launch only.
class LaunchCaller {
 public:
  virtual ~LaunchCaller() = default;
  // Each returns false once the caller is gone (nothing more reaches it).
  virtual bool launched(const coordinator::LaunchStatus& status) = 0;
  virtual bool write(const LaunchEvent& event) = 0;
  // Polled while waiting for events: true once the caller has gone away.
  virtual bool gone() = 0;
};

class HostLaunch {
 public:
  // How often the caller is looked at while no event comes.
  static constexpr std::chrono::milliseconds kPollInterval{150};

  // `tree` holds the hosts of `relayed`, in the same order (null when nothing is relayed).
  // Throws hvd::InvalidArgumentError, before anything starts, for a request without a job id
  // or ranks, a relayed launch of another job or without ranks, or relayed launches that do
  // not match the tree's hosts.
  HostLaunch(LocalHost* local, coordinator::LaunchRequest request,
             std::vector<RelayedLaunch> relayed, std::unique_ptr<relay::TreeHosts> tree);

  enum class Outcome {
    kNotStarted,  // the local launch failed (the caller was told why, for every host)
    kFinished,    // every rank's end was written
    kCallerGone,  // the caller went away; every rank was stopped and has ended
  };
  // Runs the launch to its end. `callerName` names the caller in the log. Throws
  // hvd::InvalidArgumentError for a malformed environment entry (nothing started then).
  Outcome run(LaunchCaller& caller, const std::string& callerName);

  // The program the local ranks run (their first argument), for the log.
  std::string command() const;

  const std::string& jobId() const { return request_.jobId; }
  // Whether the caller asked to hear of a graceful stop (LaunchRequest::drainable).
  bool drainable() const { return request_.drainable; }
  // This agent is stopping gracefully: a drainable launch tells its caller (once, within a poll
  // interval) and goes on until its ranks exit or are stopped. Thread-safe.
  void drain() { drainRequested_ = true; }

 private:
  LocalHost* const local_;
  const coordinator::LaunchRequest request_;
  const std::vector<RelayedLaunch> relayed_;
  const std::unique_ptr<relay::TreeHosts> tree_;
  std::atomic<bool> drainRequested_{false};
};

}  // namespace hvd::agent::jobs
