// The attempts of one job, from its first start to its end: the one path by which a job runs,
// whether embedded hvdrun runs it in-process or a leader agent runs it for a client (LedJobs).
//
// Each attempt gets
//   * its own store namespace and token: a rank of an earlier attempt that is still around is
//     refused, and no key it wrote (an NCCL id) survives into the next;
//   * its hosts: this host through a LocalHost::View under the name the user gave it, the others
//     through their agents, reached over a relay tree beyond the job's tree width;
//   * a JobCoordinator over them, paced until it ends;
// and between attempts the restart policy decides (restart_policy.h). A restart keeps the
// placement where it can: the same hosts less one whose agent was lost, each host's GPUs asked
// for again. A restart that cannot start leaves the failure that asked for it as the root cause.
// The job's MASTER_PORT is picked once, before the first attempt.
//
// What differs between the callers (where output goes, how a start waits, how time passes, what
// is recorded) is an AttemptSteps; the runner calls it on its own thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "agent/coordinator/job_coordinator.h"
#include "agent/jobs/local_host.h"
#include "agent/relay/detached_trees.h"
#include "agent/relay/subtree_link.h"
#include "agent/relay/tree_hosts.h"

namespace hvd::store {
class TcpStoreServer;
}

namespace hvd::agent::jobs {

// Another host of a job, as the leader reaches it.
struct RemoteHost {
  std::string host;     // as the user named it
  std::string address;  // "host:port" of its hvdagent
  std::chrono::milliseconds callTimeout{5000};
};

// Builds the link to another host's agent, for that host and the hosts it relays to
// (hvdagent: client::RemoteNodeAgent with this agent's TLS options and key). Its destructor must
// cancel its streams and deliver no event afterwards.
using RemoteAgentFactory =
    std::function<std::unique_ptr<relay::SubtreeLink>(const RemoteHost& host)>;

// Where a job's attempts run; shared by every job of the caller and outliving them.
struct AttemptSite {
  LocalHost* local = nullptr;          // this host, which runs spec.hosts[0]'s ranks
  LocalHost::Describer describeLocal;  // null: the LocalHost's own description
  RemoteAgentFactory remoteAgents;     // empty: single-host jobs only
  store::TcpStoreServer* store = nullptr;
  // The host the ranks dial for the store: empty for spec.hosts[0] as the user named it.
  std::string storeHost;
  // Where MASTER_PORT is picked (a port free on this address when the job starts).
  std::string portHost = "127.0.0.1";
  // Per call to another agent when the job gives none (JobSpec::connectTimeout).
  std::chrono::milliseconds defaultConnectTimeout{5000};
  // Finished attempts' remote hosts, until their last calls are answered; null: waited for in
  // place.
  relay::DetachedTrees* detached = nullptr;
};

// What the owner of a job does at each step; called on the thread running JobAttempts::run().
class AttemptSteps {
 public:
  virtual ~AttemptSteps() = default;
  // Where attempt `attempt`'s output and end go; must live until the next call or run() ends.
  virtual coordinator::ClientEvents* events(int attempt) = 0;
  // Starts the attempt's ranks (JobCoordinator::tryStart): at once, or at the job's turn in a
  // queue. kEnded with the coordinator not finished puts the job aside unstarted (run() then
  // returns nullopt).
  virtual coordinator::JobCoordinator::Start start(coordinator::JobCoordinator& coordinator,
                                                   int attempt) = 0;
  // Every rank of the attempt started (some may have ended already).
  virtual void started(const coordinator::JobCoordinator& /*coordinator*/, int /*attempt*/) {}
  // Waits for the attempt's next event, at most a fraction of a second; the runner ticks the
  // coordinator after each wait.
  virtual void wait(coordinator::JobCoordinator& coordinator) = 0;
  // After each tick.
  virtual void progressed(const coordinator::JobCoordinator& /*coordinator*/) {}
  // The attempt ended and its hosts were let go.
  virtual void ended(const coordinator::JobCoordinator& /*coordinator*/, int /*attempt*/,
                     const coordinator::JobResult& /*result*/) {}
  // True: no restart, whatever the policy says (the agent is shutting down).
  virtual bool stopping() { return false; }
  // Attempt `attempt` starts next, after `after` ended the previous one.
  virtual void restarting(int /*attempt*/, const coordinator::JobResult& /*after*/) {}
};

// Throws hvd::InvalidArgumentError, naming why, for a job `site` cannot run: other hosts when it
// reaches no agents, a first host with a loopback name the others could not reach, another host
// with no agent address, a negative tree width.
void checkRunnable(const coordinator::JobSpec& spec, const AttemptSite& site);

class JobAttempts {
 public:
  // `site` and `steps` must outlive this; checkRunnable(spec, site) passed.
  JobAttempts(coordinator::JobSpec spec, AttemptSite site, AttemptSteps* steps);
  // Lets go of whatever an attempt still holds (see abandon()).
  ~JobAttempts();
  JobAttempts(const JobAttempts&) = delete;
  JobAttempts& operator=(const JobAttempts&) = delete;

  // Runs attempts until one ends the job; its result, with why it was not restarted where the
  // policy could have. nullopt: steps.start() put the job aside before it started.
  std::optional<coordinator::JobResult> run();

  // Graceful stop (JobCoordinator::cancel) of the attempt running now, and of any attempt that
  // is being set up or would come next. Thread-safe.
  void cancel(std::optional<std::chrono::milliseconds> grace = std::nullopt);
  bool cancelled() const;

  // After an exception escaped run(): the local ranks released (leftovers killed and reaped),
  // the remote hosts' streams closed, the store namespace removed. Each step guarded on its own.
  void abandon();

  const coordinator::JobSpec& spec() const { return spec_; }

 private:
  // One attempt from its start to its end; nullopt when it was put aside unstarted.
  std::optional<coordinator::JobResult> runAttempt(int attempt);
  // The attempt's hosts and coordinator, ready to start.
  void setUp(int attempt);
  // The attempt's hosts let go (remote streams closed, the local group released and reaped) and
  // its store namespace removed.
  void tearDown();
  // The next attempt's hosts: the same less one whose agent was lost, each with its GPUs.
  void keepPlacement(const coordinator::JobResult& ended);

  coordinator::JobSpec spec_;  // the attempt running now, or the next one
  const AttemptSite site_;
  AttemptSteps* const steps_;
  coordinator::SteadyClock clock_;

  mutable std::mutex mutex_;
  // The attempt in progress; replaced between attempts under mutex_.
  std::unique_ptr<LocalHost::View> local_;
  std::unique_ptr<relay::TreeHosts> remotes_;
  std::unique_ptr<coordinator::JobCoordinator> coordinator_;
  bool cancelRequested_ = false;
  std::optional<std::chrono::milliseconds> cancelGrace_;
};

}  // namespace hvd::agent::jobs
