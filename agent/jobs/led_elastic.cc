#include "agent/jobs/led_elastic.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>
#include <utility>

#include "agent/common/net.h"
#include "agent/elastic/script_discovery.h"
#include "agent/relay/link_agent.h"
#include "contract/exit_codes.h"
#include "hvd_support/host.h"

namespace hvd::agent::jobs {

namespace coord = coordinator;

namespace {

// Another host's agent for an elastic job: its launches are drainable, and the agent's word that
// it is draining goes to `draining`. Every other call goes to the agent as it is.
class DrainableAgent final : public coord::NodeAgent {
 public:
  DrainableAgent(std::unique_ptr<coord::NodeAgent> agent,
                 std::function<void(const std::string&)> draining)
      : draining_(std::move(draining)), agent_(std::move(agent)) {}

  std::string host() const override { return agent_->host(); }
  std::string address() const override { return agent_->address(); }
  coord::DescribeResult describe() override { return agent_->describe(); }
  coord::ReserveResult reserve(const ledger::Request& request) override {
    return agent_->reserve(request);
  }
  void describeAsync(std::function<void(coord::DescribeResult)> done) override {
    agent_->describeAsync(std::move(done));
  }
  void reserveAsync(const ledger::Request& request,
                    std::function<void(coord::ReserveResult)> done) override {
    agent_->reserveAsync(request, std::move(done));
  }
  void unreserve(const std::string& key) override { agent_->unreserve(key); }
  coord::LaunchStatus launch(const coord::LaunchRequest& request,
                             coord::JobEvents* events) override {
    return agent_->launch(drainable(request), relayOf(events));
  }
  bool beginLaunch(const coord::LaunchRequest& request, coord::JobEvents* events,
                   std::string* error) override {
    return agent_->beginLaunch(drainable(request), relayOf(events), error);
  }
  coord::LaunchStatus awaitLaunch(const coord::LaunchRequest& request,
                                  coord::JobEvents* events) override {
    return agent_->awaitLaunch(drainable(request), relayOf(events));
  }
  void stop(const std::string& jobId, int signal, std::chrono::milliseconds grace) override {
    agent_->stop(jobId, signal, grace);
  }

 private:
  // The job's events, and the agent's draining to the callback.
  class Relay final : public coord::JobEvents {
   public:
    Relay(coord::JobEvents* events, const std::function<void(const std::string&)>* draining)
        : events_(events), draining_(draining) {}
    void onOutput(int rank, process::Stream stream, std::string_view line) override {
      events_->onOutput(rank, stream, line);
    }
    void onExit(int rank, const process::ExitStatus& status) override {
      events_->onExit(rank, status);
    }
    void onAgentLost(const std::string& host, const std::string& reason) override {
      events_->onAgentLost(host, reason);
    }
    void onHostDraining(const std::string& host) override {
      if (*draining_) (*draining_)(host);
      events_->onHostDraining(host);
    }

   private:
    coord::JobEvents* const events_;
    const std::function<void(const std::string&)>* const draining_;
  };

  static coord::LaunchRequest drainable(coord::LaunchRequest request) {
    request.drainable = true;
    return request;
  }
  // One relay per JobEvents, kept as long as this agent: events may come until it is gone.
  coord::JobEvents* relayOf(coord::JobEvents* events) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::unique_ptr<Relay>& relay = relays_[events];
    if (!relay) relay = std::make_unique<Relay>(events, &draining_);
    return relay.get();
  }

  const std::function<void(const std::string&)> draining_;
  std::mutex mutex_;
  std::map<coord::JobEvents*, std::unique_ptr<Relay>> relays_;
  // Last: destroyed first, so that no event reaches a relay that is gone.
  const std::unique_ptr<coord::NodeAgent> agent_;
};

}  // namespace

ElasticSite elasticSiteFor(const coord::JobSpec& spec, const AttemptSite& site,
                           std::function<void(const std::string& host)> draining) {
  ElasticSite out;
  out.store = site.store;
  out.storeHost = site.storeHost.empty() ? spec.hosts.at(0).host : site.storeHost;
  const std::string leader = spec.hosts.at(0).host;
  const std::string self = hvd::localHostName();
  const std::chrono::milliseconds timeout =
      spec.connectTimeout.count() > 0 ? spec.connectTimeout : site.defaultConnectTimeout;
  out.connect = [site, leader, self, timeout, draining, addresses = spec.agentAddresses,
                 port = spec.elastic.agentPort](
                    const std::string& host) -> std::unique_ptr<coord::NodeAgent> {
    if (host == leader || host == self || common::isLoopbackName(host)) {
      return std::make_unique<LocalHost::View>(site.local, host, site.describeLocal);
    }
    if (!site.remoteAgents) return nullptr;
    const auto it = addresses.find(host);
    const std::string address = it != addresses.end() && !it->second.empty()
                                    ? it->second
                                    : common::joinHostPort(host, port);
    return std::make_unique<DrainableAgent>(
        std::make_unique<relay::LinkAgent>(site.remoteAgents(RemoteHost{host, address, timeout})),
        draining);
  };
  return out;
}

