#include "agent/coordinator/job_coordinator.h"

#include <algorithm>
#include <utility>

#include "agent/coordinator/fan_out.h"
#include "contract/exit_codes.h"
#include "hvd/error.hpp"

namespace hvd::agent::coordinator {

namespace {

constexpr int kStopGraceful = 1;
constexpr int kStopKill = 2;

}  // namespace

std::string describeRankFailure(int rank, const std::string& host,
                                const process::ExitStatus& status) {
  std::string line = "hvdrun: rank " + std::to_string(rank) + " on " + host;
  if (status.signal != 0) return line + " was killed by " + status.describe();
  return line + " exited with code " + std::to_string(status.exitCode);
}

JobCoordinator::JobCoordinator(JobSpec spec, std::vector<NodeAgent*> agents, StoreEndpoint store,
                               ClientEvents* client, Clock* clock, CallBatch* batch)
    : spec_(std::move(spec)),
      agents_(std::move(agents)),
      store_(std::move(store)),
      client_(client),
      clock_(clock),
      batch_(batch) {
  for (NodeAgent* agent : agents_) agentHosts_.push_back(agent ? agent->host() : std::string());
}

JobResult JobCoordinator::baseResult(JobOutcome outcome, int exitCode, std::string summary) const {
  JobResult r;
  r.jobId = spec_.jobId;
  r.outcome = outcome;
  r.exitCode = exitCode;
  r.summary = std::move(summary);
  return r;
}

JobCoordinator::Start JobCoordinator::tryStart(bool queue,
                                               const std::function<void()>& onReserved) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (result_) return Start::kEnded;
    startedAt_ = clock_->now();
    busyReason_.clear();
  }
  if (spec_.hosts.empty() || agents_.size() != spec_.hosts.size() ||
      std::count(agents_.begin(), agents_.end(), nullptr) > 0) {
    JobResult r = baseResult(JobOutcome::kInvalidJob, contract::kExitUsage,
                             "hvdrun: internal error: " + std::to_string(spec_.hosts.size()) +
                                 " hosts but " + std::to_string(agents_.size()) + " agents");
    endNow(std::move(r));
    return Start::kEnded;
  }
  {
    // Cancelled while it waited in the queue: nothing runs, nothing is held.
    std::lock_guard<std::mutex> lock(mutex_);
    if (cancelled_) {
      result_ = baseResult(JobOutcome::kCancelled, contract::kExitCancelled,
                           "hvdrun: job " + spec_.jobId + " was cancelled");
    }
  }
  if (std::optional<JobResult> ended = result()) {
    if (client_) client_->onJobEnd(*ended);
    return Start::kEnded;
  }
  // Every host is described before anything starts: an unreachable host must fail the job
  // before a single worker runs, or the others would wait in rendezvous until their timeout.
  // Every host is asked at once; the first failing host in -H order is the one reported.
  std::vector<DescribeResult> answers = fanOut<DescribeResult>(
      agents_.size(),
      [&](size_t h, std::function<void(DescribeResult)> done) {
        agents_[h]->describeAsync(std::move(done));
      },
      batch_);
  std::vector<NodeDescription> nodes;
  for (size_t h = 0; h < agents_.size(); ++h) {
    DescribeResult& described = answers[h];
    if (!described.ok()) {
      AgentError error = described.error;
      if (error.host.empty()) error.host = spec_.hosts[h].host;
      if (error.address.empty()) error.address = agents_[h]->address();
      endNow(unreachableResult(error));
      return Start::kEnded;
    }
    nodes.push_back(std::move(*described.description));
  }
  contract::Placement placement;
  if (std::optional<JobResult> refused = place(nodes, &placement)) {
    endNow(std::move(*refused));
    return Start::kEnded;
  }
  std::vector<std::vector<int>> gpus;
  std::vector<bool> accounted;
  std::optional<JobResult> failed;
  const ledger::Grant grant = reserveAll(nodes, placement, &gpus, &accounted, &failed);
  if (failed) {
    endNow(std::move(*failed));
    return Start::kEnded;
  }
  if (grant.verdict == ledger::Verdict::kNeverFits) {
    JobResult r =
        baseResult(JobOutcome::kInvalidJob, contract::kExitUsage, "hvdrun: " + grant.reason);
    r.reason = grant.reason;
    endNow(std::move(r));
    return Start::kEnded;
  }
  if (grant.verdict == ledger::Verdict::kBusy) {
    if (!queue) {
      JobResult r = baseResult(
          JobOutcome::kResourcesBusy, contract::kExitResourcesBusy,
          "hvdrun: job " + spec_.jobId + " was not queued (--no-queue): " + grant.reason);
      r.reason = grant.reason;
      endNow(std::move(r));
      return Start::kEnded;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    busyReason_ = grant.reason;
    return Start::kBusy;
  }
  if (onReserved) onReserved();
  std::vector<LaunchRequest> requests;
  if (std::optional<JobResult> refused = build(std::move(placement), gpus, accounted, &requests)) {
    unreserveAll(accounted);
    endNow(std::move(*refused));
    return Start::kEnded;
  }
  launchAll(requests);
  return Start::kRunning;
}

