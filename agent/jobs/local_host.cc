#include "agent/jobs/local_host.h"

#include <sched.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <thread>
#include <utility>

#include "agent/auth/cluster_key.h"
#include "agent/coordinator/rank_environments.h"
#include "agent/jobs/environment.h"
#include "hvd_support/host.h"
#include "hvd_support/logging.h"

namespace hvd::agent::jobs {

namespace coord = coordinator;

// Maps the group's local indices to global ranks and hands lines and exits to the job's events.
// The spawner calls it from the group's supervisor thread, one call at a time.
class LocalHost::Forwarder : public process::OutputSink {
 public:
  Forwarder(std::vector<int> globalRanks, coord::JobEvents* events)
      : globalRanks_(std::move(globalRanks)), events_(events) {}

  void line(int index, process::Stream which, std::string_view text) override {
    events_->onOutput(globalRanks_.at(index), which, text);
  }
  void exited(int index, const process::ExitStatus& status) {
    events_->onExit(globalRanks_.at(index), status);
  }

 private:
  const std::vector<int> globalRanks_;
  coord::JobEvents* const events_;
};

LocalHost::LocalHost(LocalHostOptions options) : options_(std::move(options)) {}

LocalHost::LocalHost(std::string host, process::Spawner* spawner, node::GpuDiscovery* gpus,
                     ledger::ResourceLedger* ledger)
    : LocalHost(LocalHostOptions{std::move(host), spawner, gpus, ledger}) {}

LocalHost::~LocalHost() { shutdown(); }

void LocalHost::shutdown() {
  std::map<std::string, Job> jobs;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs.swap(jobs_);
  }
  // Outside the lock: tearing a group down waits for its supervisor thread, which may be inside a
  // callback that calls stop() and so takes mutex_.
  for (auto& [id, job] : jobs) job.group.reset();
}

std::optional<pid_t> LocalHost::processGroupId(const std::string& jobId) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = jobs_.find(jobId);
  if (it == jobs_.end() || !it->second.group) return std::nullopt;
  return it->second.group->pgid();
}

void LocalHost::release(const std::string& jobId) {
  Job job;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = jobs_.find(jobId);
    // A job still being spawned (no group yet) belongs to a launch() in progress: leave it.
    if (it == jobs_.end() || !it->second.group) return;
    job = std::move(it->second);
    jobs_.erase(it);
  }
  // Outside the lock, as in shutdown(): the group's teardown waits for its supervisor thread.
  job.group.reset();
  // Every rank is reaped: its slots and GPUs are free for the next job, and nothing of it is
  // left for a restarted agent to clean up.
  if (options_.ledger != nullptr) options_.ledger->release(jobId);
  if (job.recorded) options_.records->remove(jobId);
}

void LocalHost::stopAll(std::chrono::milliseconds maxGrace, const std::set<std::string>& except) {
  std::vector<std::pair<std::string, PendingStop>> running;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [id, job] : jobs_) {
      if (job.group && except.count(id) == 0)
        running.emplace_back(id, PendingStop{job.stopSignal, job.grace});
    }
  }
  for (const auto& [id, s] : running) stop(id, s.signal, std::min(s.grace, maxGrace));
}

std::vector<std::string> LocalHost::runningJobs() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> ids;
  for (const auto& [id, job] : jobs_) {
    if (job.group) ids.push_back(id);
  }
  return ids;
}

std::map<std::string, int> LocalHost::runningRanksByJob() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::map<std::string, int> ranks;
  for (const auto& [id, job] : jobs_) {
    if (!job.group) continue;
    // The group takes only its own lock here and never calls out under it: no lock order issue.
    int running = 0;
    for (int i = 0; i < job.group->size(); ++i) running += job.group->exitStatus(i) ? 0 : 1;
    if (running > 0) ranks[job.job.empty() ? id : job.job] += running;
  }
  return ranks;
}

coord::ReserveResult LocalHost::reserve(const ledger::Request& request) {
  coord::ReserveResult result;
  if (options_.ledger == nullptr) {
    result.accounted = false;
    return result;
  }
  result.grant = options_.ledger->reserve(request);
  return result;
}