std::unique_ptr<elastic::HostDiscovery> discoveryFor(const coord::JobSpec& spec) {
  const int defaultSlots = spec.elastic.slotsPerHost > 0 ? spec.elastic.slotsPerHost : 1;
  if (!spec.elastic.discoveryScript.empty()) {
    // Each run may take up to the polling period, at least 10 s: a script that asks a cluster
    // manager needs a moment, one that hangs must not stall the job's view of its hosts.
    const auto timeout = std::max(spec.elastic.discoveryInterval, std::chrono::milliseconds(10000));
    std::error_code error;
    const std::string cwd = std::filesystem::is_directory(spec.cwd, error) ? spec.cwd : "";
    return std::make_unique<elastic::ScriptDiscovery>(spec.elastic.discoveryScript, defaultSlots,
                                                      timeout, spec.env, cwd);
  }
  std::vector<elastic::DiscoveredHost> fixed;
  for (const contract::HostSlots& h : spec.hosts) {
    fixed.push_back({h.host, h.slots.value_or(defaultSlots)});
  }
  return std::make_unique<elastic::FixedHosts>(std::move(fixed));
}

LedElasticJob::LedElasticJob(coord::JobSpec spec, AttemptSite site, coord::ClientEvents* client)
    : spec_(std::move(spec)), site_(std::move(site)), client_(client) {}

LedElasticJob::~LedElasticJob() { abandon(); }

coord::JobResult LedElasticJob::unstarted(coord::JobOutcome outcome, int exitCode,
                                          std::string summary, std::string reason) const {
  coord::JobResult r;
  r.jobId = spec_.jobId;
  r.outcome = outcome;
  r.exitCode = exitCode;
  r.summary = std::move(summary);
  r.reason = std::move(reason);
  return r;
}

LedElasticJob::Start LedElasticJob::tryStart() {
  std::optional<coord::JobResult> ended;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cancelRequested_) {
      unstartedResult_ =
          unstarted(coord::JobOutcome::kCancelled, contract::kExitCancelled,
                    "hvdrun: job " + spec_.jobId + " was cancelled", "cancelled before it started");
      ended = unstartedResult_;
    }
  }
  if (!ended) return Start::kRunning;
  client_->onJobEnd(*ended);
  return Start::kEnded;
}

void LedElasticJob::endUnstarted(const std::string& summary, const std::string& reason) {
  coord::JobResult r =
      unstarted(coord::JobOutcome::kResourcesBusy, contract::kExitResourcesBusy, summary, reason);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    unstartedResult_ = r;
  }
  client_->onJobEnd(r);
}

std::optional<coord::JobResult> LedElasticJob::result() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return unstartedResult_;
}

coord::JobResult LedElasticJob::run(
    const std::function<void()>& wait,
    const std::function<void(const std::vector<RoundRecord>&)>& rounds) {
  if (const int port = common::pickFreePort(site_.portHost); port > 0) spec_.masterPort = port;
  ElasticJob* job = nullptr;
  {
    auto created = std::make_unique<ElasticJob>(
        spec_, elasticSiteFor(spec_, site_, [this](const std::string& host) { drain(host); }),
        discoveryFor(spec_), client_, &clock_);
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = std::move(created);
    job = job_.get();
    // A cancel while it was being set up still ends it.
    if (cancelRequested_) job_->cancel(cancelGrace_);
  }
  while (!job->finished()) {
    wait();
    job->tick();
    if (rounds) rounds(job->rounds());
  }
  const coord::JobResult result = *job->result();
  if (rounds) rounds(job->rounds());  // the last round's end
  // Its hosts let go before anyone sees the end: no line after the record is final.
  abandon();
  return result;
}

void LedElasticJob::cancel(std::optional<std::chrono::milliseconds> grace) {
  std::lock_guard<std::mutex> lock(mutex_);
  cancelRequested_ = true;
  if (grace) cancelGrace_ = grace;
  if (job_) job_->cancel(grace);
}

void LedElasticJob::drain(const std::string& host) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (job_) job_->drain(host);
}

void LedElasticJob::abandon() {
  std::unique_ptr<ElasticJob> job;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job.swap(job_);
  }
  // Its destructor stops discovery, releases every host and removes its namespaces.
  job.reset();
}

}  // namespace hvd::agent::jobs