JobResult JobCoordinator::unreachableResult(const AgentError& error) const {
  JobResult r = error.authenticationFailed
                    ? baseResult(JobOutcome::kAgentUnreachable, contract::kExitAuthenticationFailed,
                                 "hvdrun: agent on " + error.host + " (" + error.address +
                                     ") refused the leader's request: " + error.reason +
                                     " (is the cluster key the same on every host?)")
                    : baseResult(JobOutcome::kAgentUnreachable, contract::kExitAgentUnreachable,
                                 "hvdrun: " + error.describeUnreachable());
  r.host = error.host;
  r.reason = error.reason;
  return r;
}

std::optional<JobResult> JobCoordinator::place(const std::vector<NodeDescription>& nodes,
                                               contract::Placement* placement) {
  try {
    // Slots: what -H says, else one per GPU (one rank per GPU is the usual layout; one per
    // --gpus-per-rank GPUs), else 1.
    std::vector<contract::HostCapacity> capacity;
    const int perRank = std::max(1, spec_.gpusPerRank);
    for (size_t h = 0; h < spec_.hosts.size(); ++h) {
      const int gpus = static_cast<int>(nodes[h].gpus.size());
      int slots = spec_.hosts[h].slots.value_or(gpus / perRank);
      capacity.push_back({spec_.hosts[h].host, slots > 0 ? slots : 1});
    }
    *placement = contract::placeRanks(capacity, spec_.np, spec_.oversubscribe);
    // A GPU shortage on a host is a request that can never be met: refused before anything is
    // reserved, with the message that names the host and its GPUs.
    for (size_t h = 0; h < spec_.hosts.size(); ++h) {
      std::vector<int> all;
      for (const node::GpuInfo& gpu : nodes[h].gpus) all.push_back(gpu.index);
      const int localSize = static_cast<int>(placement->hostRanks[h].size());
      if (localSize > 0) {
        node::assignGpus(spec_.hosts[h].host, all, 0, localSize, spec_.gpusPerRank,
                         spec_.oversubscribe);
      }
    }
  } catch (const hvd::Error& e) {
    // -np above the slots, a GPU shortage: the request is wrong, and the messages already say
    // how (slots per host, GPUs available).
    JobResult r = baseResult(JobOutcome::kInvalidJob, contract::kExitUsage,
                             std::string("hvdrun: ") + e.what());
    r.reason = e.what();
    return r;
  }
  return std::nullopt;
}