void LocalHost::unreserve(const std::string& key) {
  if (options_.ledger == nullptr) return;
  {
    // A launched job keeps its holding until release(): only a reservation not launched goes.
    std::lock_guard<std::mutex> lock(mutex_);
    if (jobs_.count(key) != 0) return;
  }
  options_.ledger->release(key);
}

coord::DescribeResult LocalHost::describe() {
  coord::NodeDescription node;
  node.hostname = localHostName();
  // The CPUs this process may run on (taskset, cgroup cpusets), not the machine's total: that is
  // what the ranks started from here get.
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) {
    node.cpus = CPU_COUNT(&set);
  } else {
    node.cpus = static_cast<int>(std::thread::hardware_concurrency());
  }
  node.addresses = {"127.0.0.1"};  // embedded jobs are loopback-only
  if (options_.gpus != nullptr) node.gpus = options_.gpus->discover();
  node.version = "embedded";
  coord::DescribeResult result;
  result.description = std::move(node);
  return result;
}

coord::LaunchStatus LocalHost::launch(const coord::LaunchRequest& request,
                                      coord::JobEvents* events) {
  try {
    return start(request, events);
  } catch (const std::exception& e) {
    return {e.what()};
  }
}

coord::LaunchStatus LocalHost::start(coord::LaunchRequest request, coord::JobEvents* events) {
  // The ranks' environments are built here, on the host that runs them, from the template the
  // leader sent once for the host.
  coord::buildRankEnvironments(&request);
  std::string tag;
  if (options_.records != nullptr) {
    // The tag lets a restarted agent recognise this job's leftovers (job_records.h).
    unsigned char random[8];
    auth::fillFromKernelRandom(random, sizeof(random));
    tag = auth::hexEncode(random, sizeof(random));
  }
  for (coord::RankLaunch& rank : request.ranks) {
    if (options_.baseEnv) rank.spec.env = mergeEnvironment(*options_.baseEnv, rank.spec.env);
    if (!tag.empty()) {
      rank.spec.env =
          mergeEnvironment(rank.spec.env, {std::string(records::kJobTagEnv) + "=" + tag});
    }
  }
  coord::LaunchStatus status = spawn(request, events);
  if (!status.ok() || request.ranks.empty() || options_.records == nullptr) return status;
  // A job whose ranks all ended at once may be released already: nothing of it is left to record.
  const std::optional<pid_t> pgid = processGroupId(request.jobId);
  if (!pgid) return status;
  const bool written = options_.records->add(request.jobId, *pgid, tag);
  const int error = errno;
  bool running = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = jobs_.find(request.jobId);
    running = it != jobs_.end() && it->second.group && it->second.group->pgid() == *pgid;
    if (running) it->second.recorded = written;
  }
  if (written && !running) {
    // Released while the record was being written: release() did not know of it.
    options_.records->remove(request.jobId);
  } else if (!written && running) {
    // Not fatal: the job runs, only a crash of this agent could leave its leftovers behind.
    hvd::logging::program("jobs")->warn("job {}: cannot write its record in {}: {}", request.jobId,
                                        options_.records->dir(), std::strerror(error));
  }
  return status;
}

