// This machine as a host of jobs: the one path by which ranks run here, for hvdrun's embedded
// default (docs/architecture.md "How a job flows", step 1: no daemon, no gRPC, no key file) and
// for hvdagent, which runs its node's share of every job through one LocalHost, whoever asked: a
// leader's Launch (a share of a job coordinated elsewhere) or its own SubmitJob (the leader's
// local share).
//
// Ranks are started through a process::Spawner, one ProcessGroup per job; their output lines and
// exits reach the job's JobEvents with the local index mapped back to the global rank. With a
// ledger, reserve() holds slots and GPUs in it, a reserved launch binds its reservation and
// release() returns it; without one nothing is accounted (reserve() says so and the coordinator
// uses the GPUs described). What hvdagent adds, each an option:
//   * base environment: each rank's environment is the agent's base environment overlaid by the
//     job's entries (environment.h); the job wins;
//   * records: a job record is written once the group runs and removed when the job is released
//     (agent/records/job_records.h), so a restarted agent can kill what a crashed one left
//     behind; the ranks carry a random tag for it;
// and a job's View of the host, under the name its user gave and described by the agent's own
// Describe rather than the embedded default (this machine's name, CPUs and GPUs, loopback only).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/coordinator/node_agent.h"
#include "agent/ledger/resource_ledger.h"
#include "agent/node/gpu_discovery.h"
#include "agent/process/spawner.h"
#include "agent/records/job_records.h"

namespace hvd::agent::jobs {

struct LocalHostOptions {
  std::string host = "localhost";       // the name used in messages (the user's, or the hostname)
  process::Spawner* spawner = nullptr;  // required
  node::GpuDiscovery* gpus = nullptr;   // null: no GPUs described
  ledger::ResourceLedger* ledger = nullptr;
  records::JobRecords* records = nullptr;
  // Set: every rank's environment is this overlaid by the job's entries. Unset: the job's
  // entries are the whole environment (embedded hvdrun forwards the caller's own).
  std::optional<std::vector<std::string>> baseEnv;
};

class LocalHost : public coordinator::NodeAgent {
 public:
  using Describer = std::function<coordinator::NodeDescription()>;

  // Spawner, GPU discovery, ledger and records must outlive the host.
  explicit LocalHost(LocalHostOptions options);
  // The embedded form: `host` is the name the user gave (or "localhost").
  LocalHost(std::string host, process::Spawner* spawner, node::GpuDiscovery* gpus,
            ledger::ResourceLedger* ledger = nullptr);
  // Same as shutdown().
  ~LocalHost() override;
  LocalHost(const LocalHost&) = delete;
  LocalHost& operator=(const LocalHost&) = delete;

  // NodeAgent: never throws (a malformed environment entry is the launch's error).
  std::string host() const override { return options_.host; }
  std::string address() const override { return "in-process"; }
  coordinator::DescribeResult describe() override;
  coordinator::ReserveResult reserve(const ledger::Request& request) override;
  void unreserve(const std::string& key) override;
  coordinator::LaunchStatus launch(const coordinator::LaunchRequest& request,
                                   coordinator::JobEvents* events) override;
  void stop(const std::string& jobId, int signal, std::chrono::milliseconds grace) override;

  // launch() for a caller that reports bad input itself (the Launch RPC): throws
  // hvd::InvalidArgumentError for a malformed environment entry, and nothing is started then;
  // spawn failures are the returned error.
  coordinator::LaunchStatus start(coordinator::LaunchRequest request,
                                  coordinator::JobEvents* events);

  // The process group id of a launched job (ProcessGroup::pgid(), the pid of its first rank),
  // or nullopt when the job is unknown or still being spawned. The group leader stays a zombie
  // until release(), so the id cannot be reused by another process before then.
  std::optional<pid_t> processGroupId(const std::string& jobId);
  // Forgets a job: its group is destroyed (whatever still runs is SIGKILLed, every rank is
  // reaped), what it holds in the ledger is returned, its record is removed, and no event of
  // that job is delivered after it returns. Call it once the job is over, or its zombies and
  // bookkeeping stay until shutdown(). Unknown ids are ignored; must not be called from one of
  // the job's own callbacks.
  void release(const std::string& jobId);
  // Every running job but those in `except` gets its own stop signal with at most `maxGrace`
  // (agent shutdown).
  void stopAll(std::chrono::milliseconds maxGrace, const std::set<std::string>& except = {});
  std::vector<std::string> runningJobs() const;
  // The ranks on this node that have not exited, by the id of their job (the leader's id, not
  // the launch's: an attempt or an elastic round is one more launch of the same job, and they
  // add up). Jobs still being spawned, or whose ranks have all exited, are not listed. For the
  // agent's metrics.
  std::map<std::string, int> runningRanksByJob() const;
  // Destroys every job's group: whatever still runs is SIGKILLed and reaped, and no event is
  // delivered after it returns. Call it before the JobEvents given to launch() go away.
  void shutdown();

  // A job's view of this host under the name its user gave it (-H node-a: "node-a", where this
  // host's own name is the machine's), described by `describe` when set. Everything it launched
  // is released in finish() or its destructor. Never throws (NodeAgent contract).
  class View : public coordinator::NodeAgent {
   public:
    View(LocalHost* host, std::string name, Describer describe = nullptr);
    ~View() override;
    View(const View&) = delete;
    View& operator=(const View&) = delete;

    // Releases every job launched through this view (no event after it returns).
    void finish();

    std::string host() const override { return name_; }
    std::string address() const override { return "this agent"; }
    coordinator::DescribeResult describe() override;
    coordinator::ReserveResult reserve(const ledger::Request& request) override;
    void unreserve(const std::string& key) override;
    coordinator::LaunchStatus launch(const coordinator::LaunchRequest& request,
                                     coordinator::JobEvents* events) override;
    void stop(const std::string& jobId, int signal, std::chrono::milliseconds grace) override;

   private:
    LocalHost* const host_;
    const std::string name_;
    const Describer describe_;
    std::mutex mutex_;
    std::vector<std::string> launched_;
  };

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
    // The job's own stop signal and grace, for stopAll().
    int stopSignal = 0;
    std::chrono::milliseconds grace{0};
    bool recorded = false;
    std::string job;  // the job's id (the launch's own when the request has no environment)
  };

  coordinator::LaunchStatus spawn(const coordinator::LaunchRequest& request,
                                  coordinator::JobEvents* events);

  const LocalHostOptions options_;

  mutable std::mutex mutex_;
  std::map<std::string, Job> jobs_;
};

}  // namespace hvd::agent::jobs