ledger::Grant JobCoordinator::reserveAll(const std::vector<NodeDescription>& nodes,
                                         const contract::Placement& placement,
                                         std::vector<std::vector<int>>* gpus,
                                         std::vector<bool>* accounted,
                                         std::optional<JobResult>* failed) {
  const size_t hosts = spec_.hosts.size();
  gpus->assign(hosts, {});
  accounted->assign(hosts, false);
  std::vector<bool> held(hosts, false);
  ledger::Grant outcome;
  // Every host with ranks is asked at once. The first host in -H order that fails or refuses
  // decides the outcome, as it would one host at a time; what the others granted goes back.
  std::vector<size_t> asked;
  std::vector<ledger::Request> requests;
  for (size_t h = 0; h < hosts; ++h) {
    if (placement.hostRanks[h].empty()) continue;
    ledger::Request request;
    request.key = spec_.launchId();
    request.job = spec_.jobId;
    request.ranks = static_cast<int>(placement.hostRanks[h].size());
    request.gpusPerRank = std::max(1, spec_.gpusPerRank);
    request.share = spec_.oversubscribe;
    if (h < spec_.preferredGpus.size()) request.preferredGpus = spec_.preferredGpus[h];
    request.lease = spec_.reserveLease;
    asked.push_back(h);
    requests.push_back(std::move(request));
  }
  std::vector<ReserveResult> answers = fanOut<ReserveResult>(
      asked.size(),
      [&](size_t i, std::function<void(ReserveResult)> done) {
        agents_[asked[i]]->reserveAsync(requests[i], std::move(done));
      },
      batch_);
  bool decided = false;
  for (size_t i = 0; i < asked.size(); ++i) {
    const size_t h = asked[i];
    const ReserveResult& result = answers[i];
    if (result.ok() && result.grant.verdict == ledger::Verdict::kGranted) {
      held[h] = result.accounted;
      (*accounted)[h] = result.accounted;
      if (result.accounted) {
        (*gpus)[h] = result.grant.gpus;
      } else {
        for (const node::GpuInfo& gpu : nodes[h].gpus) (*gpus)[h].push_back(gpu.index);
      }
      continue;
    }
    if (decided) continue;
    decided = true;
    if (!result.ok()) {
      AgentError error = result.error;
      if (error.host.empty()) error.host = spec_.hosts[h].host;
      if (error.address.empty()) error.address = agents_[h]->address();
      *failed = unreachableResult(error);
      outcome.verdict = ledger::Verdict::kBusy;
    } else {
      outcome = result.grant;
    }
  }
  if (failed->has_value() || outcome.verdict != ledger::Verdict::kGranted) {
    // All or nothing: what the earlier hosts granted goes back at once, not at lease expiry.
    unreserveAll(held);
    return outcome;
  }
  std::vector<HostResources> resources;
  for (size_t h = 0; h < hosts; ++h) {
    if (placement.hostRanks[h].empty()) continue;
    HostResources r;
    r.host = spec_.hosts[h].host;
    r.slots = static_cast<int>(placement.hostRanks[h].size());
    r.gpus = (*gpus)[h];
    for (int index : r.gpus) {
      for (const node::GpuInfo& gpu : nodes[h].gpus) {
        if (gpu.index == index) r.gpuUuids.push_back(gpu.uuid);
      }
    }
    resources.push_back(std::move(r));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  resources_ = std::move(resources);
  reserved_ = held;
  return outcome;
}

void JobCoordinator::unreserveAll(const std::vector<bool>& held) {
  HeldRound round(batch_);
  for (size_t h = 0; h < held.size() && h < agents_.size(); ++h) {
    if (held[h]) agents_[h]->unreserve(spec_.launchId());
  }
}

std::optional<JobResult> JobCoordinator::build(contract::Placement placement,
                                               const std::vector<std::vector<int>>& gpus,
                                               const std::vector<bool>& accounted,
                                               std::vector<LaunchRequest>* requests) {
  requests->assign(spec_.hosts.size(), LaunchRequest{});
  try {
    for (size_t h = 0; h < spec_.hosts.size(); ++h) {
      LaunchRequest& request = (*requests)[h];
      request.jobId = spec_.launchId();
      request.stopSignal = spec_.stopSignal;
      request.grace = spec_.grace;
      request.reserved = accounted[h];
      if (placement.hostRanks[h].empty()) continue;
      node::WorkerEnvInput input;
      input.forwarded = spec_.env;
      input.size = spec_.np;
      input.groupRank = node::groupRankOfHost(placement, static_cast<int>(h));
      input.hostName = spec_.hosts[h].host;
      input.jobId = spec_.jobId;
      input.storeAddr = store_.address;
      input.storeToken = store_.token;
      // rank 0 always lands on the first host
      input.masterAddr = spec_.masterAddr.empty() ? spec_.hosts[0].host : spec_.masterAddr;
      input.masterPort = spec_.masterPort;
      // The GPUs this host's ledger granted the job (all of them where nothing is accounted).
      input.hostGpus = gpus[h];
      input.gpusPerRank = spec_.gpusPerRank;
      input.gpuBind = spec_.gpuBind;
      input.oversubscribe = spec_.oversubscribe;
      input.restartCount = spec_.attempt;
      input.maxRestarts = spec_.restart.maxRestarts;
      // Checked here, built by the host's agent: a job that cannot give a rank its environment
      // fails as invalid before anything starts.
      for (int rank : placement.hostRanks[h]) {
        input.placement = placement.ranks[rank];
        node::checkWorkerEnvironment(input);
        RankLaunch launch;
        launch.rank = rank;
        launch.spec.argv = spec_.argv;
        launch.spec.cwd = spec_.cwd;
        launch.placement = placement.ranks[rank];
        request.ranks.push_back(std::move(launch));
      }
      input.placement = {};
      request.environment = std::move(input);
    }
  } catch (const hvd::Error& e) {
    // A bad forwarded variable: the request is wrong, and the message says how.
    JobResult r = baseResult(JobOutcome::kInvalidJob, contract::kExitUsage,
                             std::string("hvdrun: ") + e.what());
    r.reason = e.what();
    return r;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  placement_ = std::move(placement);
  ranks_.assign(spec_.np, RankState::kNotStarted);
  pids_.assign(spec_.np, 0);
  exits_.assign(spec_.np, std::nullopt);
  stderrTail_.assign(spec_.np, {});
  stopped_.assign(spec_.np, false);
  launched_.assign(spec_.hosts.size(), false);
  lost_.assign(spec_.hosts.size(), false);
  stopLevel_.assign(spec_.hosts.size(), 0);
  return std::nullopt;
}

void JobCoordinator::endUnstarted(std::string summary, std::string reason) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (result_ || launchDone_) return;
  }
  JobResult r =
      baseResult(JobOutcome::kResourcesBusy, contract::kExitResourcesBusy, std::move(summary));
  r.reason = std::move(reason);
  endNow(std::move(r));
}

