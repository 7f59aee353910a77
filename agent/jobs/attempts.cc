#include "agent/jobs/attempts.h"

#include <utility>
#include <vector>

#include "agent/common/net.h"
#include "agent/common/thread_guard.h"
#include "agent/coordinator/restart_policy.h"
#include "agent/relay/tree_shape.h"
#include "contract/random.h"
#include "hvd/error.hpp"
#include "hvd_support/tcp_store_server.h"

namespace hvd::agent::jobs {

namespace coord = coordinator;

void checkRunnable(const coord::JobSpec& spec, const AttemptSite& site) {
  if (spec.hosts.size() <= 1) return;
  if (common::isLoopbackName(spec.hosts[0].host)) {
    throw InvalidArgumentError(
        "the first host '" + spec.hosts[0].host +
        "' is a loopback name, which the other hosts cannot reach; name it by an address or "
        "hostname they can resolve");
  }
  if (!site.remoteAgents) {
    throw InvalidArgumentError("this agent cannot reach other agents (no remote agent support)");
  }
  if (spec.treeWidth < 0) {
    throw InvalidArgumentError("the tree width must be at least 1 (0: the default, " +
                               std::to_string(relay::kDefaultTreeWidth) + ")");
  }
  for (size_t h = 1; h < spec.hosts.size(); ++h) {
    const auto it = spec.agentAddresses.find(spec.hosts[h].host);
    if (it == spec.agentAddresses.end() || it->second.empty()) {
      throw InvalidArgumentError("host '" + spec.hosts[h].host + "' has no agent address");
    }
  }
}

JobAttempts::JobAttempts(coord::JobSpec spec, AttemptSite site, AttemptSteps* steps)
    : spec_(std::move(spec)), site_(std::move(site)), steps_(steps) {}

JobAttempts::~JobAttempts() { abandon(); }

std::optional<coord::JobResult> JobAttempts::run() {
  // MASTER_PORT for torch env://: free on the site's address now (released before the ranks
  // start, so it could be taken first).
  if (const int port = common::pickFreePort(site_.portHost); port > 0) spec_.masterPort = port;
  coord::JobResult result;
  std::optional<coord::JobResult> previous;  // the failure that caused this attempt
  for (int attempt = 0;; ++attempt) {
    spec_.attempt = attempt;
    std::optional<coord::JobResult> ended = runAttempt(attempt);
    if (!ended) return std::nullopt;
    if (previous && ended->uptime.count() == 0 &&
        (ended->outcome == coord::JobOutcome::kInvalidJob ||
         ended->outcome == coord::JobOutcome::kAgentUnreachable ||
         ended->outcome == coord::JobOutcome::kLaunchFailed)) {
      // The restart could not start (the lost host's share fits nowhere else, an agent is
      // gone): the failure that asked for it stays the root cause.
      result = *previous;
      result.summary +=
          " (restart " + std::to_string(attempt) + " could not start: " + ended->reason + ")";
      return result;
    }
    result = *ended;
    const bool stopping = cancelled() || steps_->stopping();
    const coord::RestartDecision decision = coord::decideRestart(spec_.restart, *ended, attempt);
    if (!decision.restart || stopping) {
      if (!decision.why.empty()) result.summary += " (" + decision.why + ")";
      return result;
    }
    keepPlacement(*ended);
    steps_->restarting(attempt + 1, *ended);
    previous = std::move(ended);
  }
}

void JobAttempts::keepPlacement(const coord::JobResult& ended) {
  std::vector<std::vector<int>> preferred;
  const std::vector<coord::HostResources> held = coordinator_->resources();
  std::vector<contract::HostSlots> hosts;
  for (size_t h = 0; h < spec_.hosts.size(); ++h) {
    if (h > 0 && ended.outcome == coord::JobOutcome::kAgentLost &&
        spec_.hosts[h].host == ended.host) {
      continue;
    }
    hosts.push_back(spec_.hosts[h]);
    std::vector<int> gpus;
    for (const coord::HostResources& r : held) {
      if (r.host == spec_.hosts[h].host) gpus = r.gpus;
    }
    preferred.push_back(std::move(gpus));
  }
  spec_.hosts = std::move(hosts);
  spec_.preferredGpus = std::move(preferred);
}

void JobAttempts::setUp(int attempt) {
  const std::string token = contract::randomHex(32);
  site_.store->removeJob(spec_.jobId);
  site_.store->addJob(spec_.jobId, token);
  auto local =
      std::make_unique<LocalHost::View>(site_.local, spec_.hosts[0].host, site_.describeLocal);
  std::vector<coord::NodeAgent*> agents = {local.get()};
  std::unique_ptr<relay::TreeHosts> remotes;
  if (spec_.hosts.size() > 1) {
    const std::chrono::milliseconds timeout =
        spec_.connectTimeout.count() > 0 ? spec_.connectTimeout : site_.defaultConnectTimeout;
    std::vector<relay::Target> others;
    for (size_t h = 1; h < spec_.hosts.size(); ++h) {
      const auto it = spec_.agentAddresses.find(spec_.hosts[h].host);
      others.push_back(
          {spec_.hosts[h].host, it == spec_.agentAddresses.end() ? std::string() : it->second});
    }
    const int width = spec_.treeWidth > 0 ? spec_.treeWidth : relay::kDefaultTreeWidth;
    remotes = std::make_unique<relay::TreeHosts>(
        std::move(others), width, [factory = site_.remoteAgents, timeout](const relay::Target& t) {
          return factory(RemoteHost{t.host, t.address, timeout});
        });
    for (coord::NodeAgent* agent : remotes->agents()) agents.push_back(agent);
  }
  const std::string& storeHost = site_.storeHost.empty() ? spec_.hosts[0].host : site_.storeHost;
  auto coordinator = std::make_unique<coord::JobCoordinator>(
      spec_, agents,
      coord::StoreEndpoint{common::joinHostPort(storeHost, site_.store->port()), token},
      steps_->events(attempt), &clock_, remotes.get());
  std::lock_guard<std::mutex> lock(mutex_);
  local_ = std::move(local);
  remotes_ = std::move(remotes);
  coordinator_ = std::move(coordinator);
  // A cancel between attempts, or while this one was being set up, still ends it.
  if (cancelRequested_) coordinator_->cancel(cancelGrace_);
}

std::optional<coord::JobResult> JobAttempts::runAttempt(int attempt) {
  setUp(attempt);
  coord::JobCoordinator& coordinator = *coordinator_;
  const coord::JobCoordinator::Start started = steps_->start(coordinator, attempt);
  if (started == coord::JobCoordinator::Start::kEnded && !coordinator.finished()) {
    // Put aside before it started: only the attempt's set-up goes.
    tearDown();
    return std::nullopt;
  }
  // Every rank started (it may have ended already: a fast failure is still an attempt that ran).
  if (started == coord::JobCoordinator::Start::kRunning && coordinator.launched()) {
    steps_->started(coordinator, attempt);
  }
  while (!coordinator.finished()) {
    steps_->wait(coordinator);
    coordinator.tick();
    steps_->progressed(coordinator);
  }
  const coord::JobResult result = *coordinator.result();
  // Teardown before anything else sees the end: no host may still deliver lines after readers
  // saw it, and the next attempt must find this one's resources released.
  tearDown();
  steps_->ended(coordinator, attempt, result);
  return result;
}

void JobAttempts::tearDown() {
  std::unique_ptr<relay::TreeHosts> remotes;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    remotes.swap(remotes_);
  }
  // No remote event of this attempt after this (its streams are closed).
  if (remotes) remotes->closeLaunches();
  // Releases the local group: leftovers SIGKILLed, ranks reaped. Their exits still reach the
  // coordinator, whose stops go through the remote hosts' call batch: those must outlive this.
  if (local_) local_->finish();
  // Their last Stops and Unreserves finish in the background, so a host that does not answer
  // them delays nobody.
  if (remotes && site_.detached != nullptr) site_.detached->keep(std::move(remotes));
  site_.store->removeJob(spec_.jobId);
}

void JobAttempts::abandon() {
  const std::string role = "job " + spec_.jobId + " (letting its hosts go)";
  // The local ranks first: their exits reach the coordinator, which stops through the remote
  // hosts (tearDown() says why).
  common::runGuarded(role, [&] {
    if (local_) local_->finish();
  });
  common::runGuarded(role, [&] {
    std::unique_ptr<relay::TreeHosts> remotes;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      remotes.swap(remotes_);
    }
  });
  common::runGuarded(role, [&] { site_.store->removeJob(spec_.jobId); });
}

void JobAttempts::cancel(std::optional<std::chrono::milliseconds> grace) {
  std::lock_guard<std::mutex> lock(mutex_);
  cancelRequested_ = true;
  if (grace) cancelGrace_ = grace;
  // cancel() only queues stops, so holding mutex_ is fine.
  if (coordinator_) coordinator_->cancel(grace);
}

bool JobAttempts::cancelled() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cancelRequested_;
}

}  // namespace hvd::agent::jobs
