#include "agent/coordinator/local_node_agent.h"

#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>
#include <utility>
#include <vector>

namespace hvd::agent::coordinator {

// Maps the group's local indices to global ranks and hands lines and exits to the job's events.
// The spawner calls it from the group's supervisor thread, one call at a time.
class LocalNodeAgent::Forwarder : public process::OutputSink {
 public:
  Forwarder(std::vector<int> globalRanks, JobEvents* events)
      : globalRanks_(std::move(globalRanks)), events_(events) {}

  void line(int index, process::Stream which, std::string_view text) override {
    events_->onOutput(globalRanks_.at(index), which, text);
  }
  void exited(int index, const process::ExitStatus& status) {
    events_->onExit(globalRanks_.at(index), status);
  }

 private:
  const std::vector<int> globalRanks_;
  JobEvents* const events_;
};

LocalNodeAgent::LocalNodeAgent(std::string host, process::Spawner* spawner,
                               node::GpuDiscovery* gpus, ledger::ResourceLedger* ledger)
    : host_(std::move(host)), spawner_(spawner), gpus_(gpus), ledger_(ledger) {}

LocalNodeAgent::~LocalNodeAgent() { shutdown(); }

void LocalNodeAgent::shutdown() {
  std::map<std::string, Job> jobs;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs.swap(jobs_);
  }
  // Outside the lock: tearing a group down waits for its supervisor thread, which may be inside a
  // callback that calls stop() and so takes mutex_.
  for (auto& [id, job] : jobs) job.group.reset();
}

std::optional<pid_t> LocalNodeAgent::processGroupId(const std::string& jobId) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = jobs_.find(jobId);
  if (it == jobs_.end() || !it->second.group) return std::nullopt;
  return it->second.group->pgid();
}

void LocalNodeAgent::release(const std::string& jobId) {
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
  // Every rank is reaped: its slots and GPUs are free for the next job.
  if (ledger_ != nullptr) ledger_->release(jobId);
}

ReserveResult LocalNodeAgent::reserve(const ledger::Request& request) {
  ReserveResult result;
  if (ledger_ == nullptr) {
    result.accounted = false;
    return result;
  }
  result.grant = ledger_->reserve(request);
  return result;
}

void LocalNodeAgent::unreserve(const std::string& key) {
  if (ledger_ == nullptr) return;
  {
    // A launched job keeps its holding until release(): only a reservation not launched goes.
    std::lock_guard<std::mutex> lock(mutex_);
    if (jobs_.count(key) != 0) return;
  }
  ledger_->release(key);
}

DescribeResult LocalNodeAgent::describe() {
  NodeDescription node;
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) == 0) node.hostname = name;
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
  if (gpus_ != nullptr) node.gpus = gpus_->discover();
  node.version = "embedded";
  DescribeResult result;
  result.description = std::move(node);
  return result;
}

LaunchStatus LocalNodeAgent::launch(const LaunchRequest& request, JobEvents* events) {
  if (request.ranks.empty()) return {};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (jobs_.count(request.jobId) != 0) {
      return {"job " + request.jobId + " is already running on " + host_};
    }
    jobs_[request.jobId];  // reserves the id, so a stop during spawn() is remembered
  }
  if (request.reserved && ledger_ != nullptr && !ledger_->bind(request.jobId)) {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.erase(request.jobId);
    // Its lease ran out before the launch came: the GPUs may be another job's by now.
    return {"no reservation of job " + request.jobId + " on " + host_ +
            " (its lease expired before the launch)"};
  }
  std::vector<int> globalRanks;
  std::vector<process::SpawnSpec> specs;
  for (const RankLaunch& r : request.ranks) {
    globalRanks.push_back(r.rank);
    specs.push_back(r.spec);
  }
  auto forwarder = std::make_unique<Forwarder>(globalRanks, events);
  Forwarder* raw = forwarder.get();
  process::SpawnResult spawned = spawner_->spawn(
      specs, raw,
      [raw](int index, const process::ExitStatus& status) { raw->exited(index, status); });
  if (!spawned.ok()) {
    // spawn() is all or nothing: nothing of the job runs, so the error replaces every event.
    {
      std::lock_guard<std::mutex> lock(mutex_);
      jobs_.erase(request.jobId);
    }
    if (ledger_ != nullptr) ledger_->release(request.jobId);
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
  LaunchStatus status;
  for (size_t i = 0; i < globalRanks.size(); ++i) {
    status.pids.emplace_back(globalRanks[i], static_cast<int>(group->pid(static_cast<int>(i))));
  }
  return status;
}

void LocalNodeAgent::stop(const std::string& jobId, int signal, std::chrono::milliseconds grace) {
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
  // Groups are only destroyed by shutdown(), so the pointer stays valid. Called outside the lock
  // because this may run on the group's own supervisor thread (from an exit callback).
  group->requestStop(signal, grace);
}

}  // namespace hvd::agent::coordinator