std::string JobCoordinator::busyReason() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return busyReason_;
}

std::vector<HostResources> JobCoordinator::resources() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return resources_;
}

void JobCoordinator::launchAll(const std::vector<LaunchRequest>& requests) {
  // Every host's launch goes out before the leader waits for any answer: the hosts start their
  // ranks at the same time, and a job's launch costs one round trip, not one per host.
  std::vector<size_t> begun;
  std::vector<std::string> beginErrors;
  std::vector<bool> sent;
  HeldRound round(batch_);
  for (size_t h = 0; h < requests.size(); ++h) {
    const LaunchRequest& request = requests[h];
    if (request.ranks.empty()) continue;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      // A failure or Ctrl-C while launching: do not start more ranks only to stop them.
      if (failure_ || cancelled_ || timedOut_) break;
      // Running before the launch returns: an in-process agent may report exits from its own
      // thread before we get here again.
      for (const RankLaunch& r : request.ranks) ranks_[r.rank] = RankState::kRunning;
    }
    begun.push_back(h);
    std::string error;
    sent.push_back(agents_[h]->beginLaunch(request, this, &error));
    beginErrors.push_back(std::move(error));
  }
  round.flush();
  for (size_t i = 0; i < begun.size(); ++i) {
    const size_t h = begun[i];
    const LaunchRequest& request = requests[h];
    if (!sent[i]) {
      // Not started yet (a one-call agent): after a failure or Ctrl-C it is not started at all.
      std::lock_guard<std::mutex> lock(mutex_);
      if (failure_ || cancelled_ || timedOut_) {
        for (const RankLaunch& r : request.ranks) ranks_[r.rank] = RankState::kNotStarted;
        continue;
      }
    }
    const LaunchStatus status = beginErrors[i].empty() ? agents_[h]->awaitLaunch(request, this)
                                                       : LaunchStatus{beginErrors[i]};
    Actions actions;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (status.ok()) {
        launched_[h] = true;
        for (const auto& [rank, pid] : status.pids) {
          if (rank >= 0 && rank < spec_.np) pids_[rank] = pid;
        }
        // Stopping began while this host was launching: bring it to the same stop level.
        std::vector<StopCall> catchUp = stopLaunchedLocked(h);
        actions.stops.insert(actions.stops.end(), catchUp.begin(), catchUp.end());
      } else {
        for (const RankLaunch& r : request.ranks) ranks_[r.rank] = RankState::kNotStarted;
        JobResult r =
            baseResult(JobOutcome::kLaunchFailed, contract::kExitLaunchFailed,
                       "hvdrun: launch on " + spec_.hosts[h].host + " failed: " + status.error);
        r.host = spec_.hosts[h].host;
        r.reason = status.error;
        failLocked(std::move(r), &actions);
      }
    }
    perform(std::move(actions));
  }
  Actions actions;
  std::vector<bool> unlaunched;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    launchDone_ = true;
    bool all = true;
    for (size_t h = 0; h < launched_.size(); ++h) {
      if (!launched_[h] && !placement_.hostRanks[h].empty()) all = false;
    }
    if (all) runningSince_ = clock_->now();
    // Hosts a failure kept from launching give their reservation back now, not at lease expiry;
    // launched hosts release theirs as their ranks are reaped.
    for (size_t h = 0; h < reserved_.size(); ++h) {
      if (h < launched_.size() && launched_[h]) reserved_[h] = false;
    }
    unlaunched.swap(reserved_);
    maybeEndLocked(&actions);
  }
  unreserveAll(unlaunched);
  perform(std::move(actions));
}

