// The job coordinator of the leader agent (docs/architecture.md "How a job flows" steps 3 and 6,
// "Failure semantics"): describe every host, resolve slots, place ranks, build each rank's
// environment, launch on every host, forward output, and fail the job fast with one root cause.
//
// Domain logic only: it talks to hosts through NodeAgent and to the client through ClientEvents,
// so the gRPC service (and the embedded hvdrun) adapt it, and unit tests drive it with
// FakeNodeAgent and a ManualClock, without threads.
//
// Lifecycle: start() describes, places and launches, then returns; the job then advances only
// through JobEvents (from the agents), cancel() (from the client) and tick() (from the owner's
// timer). onJobEnd is called exactly once, when every launched rank has reported its exit or
// been lost with its agent, or when the stop deadline passed without that (see tick()).
// Thread-safe: events, cancel() and tick() may come from different threads. No agent or client
// call is made while the internal lock is held, so agents may report events synchronously.
#pragma once

#include <chrono>
#include <csignal>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/coordinator/call_batch.h"
#include "agent/coordinator/node_agent.h"
#include "agent/coordinator/restart_policy.h"
#include "agent/node/worker_env.h"
#include "contract/host_spec.h"
#include "contract/placement.h"

namespace hvd::agent::coordinator {

// Monotonic time for the Ctrl-C window and the stop deadline. Not auth::Clock: that one is wall
// time because signed timestamps cross machines, while intervals must not jump with NTP.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual std::chrono::steady_clock::time_point now() = 0;
};

class SteadyClock : public Clock {
 public:
  std::chrono::steady_clock::time_point now() override { return std::chrono::steady_clock::now(); }
};

// Elastic mode (hvdrun --min-np / --host-discovery-script, Horovod's flags): the job lives
// through rounds (jobs/elastic_job.h, contract/elastic.h) instead of attempts.
struct ElasticSpec {
  bool enabled = false;
  int minNp = 1;
  int maxNp = 0;  // 0: every available slot
  // Run every discoveryInterval; prints "host[:slots]" lines. Empty: JobSpec::hosts, fixed.
  std::string discoveryScript;
  int slotsPerHost = 0;  // a discovered host's slots when its line names none (0: 1)
  std::chrono::milliseconds discoveryInterval{1000};
  // How long a round waits for minNp slots, and workers for their next assignment.
  std::chrono::milliseconds timeout{600000};
  // Rounds after the first before the job fails (Horovod's: 0 allows none); unset: no limit.
  std::optional<int> resetLimit;
  // --blacklist-cooldown-range: a failed host returns after a backoff within [min, max] seconds;
  // unset: it never returns.
  std::optional<std::pair<int, int>> cooldownSeconds;
  // Through agents: where the leader reaches a host that discovery finds and the job's hosts do
  // not list (host:agentPort, the port the job was submitted with).
  int agentPort = 0;
};

// A job as submitted (hvdrun's options after parsing).
struct JobSpec {
  std::string jobId;
  std::vector<std::string> argv;  // PROGRAM ARGS..., never a shell string
  std::vector<std::string> env;   // forwarded "K=V" entries
  std::string cwd;
  int np = 1;
  std::vector<contract::HostSlots> hosts;  // in rank order; hosts[0] hosts rank 0
  bool oversubscribe = false;
  int gpusPerRank = 1;
  node::GpuBind gpuBind = node::GpuBind::kNone;
  int stopSignal = SIGTERM;
  std::chrono::milliseconds grace{10000};
  // MASTER_PORT for torch env:// on the first host, chosen by whoever runs the coordinator
  // (hvdrun embedded, or the leader agent: a port free on its listen address).
  int masterPort = 29500;
  // MASTER_ADDR of the ranks: rank 0's host (hosts[0]) as named when empty; the leader agent
  // sets its own listen address when that is a specific one (always reachable, needs no DNS).
  std::string masterAddr;
  // > 0: the job is stopped gracefully once this long has passed since start(), and ends as
  // kTimedOut (hvdrun --time-limit).
  std::chrono::milliseconds timeLimit{0};