coord::LaunchStatus LocalHost::spawn(const coord::LaunchRequest& request,
                                     coord::JobEvents* events) {
  if (request.ranks.empty()) return {};
  ledger::ResourceLedger* const ledger = options_.ledger;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (jobs_.count(request.jobId) != 0) {
      return {"job " + request.jobId + " is already running on " + host()};
    }
    Job& job = jobs_[request.jobId];  // reserves the id, so a stop during spawn() is remembered
    job.stopSignal = request.stopSignal;
    job.grace = request.grace;
    job.job = request.environment ? request.environment->jobId : request.jobId;
  }
  if (request.reserved && ledger != nullptr && !ledger->bind(request.jobId)) {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.erase(request.jobId);
    // Its lease ran out before the launch came: the GPUs may be another job's by now.
    return {"no reservation of job " + request.jobId + " on " + host() +
            " (its lease expired before the launch)"};
  }
  std::vector<int> globalRanks;
  std::vector<process::SpawnSpec> specs;
  for (const coord::RankLaunch& r : request.ranks) {
    globalRanks.push_back(r.rank);
    specs.push_back(r.spec);
  }
  auto forwarder = std::make_unique<Forwarder>(globalRanks, events);
  Forwarder* raw = forwarder.get();
  process::SpawnResult spawned = options_.spawner->spawn(
      specs, raw,
      [raw](int index, const process::ExitStatus& status) { raw->exited(index, status); });
  if (!spawned.ok()) {
    // spawn() is all or nothing: nothing of the job runs, so the error replaces every event.
    {
      std::lock_guard<std::mutex> lock(mutex_);
      jobs_.erase(request.jobId);
    }
    if (ledger != nullptr) ledger->release(request.jobId);
    // The spawner numbers ranks by position; name the global rank, as the user knows it.
    std::string error = spawned.error;
    if (error.rfind("rank ", 0) == 0) {
      size_t end = error.find(':');
      int index = std::atoi(error.substr(5, end - 5).c_str());
      if (index >= 0 && index < static_cast<int>(globalRanks.size()) && end != std::string::npos) {
        error = "rank " + std::to_string(globalRanks[index]) + error.substr(end);
      }
    }
    return {error};
  }
  process::ProcessGroup* group = spawned.group.get();
  std::optional<PendingStop> pending;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Job& job = jobs_[request.jobId];
    job.forwarder = std::move(forwarder);
    job.group = std::move(spawned.group);
    pending = job.pendingStop;
  }
  if (pending) group->requestStop(pending->signal, pending->grace);
  coord::LaunchStatus status;
  for (size_t i = 0; i < globalRanks.size(); ++i) {
    status.pids.emplace_back(globalRanks[i], static_cast<int>(group->pid(static_cast<int>(i))));
  }
  return status;
}

void LocalHost::stop(const std::string& jobId, int signal, std::chrono::milliseconds grace) {
  process::ProcessGroup* group = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = jobs_.find(jobId);
    if (it == jobs_.end()) return;
    Job& job = it->second;
    if (!job.group) {
      // Keep the more urgent of two stops that both came during spawn().
      if (!job.pendingStop || grace < job.pendingStop->grace) job.pendingStop = {signal, grace};
      return;
    }
    group = job.group.get();
  }
  // A group is destroyed only by release() or shutdown(), which the job's owner calls once no
  // stop can come any more, so the pointer stays valid. Called outside the lock because this may
  // run on the group's own supervisor thread (from an exit callback).
  group->requestStop(signal, grace);
}

LocalHost::View::View(LocalHost* host, std::string name, Describer describe)
    : host_(host), name_(std::move(name)), describe_(std::move(describe)) {}

LocalHost::View::~View() { finish(); }

void LocalHost::View::finish() {
  std::vector<std::string> launched;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    launched.swap(launched_);
  }
  for (const std::string& id : launched) host_->release(id);
}

coord::DescribeResult LocalHost::View::describe() {
  if (!describe_) return host_->describe();
  coord::DescribeResult result;
  try {
    result.description = describe_();
  } catch (const std::exception& e) {
    result.error = {name_, address(), e.what()};
  }
  return result;
}

coord::ReserveResult LocalHost::View::reserve(const ledger::Request& request) {
  return host_->reserve(request);
}

void LocalHost::View::unreserve(const std::string& key) { host_->unreserve(key); }

coord::LaunchStatus LocalHost::View::launch(const coord::LaunchRequest& request,
                                            coord::JobEvents* events) {
  coord::LaunchStatus status = host_->launch(request, events);
  if (status.ok()) {
    std::lock_guard<std::mutex> lock(mutex_);
    launched_.push_back(request.jobId);
  }
  return status;
}

void LocalHost::View::stop(const std::string& jobId, int signal, std::chrono::milliseconds grace) {
  host_->stop(jobId, signal, grace);
}

}  // namespace hvd::agent::jobs
