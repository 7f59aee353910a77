// The jobs hvdagent runs on its own node, whoever asked: a leader's Launch (a share of a job
// coordinated elsewhere) or this agent's own SubmitJob (the leader's local share). Both go
// through one process-wide LocalNodeAgent (job ids are unique per agent) and get the same
// treatment here:
//   * each rank's environment is the agent's base environment overlaid by the job's entries
//     (environment.h);
//   * a job record is written once the group runs and removed when the job is released
//     (job_records.h), so a restarted agent can kill what a crashed one left behind;
//   * on agent shutdown every running job gets its stop signal with a bounded grace.
//
// LocalHostAgent adapts LocalJobs to the coordinator's NodeAgent interface for SubmitJob.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "agent/coordinator/local_node_agent.h"
#include "agent/coordinator/node_agent.h"
#include "agent/service/job_records.h"

namespace hvd::agent::service {

class LocalJobs {
 public:
  // `agent` must outlive this; `records` may be null (no records kept).
  LocalJobs(coordinator::LocalNodeAgent* agent, JobRecords* records,
            std::vector<std::string> baseEnv);

  // Starts `request` with merged environments. Throws hvd::InvalidArgumentError for a malformed
  // environment entry (nothing is started then); spawn failures are the returned error.
  coordinator::LaunchStatus launch(coordinator::LaunchRequest request,
                                   coordinator::JobEvents* events);
  // This node's ledger (LocalNodeAgent::reserve / unreserve): a leader's Reserve, local or not.
  coordinator::ReserveResult reserve(const ledger::Request& request);
  void unreserve(const std::string& key);
  // Graceful stop of a running job (LocalNodeAgent::stop); unknown ids are ignored.
  void stop(const std::string& jobId, int signal, std::chrono::milliseconds grace);
  // The job is over: destroys its group (SIGKILL to leftovers, reap) and removes its record. No
  // event of the job is delivered after it returns. Unknown ids are ignored.
  void release(const std::string& jobId);

  // Every running job gets its own stop signal with at most `maxGrace` (agent shutdown).
  void stopAll(std::chrono::milliseconds maxGrace);
  std::vector<std::string> runningJobs() const;

 private:
  struct Running {
    int stopSignal;
    std::chrono::milliseconds grace;
  };

  coordinator::LocalNodeAgent* const agent_;
  JobRecords* const records_;
  const std::vector<std::string> baseEnv_;

  mutable std::mutex mutex_;
  std::map<std::string, Running> running_;
};

// The leader's own host in a SubmitJob: describes this node and runs its ranks through LocalJobs.
// Never throws (NodeAgent contract). Releases what it launched in finish() or its destructor.
class LocalHostAgent : public coordinator::NodeAgent {
 public:
  using Describer = std::function<coordinator::NodeDescription()>;

  LocalHostAgent(std::string host, LocalJobs* jobs, Describer describe);
  ~LocalHostAgent() override;

  // Releases every job launched through this agent (no event after it returns).
  void finish();

  std::string host() const override { return host_; }
  std::string address() const override { return "this agent"; }
  coordinator::DescribeResult describe() override;
  coordinator::ReserveResult reserve(const ledger::Request& request) override;
  void unreserve(const std::string& key) override;
  coordinator::LaunchStatus launch(const coordinator::LaunchRequest& request,
                                   coordinator::JobEvents* events) override;
  void stop(const std::string& jobId, int signal, std::chrono::milliseconds grace) override;

 private:
  const std::string host_;
  LocalJobs* const jobs_;
  const Describer describe_;
  std::mutex mutex_;
  std::vector<std::string> launched_;
};

}  // namespace hvd::agent::service