  // Restarts (restart_policy.h): which attempt this coordinator runs, 0 for the first. The ranks
  // see it as HVD_RESTART_COUNT; agents know the attempt by launchId().
  int attempt = 0;
  // Applied by the coordinator's owner (LedJobs, embedded hvdrun) between attempts; the
  // coordinator only tells the ranks maxRestarts.
  RestartPolicy restart;
  // Resources busy: wait in the leader's queue (false: --no-queue, end as kResourcesBusy).
  bool queue = true;
  // Per host (spec.hosts order): the GPUs the previous attempt held there, asked for again.
  std::vector<std::vector<int>> preferredGpus;
  // How long a reservation holds before its launch (the agents' ledger lease).
  std::chrono::milliseconds reserveLease{30000};

  // How the leader reaches the other hosts (jobs/attempts.h): each host's agent "host:port" by
  // the host's name as given, the relay tree's width (0: relay::kDefaultTreeWidth) and the
  // timeout of each call to an agent (0: the leader's default).
  std::map<std::string, std::string> agentAddresses;
  int treeWidth = 0;
  std::chrono::milliseconds connectTimeout{0};
  ElasticSpec elastic;
  // The job's name in listings (the program), and whether it outlives its client (hvdrun submit).
  std::string name;
  bool detach = false;

  // The id agents know this attempt by: the job id for attempt 0, "<job id>.<attempt>" after.
  std::string launchId() const {
    return attempt == 0 ? jobId : jobId + "." + std::to_string(attempt);
  }
};

// What an attempt holds on one host (JobCoordinator::resources()).
struct HostResources {
  std::string host;
  int slots = 0;
  std::vector<int> gpus;
  std::vector<std::string> gpuUuids;

  bool operator==(const HostResources& o) const {
    return host == o.host && slots == o.slots && gpus == o.gpus && gpuUuids == o.gpuUuids;
  }
};

// The job's rendezvous store, owned by the caller, which already registered `token` for the job
// (TcpStoreServer::addJob) and removes it after onJobEnd.
struct StoreEndpoint {
  std::string address;  // "host:port" as workers reach it
  std::string token;
};

enum class JobOutcome {
  kSucceeded,         // every rank exited 0
  kRankFailed,        // a rank exited non-zero or was killed by a signal
  kAgentLost,         // an agent went away while its ranks ran
  kAgentUnreachable,  // describe failed (unreachable, or refused our credentials); nothing started
  kLaunchFailed,      // an agent could not start its ranks; the others were stopped
  kInvalidJob,        // placement or environment refused the request; nothing was started
  kCancelled,         // the client cancelled (Ctrl-C) before any failure
  kTimedOut,          // the time limit passed before any failure or cancel; the job was stopped
  kResourcesBusy,     // the slots or GPUs were held by other jobs and the job was not to wait
                      // (--no-queue); nothing was started
};

enum class RankState { kNotStarted, kRunning, kExited, kLost };

// One rank as the coordinator last saw it (`hvdrun status`).
struct RankSnapshot {
  int rank = 0;
  std::string host;
  int pid = 0;  // 0: unknown or not started
  RankState state = RankState::kNotStarted;
  std::optional<process::ExitStatus> exit;  // kExited

  bool operator==(const RankSnapshot& o) const {
    return rank == o.rank && host == o.host && pid == o.pid && state == o.state && exit == o.exit;
  }
};

// How the job ended. For kRankFailed and kAgentLost the root cause is the first failure seen;
// the exits of ranks killed by the stop that followed never replace it.
struct JobResult {
  std::string jobId;
  JobOutcome outcome = JobOutcome::kSucceeded;
  int exitCode = 0;     // what hvdrun exits with (exit_codes.h, or the rank's shell status)
  std::string summary;  // the one line for the user, "hvdrun: rank 3 on host-b exited with code 3"
  int rank = -1;        // root-cause rank (kRankFailed), else -1
  std::string host;     // root-cause host (rank failure, lost/unreachable agent, failed launch)
  std::optional<process::ExitStatus> status;  // kRankFailed only
  std::string reason;                         // agent or launch error, placement message
  std::vector<std::string> stderrTail;        // root-cause rank's last stderr lines, oldest first
  std::vector<int> unreportedRanks;  // ranks whose exit never arrived (stop deadline passed)
  // From every rank started to the root-cause failure (0 when the ranks never all started):
  // what --restart-min-uptime is compared with.
  std::chrono::milliseconds uptime{0};
};

