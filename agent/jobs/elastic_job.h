// One elastic job from its first round to its end (DESIGN.md "Elastic training",
// contract/elastic.h for what the leader and the workers say to each other through the store).
//
// The leader owns the round number and is the one authority on membership:
//   * discovery (a script, or the fixed -H hosts) runs on a thread of its own every
//     discoveryInterval; the first failure ends the job, later ones are logged;
//   * a worker that fails blacklists its host (elastic/blacklist.h); a host that leaves discovery
//     is dropped without blame; hosts that appear, or grow, are taken up to maxNp;
//   * any such change is announced in the current round's namespace (the workers see it at their
//     next commit()), and the next round is formed once every worker of this one is ready (it
//     shut down and asked for its place) or gone: survivors keep their processes and their order,
//     new slots get new workers (elastic/rounds.h), the workers of a host that left are told so;
//   * the job succeeds when every worker of the current round has exited 0 while no change was
//     pending; it fails, with Horovod's words, when every worker failed, when no host of a round
//     survives into the next, past the reset limit, or when minNp slots do not come within the
//     elastic timeout.
//
// Each round has a store namespace and token of its own; the namespaces of the last two rounds
// are kept (a removed worker reads its notice in the one before the current). Hosts are reached
// through NodeAgents from `connect` (this machine under each of its names for embedded hvdrun),
// one launch per host and round ("<job>.e<round>.<host index>").
//
// Driven like a JobCoordinator: tick() from the owner's loop, cancel() from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/coordinator/job_coordinator.h"
#include "agent/elastic/blacklist.h"
#include "agent/elastic/discovery.h"
#include "agent/elastic/resets.h"
#include "agent/elastic/rounds.h"
#include "contract/elastic.h"

namespace hvd::store {
class TcpStoreServer;
}

namespace hvd::agent::jobs {

// Where an elastic job runs.
struct ElasticSite {
  // The agent of a host, by its name in discovery; called once per host, on the tick thread.
  std::function<std::unique_ptr<coordinator::NodeAgent>(const std::string& host)> connect;
  store::TcpStoreServer* store = nullptr;
  std::string storeHost;  // where the workers dial the store
  // Called (on any thread) when a host reports an event, so that the owner ticks at once: a
  // failure ends the round as soon as the leader sees it. May be empty.
  std::function<void()> wake;
};

// One round as `hvdrun status` and the job record list it.
struct RoundRecord {
  int number = 0;
  std::vector<std::string> hosts;  // "host:workers", in rank order
  int size = 0;
  std::chrono::system_clock::time_point start;
  std::optional<std::chrono::system_clock::time_point> end;
  std::string cause;  // why it began ("start", "worker 3 on b exited with code 1", ...)
};

class ElasticJob {
 public:
  // `client` and `clock` must outlive the job; spec.elastic.enabled.
  ElasticJob(coordinator::JobSpec spec, ElasticSite site,
             std::unique_ptr<elastic::HostDiscovery> discovery, coordinator::ClientEvents* client,
             coordinator::Clock* clock);
  // Stops discovery, and releases every host (what still runs is killed).
  ~ElasticJob();
  ElasticJob(const ElasticJob&) = delete;
  ElasticJob& operator=(const ElasticJob&) = delete;

  // Advances the job: exits, discovery, readiness, round changes, the end. Call it at least a
  // few times a second until finished().
  void tick();
  bool finished() const;
  // The result once finished() (client->onJobEnd got it too).
  std::optional<coordinator::JobResult> result() const;
  // Graceful stop of every worker; a second call within 2 s kills them. Thread-safe.
  void cancel(std::optional<std::chrono::milliseconds> grace = std::nullopt);
  std::vector<RoundRecord> rounds() const;
  // `host` is leaving gracefully (its agent was told to stop, as on preemption or maintenance):
  // like a host dropped by discovery, its workers leave at their next commit, without rollback
  // and without blame. It stays out of the job until the job ends. Thread-safe.
  void drain(const std::string& host);

 private:
  struct Worker {
    int id = 0;
    std::string host;
    std::string launchId;
    int round = 0;         // the last round it was placed in
    bool running = true;   // its exit has not been reported
    bool removed = false;  // told it was removed: its exit concerns nobody
    std::optional<process::ExitStatus> exit;
  };
  struct Event {
    enum class Kind { kExit, kAgentLost, kDrain } kind;
    int worker = 0;
    process::ExitStatus status;
    std::string host;
    std::string reason;
  };
  class LaunchEvents;

