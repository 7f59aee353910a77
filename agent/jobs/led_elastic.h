// An elastic job led by this agent (LedJobs, spec.elastic.enabled): an ElasticJob
// (elastic_job.h) in place of JobAttempts, over the hosts of its rounds as the leader reaches
// them (elasticSiteFor), its discovery run here.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/coordinator/job_coordinator.h"
#include "agent/elastic/discovery.h"
#include "agent/jobs/attempts.h"
#include "agent/jobs/elastic_job.h"

namespace hvd::agent::jobs {

// Where a led elastic job's hosts are, from the leader's AttemptSite:
//   * this host under the names it goes by for the job: spec.hosts[0] (the leader, as
//     JobAttempts decides), a loopback name or this machine's hostname -> a LocalHost::View;
//   * any other host -> its agent through site.remoteAgents, at spec.agentAddresses[host] for
//     the hosts the job lists, else host:spec.elastic.agentPort (a host the script found);
//   * the store the workers dial: site.storeHost, else spec.hosts[0] as named.
// The launches on other hosts are drainable (LaunchRequest::drainable): when such a host's agent
// is stopped gracefully it says so, and `draining` (when set) gets the host's name, on the
// stream's thread.
ElasticSite elasticSiteFor(const coordinator::JobSpec& spec, const AttemptSite& site,
                           std::function<void(const std::string& host)> draining = nullptr);

// Discovery as the job asks for it: its script run here (with the job's forwarded environment,
// in its cwd where that exists here), or its hosts, fixed. Throws hvd::InvalidArgumentError for
// a spec it cannot run.
std::unique_ptr<elastic::HostDiscovery> discoveryFor(const coordinator::JobSpec& spec);

class LedElasticJob {
 public:
  using Start = coordinator::JobCoordinator::Start;

  // `site` and `client` must outlive this.
  LedElasticJob(coordinator::JobSpec spec, AttemptSite site, coordinator::ClientEvents* client);
  ~LedElasticJob();
  LedElasticJob(const LedElasticJob&) = delete;
  LedElasticJob& operator=(const LedElasticJob&) = delete;

  // The queue's start (LedJobs::waitAndStart): an elastic job holds nothing in the ledgers, so
  // its turn is its start. kEnded when it was cancelled first (result() says so).
  Start tryStart();
  // Ends the job before it started (--no-queue behind a queue): kResourcesBusy.
  void endUnstarted(const std::string& summary, const std::string& reason);

  // After tryStart() returned kRunning: runs the job to its end, `wait` between ticks (at most a
  // fraction of a second), and returns its result. Its MASTER_PORT is picked first. `rounds`
  // (when set) gets ElasticJob::rounds() after every tick and once at the end, on this thread.
  // A host whose agent says it is draining is drained (ElasticJob::drain).
  coordinator::JobResult run(
      const std::function<void()>& wait,
      const std::function<void(const std::vector<RoundRecord>&)>& rounds = nullptr);
  // Graceful stop (ElasticJob::cancel); before the start, the job will not start. Thread-safe.
  void cancel(std::optional<std::chrono::milliseconds> grace = std::nullopt);
  // `host` leaves gracefully (ElasticJob::drain); nothing before the start or after the end.
  // Thread-safe.
  void drain(const std::string& host);
  // After an exception escaped run(): the job destroyed (what runs is killed), its store
  // namespaces removed.
  void abandon();

  const coordinator::JobSpec& spec() const { return spec_; }
  // The result of a job that ended unstarted.
  std::optional<coordinator::JobResult> result() const;

 private:
  coordinator::JobResult unstarted(coordinator::JobOutcome outcome, int exitCode,
                                   std::string summary, std::string reason) const;

  coordinator::JobSpec spec_;
  const AttemptSite site_;
  coordinator::ClientEvents* const client_;
  coordinator::SteadyClock clock_;

  mutable std::mutex mutex_;
  std::unique_ptr<ElasticJob> job_;
  bool cancelRequested_ = false;
  std::optional<std::chrono::milliseconds> cancelGrace_;
  std::optional<coordinator::JobResult> unstartedResult_;
};

}  // namespace hvd::agent::jobs