// What the client (hvdrun's stream, or the embedded renderer) receives. Calls may come from
// several threads (one per agent) and must be thread-safe; they are never made under a lock.
class ClientEvents {
 public:
  virtual ~ClientEvents() = default;
  virtual void onOutput(int rank, const std::string& host, process::Stream stream,
                        std::string_view line) = 0;
  virtual void onJobEnd(const JobResult& result) = 0;
};

class JobCoordinator : public JobEvents {
 public:
  // Lines of stderr kept per rank for the root cause; what a user reads to see why it failed.
  static constexpr size_t kStderrTailLines = 20;
  // Longer stderr lines are cut in the tail (not in the forwarded output): bounds memory per rank.
  static constexpr size_t kTailLineBytes = 4096;
  // A second cancel() within this window escalates to SIGKILL (Ctrl-C twice).
  static constexpr std::chrono::milliseconds kCancelEscalationWindow{2000};
  // After a stop, how long past the grace to wait for exit reports before ending the job anyway:
  // covers the agent's SIGKILL, reaping and reporting over the network.
  static constexpr std::chrono::milliseconds kStopReportSlack{10000};

  // `agents[i]` serves `spec.hosts[i]`; agents, client and clock must outlive the coordinator.
  // `batch` (may be null) groups the calls of each round to every host (describe, reserve,
  // launch, stop, unreserve: call_batch.h), for agents reached through a relay tree.
  JobCoordinator(JobSpec spec, std::vector<NodeAgent*> agents, StoreEndpoint store,
                 ClientEvents* client, Clock* clock, CallBatch* batch = nullptr);

  enum class Start {
    kRunning,  // launched (a rank may already have failed: the job ends through events)
    kEnded,    // ended before anything ran: result() holds why, onJobEnd was called
    kBusy,     // the resources are held by other jobs: nothing was started or is still held,
               // busyReason() says why, and tryStart() may be called again later
  };
  // Describes, places, reserves every host's share and launches. With `queue` false a busy
  // host ends the job as kResourcesBusy instead of returning kBusy. A job cancelled while it
  // waited ends as kCancelled here. `onReserved`, if given, is called once every host's share
  // is reserved, before the launch (the queue's jobs behind may then go ahead).
  Start tryStart(bool queue, const std::function<void()>& onReserved = {});
  // tryStart(false): true if the job is running, false if it already ended. Call once.
  bool start() { return tryStart(false) == Start::kRunning && !finished(); }
  std::string busyReason() const;
  // Ends a job that has not started as kResourcesBusy (--no-queue behind a queue); no effect
  // once tryStart() launched anything.
  void endUnstarted(std::string summary, std::string reason);
  // What each host granted this attempt (empty before the reservations).
  std::vector<HostResources> resources() const;
  // Client's Ctrl-C: graceful stop of every host; a second call within kCancelEscalationWindow
  // sends SIGKILL with no grace. A failure seen earlier stays the root cause. `grace`, when
  // given, replaces the job's own grace for this stop (hvdrun cancel --grace).
  void cancel(std::optional<std::chrono::milliseconds> grace = std::nullopt);
  // Ends the job if a stop was sent and the ranks' exits have not all arrived by grace +
  // kStopReportSlack, and stops it when its time limit has passed; the owner calls it
  // periodically (every few hundred ms is plenty).
  void tick();

  bool finished() const;
  std::optional<JobResult> result() const;
  // The placement used (empty before start() placed the ranks); for logs and tests.
  contract::Placement placement() const;
  // Every rank's host, pid, state and exit (empty before the ranks were placed).
  std::vector<RankSnapshot> ranks() const;
  // Whether every rank was started (launch done without a launch failure).
  bool launched() const;