void JobCoordinator::endNow(JobResult result) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (result_) return;
    // A Ctrl-C that came while describing wins over nothing having started.
    if (cancelled_ && result.outcome != JobOutcome::kAgentUnreachable) {
      result = baseResult(JobOutcome::kCancelled, contract::kExitCancelled,
                          "hvdrun: job " + spec_.jobId + " was cancelled");
    }
    result_ = result;
  }
  if (client_) client_->onJobEnd(result);
}

void JobCoordinator::cancel(std::optional<std::chrono::milliseconds> grace) {
  Actions actions;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (result_) return;
    const auto now = clock_->now();
    const bool escalate = lastCancel_ && now - *lastCancel_ <= kCancelEscalationWindow;
    lastCancel_ = now;
    // A failure seen before the Ctrl-C stays the root cause: the user should learn why it died.
    if (!failure_) cancelled_ = true;
    stopAllLocked(escalate ? kStopKill : kStopGraceful, &actions, grace);
    maybeEndLocked(&actions);
  }
  perform(std::move(actions));
}

void JobCoordinator::tick() {
  Actions actions;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (result_) return;
    if (spec_.timeLimit.count() > 0 && !timedOut_ && !failure_ && !cancelled_ &&
        clock_->now() - startedAt_ >= spec_.timeLimit) {
      // As a cancel, but the job ends as kTimedOut; the stop's consequences are not failures.
      timedOut_ = true;
      stopAllLocked(kStopGraceful, &actions);
      maybeEndLocked(&actions);
    }
  }
  perform(std::move(actions));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (result_ || !launchDone_ || !stopDeadline_ || clock_->now() < *stopDeadline_) return;
    // Agents that neither report exits nor get declared lost would otherwise hold hvdrun forever.
    std::vector<int> unreported;
    for (size_t r = 0; r < ranks_.size(); ++r) {
      if (ranks_[r] != RankState::kRunning) continue;
      unreported.push_back(static_cast<int>(r));
      ranks_[r] = RankState::kLost;
    }
    result_ = endResultLocked();
    result_->unreportedRanks = std::move(unreported);
    actions.ended = result_;
  }
  perform(std::move(actions));
}