  void queue(Event event);
  void drainEvents();
  void onExit(int worker, const process::ExitStatus& status);
  void onAgentLost(const std::string& host, const std::string& reason);
  void onDrain(const std::string& host);
  void pollDiscovery();
  // Announces the next round in the current one's namespace (once per round).
  void announce(contract::HostChange change, const std::string& cause);
  std::vector<elastic::DiscoveredHost> usableHosts() const;
  void tryFirstRound();
  void tryNextRound();
  void checkResets();
  void checkSuccess();
  // A host's share of a round's new workers in its ledger: the GPUs granted (none when the
  // agent keeps no ledger: then nothing is bound).
  struct HostGrant {
    bool accounted = false;
    std::vector<int> gpus;
  };
  using Grants = std::map<std::string, HostGrant>;
  // The next round's plan with every new worker's slots and GPUs reserved on its host, as a
  // job start reserves them; a host that is busy (or unreachable) gets no new workers this
  // round, and the plan is made again without them.
  elastic::Round planReserved(const elastic::Round* previous, const std::set<int>& alive,
                              std::vector<elastic::DiscoveredHost> usable, Grants* grants);
  void releaseGrants(const elastic::Round& plan, const Grants& grants);
  // Whether `host`'s ledger would hold `workers` more workers of this job now (asked and given
  // back at once).
  bool canReserve(const std::string& host, int workers);
  std::string launchIdFor(int round, const std::string& host);
  void startRound(elastic::Round plan, std::string cause, const Grants& grants);
  void spawn(const elastic::Round& plan, const Grants& grants);
  coordinator::NodeAgent* agentFor(const std::string& host);
  int hostIndex(const std::string& host);
  void fail(const std::string& message, std::optional<int> worker = std::nullopt);
  void succeed();
  // Records how the job ends and stops every worker within `grace`; the end is reported once
  // they are gone or the grace (plus slack) ran out.
  void endWith(coordinator::JobResult result, std::chrono::milliseconds grace);
  void stopAll(int signal, std::chrono::milliseconds grace);
  void finishIfStopped();
  bool anyRunning() const;

  coordinator::JobSpec spec_;
  const ElasticSite site_;
  coordinator::ClientEvents* const client_;
  coordinator::Clock* const clock_;
  elastic::Blacklist blacklist_;
  elastic::ResetCounter resets_;
  const std::chrono::steady_clock::time_point created_;

  // Discovery's thread and its latest answer.
  std::unique_ptr<elastic::HostDiscovery> discovery_;
  std::thread discoveryThread_;
  std::mutex discoveryMutex_;
  std::condition_variable discoveryWake_;
  bool discoveryStop_ = false;
  int discoveryRuns_ = 0;  // answers so far, failures included
  std::optional<std::vector<elastic::DiscoveredHost>> discovered_;  // the last good answer
  std::string discoveryError_;                                      // the last failure
  int discoverySeen_ = 0;  // discoveryRuns_ as tick() last read it
  std::optional<std::vector<elastic::DiscoveredHost>> hosts_;  // tick()'s copy of discovered_

  // Events from the hosts' threads.
  std::mutex eventsMutex_;
  std::vector<Event> events_;

  // Tick-thread state.
  std::map<std::string, std::unique_ptr<coordinator::NodeAgent>> agents_;
  std::vector<std::string> hostOrder_;  // every host ever used, for launch ids
  std::vector<std::unique_ptr<LaunchEvents>> launchEvents_;
  std::map<int, Worker> workers_;
  int nextWorker_ = 0;
  std::optional<elastic::Round> round_;
  std::map<int, std::string> tokens_;  // by round: the last two
  bool changePending_ = false;
  std::string changeCause_;
  std::chrono::steady_clock::time_point changeSince_{};
  bool announced_ = false;
  std::set<int> ready_;            // workers of round_ that asked for their next place
  std::string readyCountSeen_;     // round_'s ready count when its ready keys were last read
  std::set<std::string> drained_;  // hosts leaving gracefully: never used again
  std::optional<std::string> lastFailure_;
  std::optional<int> lastFailedWorker_;
  std::vector<RoundRecord> history_;

  // The end: once decided, the workers are stopped and the result waits for their exits.
  mutable std::mutex mutex_;
  std::optional<coordinator::JobResult> ending_;
  std::optional<std::chrono::steady_clock::time_point> stopDeadline_;
  std::optional<coordinator::JobResult> result_;
  bool cancelRequested_ = false;
  std::optional<std::chrono::milliseconds> cancelGrace_;
  std::optional<std::chrono::steady_clock::time_point> lastCancel_;
  bool cancelHandled_ = false;
  bool killRequested_ = false;
};

}  // namespace hvd::agent::jobs