  // JobEvents, from the agents.
  void onOutput(int rank, process::Stream stream, std::string_view line) override;
  void onExit(int rank, const process::ExitStatus& status) override;
  void onAgentLost(const std::string& host, const std::string& reason) override;

 private:
  struct StopCall {
    size_t host;
    int signal;
    std::chrono::milliseconds grace;
  };
  // Work decided under the lock and carried out after it is released.
  struct Actions {
    std::vector<StopCall> stops;
    std::optional<JobResult> ended;
  };

  // Steps of start(); a returned result means the job ended before anything was launched.
  std::optional<JobResult> place(const std::vector<NodeDescription>& nodes,
                                 contract::Placement* placement);
  // kGranted with every host's GPUs in `gpus`, or why not (nothing is held then).
  ledger::Grant reserveAll(const std::vector<NodeDescription>& nodes,
                           const contract::Placement& placement,
                           std::vector<std::vector<int>>* gpus, std::vector<bool>* accounted,
                           std::optional<JobResult>* failed);
  void unreserveAll(const std::vector<bool>& held);
  JobResult unreachableResult(const AgentError& error) const;
  std::optional<JobResult> build(contract::Placement placement,
                                 const std::vector<std::vector<int>>& gpus,
                                 const std::vector<bool>& accounted,
                                 std::vector<LaunchRequest>* requests);
  void launchAll(const std::vector<LaunchRequest>& requests);
  void endNow(JobResult result);
  void perform(Actions actions);

  // Under mutex_.
  void failLocked(JobResult cause, Actions* actions);
  // level 1: graceful (stopSignal, grace); level 2: SIGKILL, no grace. Each host gets each level
  // at most once, so repeated failures do not flood the agents with stops.
  void stopAllLocked(int level, Actions* actions,
                     std::optional<std::chrono::milliseconds> grace = std::nullopt);
  std::vector<StopCall> stopLaunchedLocked(size_t host);
  void maybeEndLocked(Actions* actions);
  JobResult endResultLocked() const;
  JobResult baseResult(JobOutcome outcome, int exitCode, std::string summary) const;

  const JobSpec spec_;
  const std::vector<NodeAgent*> agents_;
  const StoreEndpoint store_;
  ClientEvents* const client_;
  Clock* const clock_;
  CallBatch* const batch_;

  mutable std::mutex mutex_;
  contract::Placement placement_;
  std::vector<RankState> ranks_;
  std::vector<int> pids_;                                  // per rank, 0 unknown
  std::vector<std::optional<process::ExitStatus>> exits_;  // per rank
  std::vector<std::deque<std::string>> stderrTail_;        // per rank, at most kStderrTailLines
  std::vector<bool> stopped_;   // per rank: said stopped (process::stoppedNotice), not continued
  std::vector<bool> launched_;  // per host: launch() returned ok
  std::vector<bool> lost_;      // per host
  std::vector<int> stopLevel_;  // per host: highest stop level sent
  std::vector<std::string> agentHosts_;  // agents_[i]->host(), read once
  int jobStopLevel_ = 0;                 // highest level requested for the job
  bool launchDone_ = false;
  std::optional<JobResult> failure_;  // the root cause, first failure only
  bool cancelled_ = false;
  bool timedOut_ = false;
  std::chrono::steady_clock::time_point startedAt_;
  std::chrono::milliseconds stopGrace_{0};  // grace of the graceful stop sent
  std::optional<std::chrono::steady_clock::time_point> lastCancel_;
  std::optional<std::chrono::steady_clock::time_point> stopDeadline_;
  std::optional<std::chrono::steady_clock::time_point> runningSince_;  // every rank started
  std::optional<JobResult> result_;
  std::string busyReason_;
  std::vector<HostResources> resources_;
  std::vector<bool> reserved_;  // per host: holds a reservation not yet launched
};

// "hvdrun: rank 3 on host-b exited with code 3" / "... was killed by signal 9 (Killed)".
std::string describeRankFailure(int rank, const std::string& host,
                                const process::ExitStatus& status);

}  // namespace hvd::agent::coordinator
