// The in-process NodeAgent of hvdrun's embedded default (DESIGN.md "How a job flows", step 1:
// every host is local and no agent address was given): the ranks run on this machine, started
// through a process::Spawner, with no daemon, no gRPC and no key file. The gRPC agent will wrap
// the same Spawner and GpuDiscovery, so both paths share process supervision and node facts.
//
// One ProcessGroup per job. Output lines and exits of the group are forwarded to the job's
// JobEvents with the local index mapped back to the global rank.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "agent/coordinator/node_agent.h"
#include "agent/node/gpu_discovery.h"
#include "agent/process/spawner.h"

namespace hvd::agent::coordinator {

class LocalNodeAgent : public NodeAgent {
 public:
  // `host` is the name the user gave (or "localhost"); spawner, gpus and ledger must outlive the
  // agent. With a ledger, reserve() holds slots and GPUs in it, a reserved launch binds its
  // reservation and release() returns it; without one nothing is accounted (reserve() says so
  // and the coordinator uses the GPUs described).
  LocalNodeAgent(std::string host, process::Spawner* spawner, node::GpuDiscovery* gpus,
                 ledger::ResourceLedger* ledger = nullptr);
  // Same as shutdown().
  ~LocalNodeAgent() override;
  LocalNodeAgent(const LocalNodeAgent&) = delete;
  LocalNodeAgent& operator=(const LocalNodeAgent&) = delete;

  // Destroys every job's group: whatever still runs is SIGKILLed and reaped, and no event is
  // delivered after it returns. Call it before the JobEvents given to launch() go away.
  void shutdown();

  // For a long-running agent (hvdagent), which serves many jobs through one LocalNodeAgent:
  //
  // The process group id of a launched job (ProcessGroup::pgid(), the pid of its first rank),
  // or nullopt when the job is unknown or still being spawned. The group leader stays a zombie
  // until release(), so the id cannot be reused by another process before then; hvdagent
  // records it to clean up after a crash (agent/service/job_records.h).
  std::optional<pid_t> processGroupId(const std::string& jobId);
  // Forgets a job: its group is destroyed (whatever still runs is SIGKILLed, every rank is
  // reaped), what it holds in the ledger is returned, and no event of that job is delivered
  // after it returns. Call it once the job is
  // over, or its zombies and bookkeeping stay until shutdown(). Unknown ids are ignored; must
  // not be called from one of the job's own callbacks.
  void release(const std::string& jobId);

  std::string host() const override { return host_; }
  std::string address() const override { return "in-process"; }
  DescribeResult describe() override;
  ReserveResult reserve(const ledger::Request& request) override;
  void unreserve(const std::string& key) override;
  LaunchStatus launch(const LaunchRequest& request, JobEvents* events) override;
  void stop(const std::string& jobId, int signal, std::chrono::milliseconds grace) override;

 private:
  class Forwarder;
  struct PendingStop {
    int signal;
    std::chrono::milliseconds grace;
  };
  struct Job {
    std::unique_ptr<Forwarder> forwarder;  // declared first: outlives the group that calls it
    std::unique_ptr<process::ProcessGroup> group;
    // A stop that arrived while the group was being spawned (a rank can fail, and the coordinator
    // stop the job, before spawn() has returned); applied as soon as the group exists.
    std::optional<PendingStop> pendingStop;
  };

  const std::string host_;
  process::Spawner* const spawner_;
  node::GpuDiscovery* const gpus_;
  ledger::ResourceLedger* const ledger_;

  std::mutex mutex_;
  std::map<std::string, Job> jobs_;
};

}  // namespace hvd::agent::coordinator
