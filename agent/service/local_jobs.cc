#include "agent/service/local_jobs.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>
#include <utility>

#include "agent/auth/cluster_key.h"
#include "agent/service/environment.h"

namespace hvd::agent::service {

LocalJobs::LocalJobs(coordinator::LocalNodeAgent* agent, JobRecords* records,
                     std::vector<std::string> baseEnv)
    : agent_(agent), records_(records), baseEnv_(std::move(baseEnv)) {}

coordinator::LaunchStatus LocalJobs::launch(coordinator::LaunchRequest request,
                                            coordinator::JobEvents* events) {
  // The tag lets a restarted agent recognise this job's leftovers (job_records.h).
  unsigned char random[8];
  auth::fillFromKernelRandom(random, sizeof(random));
  const std::string tag = auth::hexEncode(random, sizeof(random));
  for (coordinator::RankLaunch& rank : request.ranks) {
    rank.spec.env = mergeEnvironment(baseEnv_, rank.spec.env);
    rank.spec.env = mergeEnvironment(rank.spec.env, {std::string(kJobTagEnv) + "=" + tag});
  }
  coordinator::LaunchStatus status = agent_->launch(request, events);
  if (!status.ok() || request.ranks.empty()) return status;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    running_[request.jobId] = {request.stopSignal, request.grace};
  }
  if (records_ != nullptr) {
    const std::optional<pid_t> pgid = agent_->processGroupId(request.jobId);
    if (!pgid || !records_->add(request.jobId, *pgid, tag)) {
      // Not fatal: the job runs, only a crash of this agent could leave its leftovers behind.
      spdlog::warn("hvdagent: job {}: cannot write its record in {}", request.jobId,
                   records_->dir());
    }
  }
  return status;
}

coordinator::ReserveResult LocalJobs::reserve(const ledger::Request& request) {
  return agent_->reserve(request);
}

void LocalJobs::unreserve(const std::string& key) { agent_->unreserve(key); }

void LocalJobs::stop(const std::string& jobId, int signal, std::chrono::milliseconds grace) {
  agent_->stop(jobId, signal, grace);
}

void LocalJobs::release(const std::string& jobId) {
  agent_->release(jobId);
  bool known = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    known = running_.erase(jobId) != 0;
  }
  if (known && records_ != nullptr) records_->remove(jobId);
}

void LocalJobs::stopAll(std::chrono::milliseconds maxGrace) {
  std::map<std::string, Running> running;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    running = running_;
  }
  for (const auto& [id, r] : running) agent_->stop(id, r.stopSignal, std::min(r.grace, maxGrace));
}

std::vector<std::string> LocalJobs::runningJobs() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> ids;
  for (const auto& [id, r] : running_) ids.push_back(id);
  return ids;
}

LocalHostAgent::LocalHostAgent(std::string host, LocalJobs* jobs, Describer describe)
    : host_(std::move(host)), jobs_(jobs), describe_(std::move(describe)) {}

LocalHostAgent::~LocalHostAgent() { finish(); }

void LocalHostAgent::finish() {
  std::vector<std::string> launched;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    launched.swap(launched_);
  }
  for (const std::string& id : launched) jobs_->release(id);
}

coordinator::DescribeResult LocalHostAgent::describe() {
  coordinator::DescribeResult result;
  try {
    result.description = describe_();
  } catch (const std::exception& e) {
    result.error = {host_, address(), e.what()};
  }
  return result;
}

coordinator::ReserveResult LocalHostAgent::reserve(const ledger::Request& request) {
  return jobs_->reserve(request);
}

void LocalHostAgent::unreserve(const std::string& key) { jobs_->unreserve(key); }

coordinator::LaunchStatus LocalHostAgent::launch(const coordinator::LaunchRequest& request,
                                                 coordinator::JobEvents* events) {
  coordinator::LaunchStatus status;
  try {
    status = jobs_->launch(request, events);
  } catch (const std::exception& e) {
    return {e.what()};
  }
  if (status.ok()) {
    std::lock_guard<std::mutex> lock(mutex_);
    launched_.push_back(request.jobId);
  }
  return status;
}

void LocalHostAgent::stop(const std::string& jobId, int signal, std::chrono::milliseconds grace) {
  jobs_->stop(jobId, signal, grace);
}

}  // namespace hvd::agent::service