bool JobCoordinator::finished() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return result_.has_value();
}

std::optional<JobResult> JobCoordinator::result() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return result_;
}

contract::Placement JobCoordinator::placement() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return placement_;
}

std::vector<RankSnapshot> JobCoordinator::ranks() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<RankSnapshot> out;
  for (size_t r = 0; r < ranks_.size() && r < placement_.ranks.size(); ++r) {
    RankSnapshot s;
    s.rank = static_cast<int>(r);
    s.host = spec_.hosts[placement_.ranks[r].hostIndex].host;
    s.pid = pids_[r];
    s.state = ranks_[r];
    s.exit = exits_[r];
    out.push_back(std::move(s));
  }
  return out;
}

bool JobCoordinator::launched() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!launchDone_ || launched_.empty()) return false;
  for (size_t h = 0; h < launched_.size(); ++h) {
    if (!launched_[h] && !placement_.hostRanks[h].empty()) return false;
  }
  return true;
}

void JobCoordinator::onOutput(int rank, process::Stream stream, std::string_view line) {
  std::string host;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (result_ || rank < 0 || static_cast<size_t>(rank) >= ranks_.size()) return;
    if (stream == process::Stream::kStderr) {
      std::deque<std::string>& tail = stderrTail_[rank];
      if (tail.size() == kStderrTailLines) tail.pop_front();
      tail.emplace_back(line.substr(0, kTailLineBytes));
      if (process::isStoppedNotice(line)) stopped_[rank] = true;
      if (process::isContinuedNotice(line)) stopped_[rank] = false;
    }
    host = spec_.hosts[placement_.ranks[rank].hostIndex].host;
  }
  if (client_) client_->onOutput(rank, host, stream, line);
}

void JobCoordinator::onExit(int rank, const process::ExitStatus& status) {
  Actions actions;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (result_ || rank < 0 || static_cast<size_t>(rank) >= ranks_.size()) return;
    if (ranks_[rank] != RankState::kRunning) return;  // duplicate or after its agent was lost
    ranks_[rank] = RankState::kExited;
    exits_[rank] = status;
    if (!status.success()) {
      const std::string& host = spec_.hosts[placement_.ranks[rank].hostIndex].host;
      std::string summary = describeRankFailure(rank, host, status);
      // A stopped rank fails nobody by itself: the ranks waiting for it time out first, and
      // the first of them is the root cause by the clock. Name the one that stood still.
      std::string stopped;
      for (size_t other = 0; other < stopped_.size(); ++other) {
        if (!stopped_[other] || static_cast<int>(other) == rank) continue;
        stopped += (stopped.empty() ? "" : ", ") + std::to_string(other) + " on " +
                   spec_.hosts[placement_.ranks[other].hostIndex].host;
      }
      if (!stopped.empty()) {
        summary += "; rank(s) " + stopped +
                   " stood stopped at the time (SIGSTOP or the like), and the others wait for "
                   "a stopped rank";
      }
      JobResult r = baseResult(JobOutcome::kRankFailed, status.shellStatus(), std::move(summary));
      r.rank = rank;
      r.host = host;
      r.status = status;
      // Complete: the agent delivers a rank's output before its exit.
      r.stderrTail.assign(stderrTail_[rank].begin(), stderrTail_[rank].end());
      failLocked(std::move(r), &actions);
    }
    maybeEndLocked(&actions);
  }
  perform(std::move(actions));
}

void JobCoordinator::onAgentLost(const std::string& host, const std::string& reason) {
  Actions actions;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (result_ || lost_.empty()) return;
    size_t h = 0;
    while (h < spec_.hosts.size() && agentHosts_[h] != host && spec_.hosts[h].host != host) ++h;
    if (h == spec_.hosts.size() || lost_[h]) return;
    lost_[h] = true;
    bool hadRunning = false;
    for (int rank : placement_.hostRanks[h]) {
      if (ranks_[rank] != RankState::kRunning) continue;
      ranks_[rank] = RankState::kLost;
      hadRunning = true;
    }
    // An agent whose ranks all finished cannot harm the job any more; losing it is no failure.
    if (hadRunning) {
      JobResult r = baseResult(JobOutcome::kAgentLost, contract::kExitAgentLost,
                               "hvdrun: agent on " + spec_.hosts[h].host + " was lost: " + reason);
      r.host = spec_.hosts[h].host;
      r.reason = reason;
      failLocked(std::move(r), &actions);
    }
    maybeEndLocked(&actions);
  }
  perform(std::move(actions));
}

void JobCoordinator::failLocked(JobResult cause, Actions* actions) {
  // Only the first failure is the root cause; after a Ctrl-C, failures are its consequences.
  if (failure_ || cancelled_ || timedOut_) return;
  if (runningSince_) {
    cause.uptime =
        std::chrono::duration_cast<std::chrono::milliseconds>(clock_->now() - *runningSince_);
  }
  failure_ = std::move(cause);
  stopAllLocked(kStopGraceful, actions);
}

void JobCoordinator::stopAllLocked(int level, Actions* actions,
                                   std::optional<std::chrono::milliseconds> graceOverride) {
  if (level <= jobStopLevel_) return;
  jobStopLevel_ = level;
  const auto grace =
      level == kStopKill ? std::chrono::milliseconds(0) : graceOverride.value_or(spec_.grace);
  if (level == kStopGraceful) stopGrace_ = grace;
  const auto deadline = clock_->now() + grace + kStopReportSlack;
  if (!stopDeadline_ || deadline < *stopDeadline_) stopDeadline_ = deadline;
  for (size_t h = 0; h < launched_.size(); ++h) {
    std::vector<StopCall> calls = stopLaunchedLocked(h);
    actions->stops.insert(actions->stops.end(), calls.begin(), calls.end());
  }
}

std::vector<JobCoordinator::StopCall> JobCoordinator::stopLaunchedLocked(size_t host) {
  if (!launched_[host] || lost_[host] || stopLevel_[host] >= jobStopLevel_) return {};
  stopLevel_[host] = jobStopLevel_;
  if (jobStopLevel_ == kStopKill) return {{host, SIGKILL, std::chrono::milliseconds(0)}};
  return {{host, spec_.stopSignal, stopGrace_}};
}

void JobCoordinator::maybeEndLocked(Actions* actions) {
  if (result_ || !launchDone_) return;
  // The job ends when no rank can still produce output: hvdrun returning earlier would leave
  // the user without the output of the ranks being stopped, and ahead of their teardown.
  if (std::count(ranks_.begin(), ranks_.end(), RankState::kRunning) > 0) return;
  result_ = endResultLocked();
  actions->ended = result_;
}

JobResult JobCoordinator::endResultLocked() const {
  if (failure_) return *failure_;
  if (cancelled_) {
    return baseResult(JobOutcome::kCancelled, contract::kExitCancelled,
                      "hvdrun: job " + spec_.jobId + " was cancelled");
  }
  if (timedOut_) {
    const long long ms = spec_.timeLimit.count();
    const std::string limit =
        ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms";
    return baseResult(
        JobOutcome::kTimedOut, contract::kExitTimeout,
        "hvdrun: job " + spec_.jobId + " reached its time limit of " + limit + " and was stopped");
  }
  return baseResult(JobOutcome::kSucceeded, contract::kExitSuccess,
                    "hvdrun: all " + std::to_string(spec_.np) + " ranks exited successfully");
}

void JobCoordinator::perform(Actions actions) {
  {
    HeldRound round(batch_);
    for (const StopCall& call : actions.stops) {
      agents_[call.host]->stop(spec_.launchId(), call.signal, call.grace);
    }
  }
  if (actions.ended && client_) client_->onJobEnd(*actions.ended);
}

}  // namespace hvd::agent::coordinator
