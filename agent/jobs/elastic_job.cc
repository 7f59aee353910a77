#include "agent/jobs/elastic_job.h"

#include <algorithm>
#include <csignal>
#include <utility>

#include "agent/common/net.h"
#include "agent/node/worker_env.h"
#include "contract/exit_codes.h"
#include "contract/random.h"
#include "hvd/error.hpp"
#include "hvd_support/logging.h"
#include "hvd_support/tcp_store_server.h"

namespace hvd::agent::jobs {

namespace coord = coordinator;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

namespace {

// After a stop, how long past the grace the job waits for exits before it ends anyway.
constexpr milliseconds kStopSlack{10000};

std::string joinHosts(const std::vector<std::string>& hosts) {
  std::string out;
  for (const std::string& h : hosts) out += (out.empty() ? "" : ", ") + h;
  return out;
}

long long seconds(milliseconds d) { return static_cast<long long>(d.count() / 1000); }

}  // namespace

class ElasticJob::LaunchEvents final : public coord::JobEvents {
 public:
  LaunchEvents(ElasticJob* job, std::string host) : job_(job), host_(std::move(host)) {}
  void onOutput(int worker, process::Stream stream, std::string_view line) override {
    job_->client_->onOutput(worker, host_, stream, line);
  }
  void onExit(int worker, const process::ExitStatus& status) override {
    job_->queue(Event{Event::Kind::kExit, worker, status, host_, {}});
  }
  void onAgentLost(const std::string& host, const std::string& reason) override {
    job_->queue(Event{Event::Kind::kAgentLost, 0, {}, host, reason});
  }

 private:
  ElasticJob* const job_;
  const std::string host_;
};

ElasticJob::ElasticJob(coord::JobSpec spec, ElasticSite site,
                       std::unique_ptr<elastic::HostDiscovery> discovery,
                       coord::ClientEvents* client, coord::Clock* clock)
    : spec_(std::move(spec)),
      site_(std::move(site)),
      client_(client),
      clock_(clock),
      blacklist_(spec_.elastic.cooldownSeconds, [clock] { return clock->now(); }),
      resets_(spec_.elastic.resetLimit),
      created_(clock->now()),
      discovery_(std::move(discovery)) {
  // Discovery may take seconds (a script asking a cluster manager): it never holds up exits.
  discoveryThread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(discoveryMutex_);
    while (!discoveryStop_) {
      lock.unlock();
      std::optional<std::vector<elastic::DiscoveredHost>> hosts;
      std::string error;
      try {
        hosts = discovery_->discover();
      } catch (const std::exception& e) {
        error = e.what();
      }
      lock.lock();
      ++discoveryRuns_;
      if (hosts) {
        discovered_ = std::move(hosts);
        discoveryError_.clear();
      } else {
        discoveryError_ = error;
      }
      discoveryWake_.wait_for(lock, spec_.elastic.discoveryInterval,
                              [this] { return discoveryStop_; });
    }
  });
}

ElasticJob::~ElasticJob() {
  {
    std::lock_guard<std::mutex> lock(discoveryMutex_);
    discoveryStop_ = true;
  }
  discoveryWake_.notify_all();
  if (discoveryThread_.joinable()) discoveryThread_.join();
  // The hosts first (their destructors release what still runs, and deliver no event after),
  // then the events they delivered to.
  agents_.clear();
  launchEvents_.clear();
  for (const auto& [round, token] : tokens_) {
    site_.store->removeJob(contract::elasticStoreJob(spec_.jobId, round));
  }
}

void ElasticJob::queue(Event event) {
  {
    std::lock_guard<std::mutex> lock(eventsMutex_);
    events_.push_back(std::move(event));
  }
  if (site_.wake) site_.wake();
}

bool ElasticJob::finished() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return result_.has_value();
}

std::optional<coord::JobResult> ElasticJob::result() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return result_;
}

std::vector<RoundRecord> ElasticJob::rounds() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return history_;
}

void ElasticJob::cancel(std::optional<milliseconds> grace) {
  std::lock_guard<std::mutex> lock(mutex_);
  const steady_clock::time_point now = clock_->now();
  if (cancelRequested_ && lastCancel_ &&
      now - *lastCancel_ < coord::JobCoordinator::kCancelEscalationWindow) {
    killRequested_ = true;
  }
  cancelRequested_ = true;
  if (grace) cancelGrace_ = grace;
  lastCancel_ = now;
}

void ElasticJob::tick() {
  if (finished()) return;
  drainEvents();
  bool cancelNow = false;
  bool killNow = false;
  milliseconds grace = spec_.grace;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    cancelNow = cancelRequested_ && !cancelHandled_;
    if (cancelNow) cancelHandled_ = true;
    killNow = killRequested_;
    killRequested_ = false;
    if (cancelGrace_) grace = *cancelGrace_;
  }
  if (cancelNow && !ending_) {
    coord::JobResult result;
    result.jobId = spec_.jobId;
    result.outcome = coord::JobOutcome::kCancelled;
    result.exitCode = contract::kExitCancelled;
    result.summary = "hvdrun: job " + spec_.jobId + " was cancelled";
    endWith(std::move(result), grace);
  }
  if (killNow) stopAll(SIGKILL, milliseconds(0));
  if (!ending_) {
    pollDiscovery();
    if (!ending_) {
      if (!round_) {
        tryFirstRound();
      } else {
        if (!changePending_) checkResets();
        if (changePending_) {
          tryNextRound();
        } else {
          checkSuccess();
        }
      }
    }
  }
  if (ending_) finishIfStopped();
}

void ElasticJob::drainEvents() {
  std::vector<Event> events;
  {
    std::lock_guard<std::mutex> lock(eventsMutex_);
    events.swap(events_);
  }
  for (const Event& e : events) {
    if (e.kind == Event::Kind::kExit) {
      onExit(e.worker, e.status);
    } else if (e.kind == Event::Kind::kAgentLost) {
      onAgentLost(e.host, e.reason);
    } else {
      onDrain(e.host);
    }
  }
}

void ElasticJob::onExit(int id, const process::ExitStatus& status) {
  auto it = workers_.find(id);
  if (it == workers_.end()) return;
  Worker& w = it->second;
  w.running = false;
  w.exit = status;
  if (w.removed || ending_) return;
  auto log = logging::program("elastic");
  if (status.success()) {
    if (changePending_) {
      // Not the end of the job: the others are between rounds and will go on without it.
      log->warn("worker {} on {} exited 0 while round {} was ending; it leaves the job", id, w.host,
                round_ ? round_->number : 0);
    }
    return;
  }
  int rank = -1;
  if (round_) {
    for (const elastic::WorkerPlace& p : round_->workers) {
      if (p.worker == id) rank = p.rank;
    }
  }
  const std::string cause = "worker " + std::to_string(id) +
                            (rank >= 0 ? " (rank " + std::to_string(rank) + ")" : "") + " on " +
                            w.host + " failed with " + status.describe();
  log->warn("{}; host {} is blacklisted", cause, w.host);
  if (!changePending_ || !lastFailure_) {
    // The first failure of a round change is its root cause; the others follow from it.
    lastFailure_ = cause;
    lastFailedWorker_ = id;
  }
  blacklist_.failed(w.host);
  announce(contract::HostChange::kRemoved, cause);
}

void ElasticJob::onAgentLost(const std::string& host, const std::string& reason) {
  const std::string cause = "the agent on " + host + " was lost: " + reason;
  bool any = false;
  for (auto& [id, w] : workers_) {
    if (w.host != host || !w.running) continue;
    w.running = false;
    w.exit = process::ExitStatus{0, SIGKILL};
    if (!w.removed) any = true;
  }
  if (!any || ending_) return;
  logging::program("elastic")->warn("{}; host {} is blacklisted", cause, host);
  lastFailure_ = cause;
  blacklist_.failed(host);
  announce(contract::HostChange::kRemoved, cause);
}

void ElasticJob::drain(const std::string& host) {
  queue(Event{Event::Kind::kDrain, 0, {}, host, {}});
}

void ElasticJob::onDrain(const std::string& host) {
  if (!drained_.insert(host).second || ending_) return;
  logging::program("elastic")->info("host {} is draining: its workers leave at their next commit",
                                    host);
  bool holds = false;
  if (round_) {
    for (const elastic::WorkerPlace& p : round_->workers) holds = holds || p.host == host;
  }
  if (holds) announce(contract::HostChange::kRemoved, "host " + host + " is draining");
}

std::vector<elastic::DiscoveredHost> ElasticJob::usableHosts() const {
  std::vector<elastic::DiscoveredHost> out;
  if (!hosts_) return out;
  for (const elastic::DiscoveredHost& h : *hosts_) {
    if (h.slots > 0 && !blacklist_.blocked(h.host) && drained_.count(h.host) == 0) {
      out.push_back(h);
    }
  }
  return out;
}

void ElasticJob::pollDiscovery() {
  std::string error;
  {
    std::lock_guard<std::mutex> lock(discoveryMutex_);
    if (discoveryRuns_ == discoverySeen_) return;
    discoverySeen_ = discoveryRuns_;
    if (!discovered_) {
      fail("host discovery failed: " + discoveryError_);
      return;
    }
    error = discoveryError_;
    hosts_ = discovered_;
  }
  if (!error.empty()) {
    logging::program("elastic")->warn("host discovery failed (the last hosts found stay): {}",
                                      error);
  }
  if (!round_ || changePending_) return;
  const std::vector<elastic::DiscoveredHost> usable = usableHosts();
  std::map<std::string, int> slots;
  for (const elastic::DiscoveredHost& h : usable) slots[h.host] = h.slots;
  std::map<std::string, int> held;
  for (const elastic::WorkerPlace& p : round_->workers) ++held[p.host];
  int bits = 0;
  std::vector<std::string> gone;
  std::vector<std::string> added;
  for (const auto& [host, count] : held) {
    auto it = slots.find(host);
    if (it == slots.end() || it->second < count) {
      bits |= static_cast<int>(contract::HostChange::kRemoved);
      gone.push_back(host);
    }
  }
  int total = 0;
  for (const auto& [host, count] : slots) {
    auto it = held.find(host);
    const int have = it == held.end() ? 0 : it->second;
    // Growth only into slots that other jobs do not hold: a busy host would otherwise end a
    // round at every poll without gaining a worker.
    if (count > have && !canReserve(host, count - have)) {
      total += have;
      continue;
    }
    total += count;
    if (count > have) added.push_back(host);
  }
  const int maxNp = spec_.elastic.maxNp;
  const int reachable = maxNp > 0 ? std::min(total, maxNp) : total;
  if (!added.empty() && reachable > round_->slots()) {
    bits |= static_cast<int>(contract::HostChange::kAdded);
  } else {
    added.clear();
  }
  if (bits == 0) return;
  std::string cause;
  if (!gone.empty()) cause = "hosts left: " + joinHosts(gone);
  if (!added.empty())
    cause += (cause.empty() ? "" : "; ") + std::string("hosts added: ") + joinHosts(added);
  announce(static_cast<contract::HostChange>(bits), cause);
}

void ElasticJob::announce(contract::HostChange change, const std::string& cause) {
  if (!round_) return;
  if (!changePending_) {
    changePending_ = true;
    changeSince_ = clock_->now();
    changeCause_ = cause;
  }
  const contract::ElasticNotice notice{round_->number + 1, change};
  site_.store->set(contract::elasticStoreJob(spec_.jobId, round_->number), contract::kNoticeKey,
                   contract::formatNotice(notice));
  announced_ = true;
}

void ElasticJob::tryFirstRound() {
  if (!hosts_) return;  // the first discovery has not answered yet
  const std::vector<elastic::DiscoveredHost> usable = usableHosts();
  int total = 0;
  for (const elastic::DiscoveredHost& h : usable) total += h.slots;
  const int need = std::max(spec_.np, spec_.elastic.minNp);
  if (total < need) {
    if (clock_->now() - created_ >= spec_.elastic.timeout) {
      fail("Timed out waiting for minimum number of slots to become available: " +
           std::to_string(need) + " needed to start, " + std::to_string(total) +
           " available after the elastic timeout of " +
           std::to_string(seconds(spec_.elastic.timeout)) + " s");
    }
    return;
  }
  Grants grants;
  elastic::Round plan = planReserved(nullptr, {}, usable, &grants);
  if (plan.slots() < need) {
    // Slots the ledgers hold for other jobs: wait for them as a job start waits in the queue.
    releaseGrants(plan, grants);
    if (clock_->now() - created_ >= spec_.elastic.timeout) {
      fail("Timed out waiting for minimum number of slots to become available: " +
           std::to_string(need) + " needed to start, " + std::to_string(plan.slots()) +
           " free of other jobs after the elastic timeout of " +
           std::to_string(seconds(spec_.elastic.timeout)) + " s");
    }
    return;
  }
  startRound(std::move(plan), "start", grants);
}

void ElasticJob::tryNextRound() {
  const std::string ns = contract::elasticStoreJob(spec_.jobId, round_->number);
  // A worker sets its ready key before it adds to the count, so the keys are read only when
  // the count moved: every tick of a long wait costs one store read, not one per worker.
  const std::optional<std::string> count = site_.store->value(ns, contract::kReadyCountKey);
  const bool countMoved = count && *count != readyCountSeen_;
  if (countMoved) readyCountSeen_ = *count;
  bool settled = true;
  for (const elastic::WorkerPlace& p : round_->workers) {
    const Worker& w = workers_.at(p.worker);
    if (!w.running || w.removed || ready_.count(p.worker) != 0) continue;
    if (countMoved && site_.store->value(ns, contract::readyKey(p.worker))) {
      ready_.insert(p.worker);
    } else {
      settled = false;
    }
  }
  const steady_clock::time_point now = clock_->now();
  const bool timedOut = now - changeSince_ >= spec_.elastic.timeout;
  if (!settled && !timedOut) return;
  std::set<int> alive;
  for (const elastic::WorkerPlace& p : round_->workers) {
    const Worker& w = workers_.at(p.worker);
    if (w.running && !w.removed && ready_.count(p.worker) != 0) alive.insert(p.worker);
  }
  if (!settled) {
    // Workers that never asked for their place: left out (they are told they were removed and
    // stopped with the others at the end).
    logging::program("elastic")->warn(
        "round {}: {} worker(s) did not come for their next place within the elastic timeout",
        round_->number, round_->workers.size() - alive.size());
  }
  if (alive.empty()) {
    fail(lastFailure_ ? std::string(contract::kWorkersFailedMessage) + " (" + *lastFailure_ + ")"
                      : "every worker of round " + std::to_string(round_->number) +
                            " left the job (" + changeCause_ + ")",
         lastFailedWorker_);
    return;
  }
  Grants grants;
  elastic::Round plan = planReserved(&*round_, alive, usableHosts(), &grants);
  if (plan.survivors() == 0) {
    releaseGrants(plan, grants);
    // Failures took every host of the round out (Horovod's words for a job whose processes
    // failed), or discovery dropped them all (its words for a round with no state to carry).
    bool allBlacklisted = true;
    for (const std::string& host : round_->hosts) {
      if (!blacklist_.blocked(host)) allBlacklisted = false;
    }
    fail(std::string(allBlacklisted ? contract::kWorkersFailedMessage
                                    : elastic::kNoSurvivorsMessage) +
             " (" + changeCause_ + ")",
         lastFailedWorker_);
    return;
  }
  if (plan.slots() < spec_.elastic.minNp) {
    releaseGrants(plan, grants);
    if (timedOut) {
      fail("Timed out waiting for minimum number of slots to become available: --min-np " +
           std::to_string(spec_.elastic.minNp) + ", " + std::to_string(plan.slots()) +
           " available after the elastic timeout of " +
           std::to_string(seconds(spec_.elastic.timeout)) + " s (" + changeCause_ + ")");
    }
    return;
  }
  if (resets_.exceeded()) {
    releaseGrants(plan, grants);
    fail(resets_.message() + " (" + changeCause_ + ")", lastFailedWorker_);
    return;
  }
  resets_.recordReset();
  startRound(std::move(plan), changeCause_, grants);
}

bool ElasticJob::canReserve(const std::string& host, int workers) {
  coord::NodeAgent* agent = agentFor(host);
  if (agent == nullptr) return false;
  ledger::Request probe;
  probe.key = spec_.jobId + ".probe." + std::to_string(hostIndex(host));
  probe.job = probe.key;
  probe.ranks = workers;
  probe.gpusPerRank = std::max(1, spec_.gpusPerRank);
  probe.share = spec_.oversubscribe;
  probe.lease = spec_.reserveLease;
  const coord::ReserveResult result = agent->reserve(probe);
  if (result.ok() && result.accounted) agent->unreserve(probe.key);
  return result.ok() && result.grant.verdict == ledger::Verdict::kGranted;
}

std::string ElasticJob::launchIdFor(int round, const std::string& host) {
  return spec_.jobId + ".e" + std::to_string(round) + "." + std::to_string(hostIndex(host));
}

elastic::Round ElasticJob::planReserved(const elastic::Round* previous, const std::set<int>& alive,
                                        std::vector<elastic::DiscoveredHost> usable,
                                        Grants* grants) {
  auto log = logging::program("elastic");
  while (true) {
    elastic::Round plan =
        elastic::planRound(previous, alive, usable, spec_.elastic.maxNp, &nextWorker_);
    grants->clear();
    std::vector<std::string> refused;
    for (const std::string& host : plan.hosts) {
      int spawned = 0;
      for (const elastic::WorkerPlace& p : plan.workers) {
        if (p.host == host && p.spawned) ++spawned;
      }
      if (spawned == 0) continue;
      coord::NodeAgent* agent = agentFor(host);
      if (agent == nullptr) continue;  // the launch says why nothing reaches it
      // The new workers' share of the host, held in its ledger as a job start's is, under a
      // key of their own: the survivors' holdings on the host stay theirs.
      ledger::Request request;
      request.key = launchIdFor(plan.number, host);
      request.job = request.key;
      request.ranks = spawned;
      request.gpusPerRank = std::max(1, spec_.gpusPerRank);
      request.share = spec_.oversubscribe;
      request.lease = spec_.reserveLease;
      const coord::ReserveResult result = agent->reserve(request);
      if (!result.ok() || result.grant.verdict != ledger::Verdict::kGranted) {
        log->warn("round {}: {} new worker(s) on {} do not start now: {}", plan.number, spawned,
                  host, result.ok() ? result.grant.reason : result.error.describeUnreachable());
        refused.push_back(host);
        continue;
      }
      (*grants)[host] =
          HostGrant{result.accounted, result.accounted ? result.grant.gpus : std::vector<int>()};
    }
    if (refused.empty()) return plan;
    // Those hosts keep their survivors and get no new workers this round: plan again.
    releaseGrants(plan, *grants);
    for (elastic::DiscoveredHost& h : usable) {
      if (std::find(refused.begin(), refused.end(), h.host) == refused.end()) continue;
      int kept = 0;
      for (const elastic::WorkerPlace& p : plan.workers) {
        if (p.host == h.host && !p.spawned) ++kept;
      }
      h.slots = kept;
    }
  }
}

void ElasticJob::releaseGrants(const elastic::Round& plan, const Grants& grants) {
  for (const auto& [host, grant] : grants) {
    if (!grant.accounted) continue;
    if (coord::NodeAgent* agent = agentFor(host)) agent->unreserve(launchIdFor(plan.number, host));
  }
}

void ElasticJob::checkResets() {
  // A worker that reset while nothing the leader saw changed (its op timed out, say) waits for
  // a round like the others: the round ends as if a change had been announced.
  const std::optional<std::string> count = site_.store->value(
      contract::elasticStoreJob(spec_.jobId, round_->number), contract::kReadyCountKey);
  if (!count || *count == "0") return;
  announce(contract::HostChange::kNone,
           "a worker of round " + std::to_string(round_->number) + " reset (an op of it failed)");
}

void ElasticJob::checkSuccess() {
  bool allExited = true;
  bool anyFailed = false;
  for (const elastic::WorkerPlace& p : round_->workers) {
    const Worker& w = workers_.at(p.worker);
    if (w.running) allExited = false;
    if (w.exit && !w.exit->success()) anyFailed = true;
  }
  if (allExited && !anyFailed) succeed();
}

void ElasticJob::startRound(elastic::Round plan, std::string cause, const Grants& grants) {
  auto log = logging::program("elastic");
  const int number = plan.number;
  const std::string token = contract::randomHex(32);
  site_.store->addJob(contract::elasticStoreJob(spec_.jobId, number), token);
  tokens_[number] = token;
  const auto wallNow = std::chrono::system_clock::now();
  if (round_) {
    const std::string previous = contract::elasticStoreJob(spec_.jobId, round_->number);
    for (const elastic::WorkerPlace& p : plan.workers) {
      if (p.spawned) continue;
      contract::ElasticAssignment a;
      a.round = number;
      a.token = token;
      a.rank = p.rank;
      a.size = plan.slots();
      a.localRank = p.localRank;
      a.localSize = p.localSize;
      a.crossRank = p.crossRank;
      a.crossSize = p.crossSize;
      a.host = p.host;
      site_.store->set(previous, contract::assignKey(p.worker), contract::formatAssignment(a));
      workers_.at(p.worker).round = number;
    }
    for (int id : plan.removed) {
      Worker& w = workers_.at(id);
      contract::ElasticAssignment a;
      a.round = number;
      a.removed = true;
      a.reason = blacklist_.blocked(w.host)
                     ? "its host " + w.host + " was blacklisted after a failure there"
                 : drained_.count(w.host) != 0
                     ? "its host " + w.host + " is draining"
                     : "its host " + w.host + " left the job or has fewer slots now";
      site_.store->set(previous, contract::assignKey(id), contract::formatAssignment(a));
      w.removed = true;
    }
    // Ready workers the plan neither kept nor removed cannot exist; those that never came are
    // told they were removed, so that a late one does not wait for ever.
    for (const elastic::WorkerPlace& p : round_->workers) {
      Worker& w = workers_.at(p.worker);
      if (w.round == number || w.removed || !w.running) continue;
      contract::ElasticAssignment a;
      a.round = number;
      a.removed = true;
      a.reason = "it did not ask for its place in round " + std::to_string(number) +
                 " within the elastic timeout";
      site_.store->set(previous, contract::assignKey(p.worker), contract::formatAssignment(a));
      w.removed = true;
    }
    // Only the round before the current one is still read (by the workers removed from it).
    if (auto old = tokens_.find(round_->number - 1); old != tokens_.end()) {
      site_.store->removeJob(contract::elasticStoreJob(spec_.jobId, old->first));
      tokens_.erase(old);
    }
  }
  round_ = plan;
  lastFailure_.reset();
  lastFailedWorker_.reset();
  changePending_ = false;
  announced_ = false;
  ready_.clear();
  readyCountSeen_.clear();
  changeCause_.clear();
  RoundRecord record;
  record.number = number;
  std::map<std::string, int> perHost;
  for (const elastic::WorkerPlace& p : plan.workers) ++perHost[p.host];
  for (const std::string& h : plan.hosts)
    record.hosts.push_back(h + ":" + std::to_string(perHost[h]));
  record.size = plan.slots();
  record.start = wallNow;
  record.cause = cause;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!history_.empty()) history_.back().end = wallNow;
    history_.push_back(record);
  }
  log->info("round {}: {} rank(s) on {} ({})", number, plan.slots(), joinHosts(record.hosts),
            cause);
  spawn(plan, grants);
}

int ElasticJob::hostIndex(const std::string& host) {
  auto it = std::find(hostOrder_.begin(), hostOrder_.end(), host);
  if (it != hostOrder_.end()) return static_cast<int>(it - hostOrder_.begin());
  hostOrder_.push_back(host);
  return static_cast<int>(hostOrder_.size()) - 1;
}

coord::NodeAgent* ElasticJob::agentFor(const std::string& host) {
  auto it = agents_.find(host);
  if (it == agents_.end()) it = agents_.emplace(host, site_.connect(host)).first;
  return it->second.get();
}

void ElasticJob::spawn(const elastic::Round& plan, const Grants& grants) {
  const std::string storeAddr = common::joinHostPort(site_.storeHost, site_.store->port());
  const std::string& token = tokens_.at(plan.number);
  for (size_t h = 0; h < plan.hosts.size(); ++h) {
    const std::string& host = plan.hosts[h];
    coord::LaunchRequest request;
    request.jobId = launchIdFor(plan.number, host);
    const auto granted = grants.find(host);
    const HostGrant grant = granted == grants.end() ? HostGrant{} : granted->second;
    request.reserved = grant.accounted;
    int launchSize = 0;
    for (const elastic::WorkerPlace& p : plan.workers) {
      if (p.host == host && p.spawned) ++launchSize;
    }
    int launchIndex = 0;
    request.stopSignal = spec_.stopSignal;
    request.grace = spec_.grace;
    std::vector<int> ids;
    std::string invalid;
    for (const elastic::WorkerPlace& p : plan.workers) {
      if (p.host != host || !p.spawned) continue;
      node::WorkerEnvInput in;
      in.forwarded = spec_.env;
      in.placement = contract::RankPlacement{p.rank,      static_cast<int>(h), p.localRank,
                                             p.localSize, p.crossRank,         p.crossSize};
      in.size = plan.slots();
      in.groupRank = static_cast<int>(h);
      in.hostName = host;
      in.jobId = spec_.jobId;
      in.storeAddr = storeAddr;
      in.storeToken = token;
      in.masterAddr = plan.hosts[0];
      in.masterPort = spec_.masterPort;
      in.elastic = node::WorkerEnvInput::Elastic{plan.number, p.worker, spec_.elastic.timeout};
      // The GPUs the ledger granted this launch, shared by its new workers alone (the
      // survivors on the host keep theirs).
      in.hostGpus = grant.gpus;
      in.gpusPerRank = spec_.gpusPerRank;
      in.gpuBind = spec_.gpuBind;
      in.oversubscribe = spec_.oversubscribe;
      in.gpuSlot = std::make_pair(launchIndex++, launchSize);
      coord::RankLaunch rank;
      rank.rank = p.worker;
      rank.spec.argv = spec_.argv;
      rank.spec.cwd = spec_.cwd;
      try {
        rank.spec.env = node::buildWorkerEnvironment(in);
      } catch (const std::exception& e) {
        invalid = e.what();
      }
      request.ranks.push_back(std::move(rank));
      ids.push_back(p.worker);
      workers_[p.worker] = Worker{p.worker, host, request.jobId, plan.number, true, false, {}};
    }
    if (ids.empty()) continue;
    coord::LaunchStatus status;
    coord::NodeAgent* agent = invalid.empty() ? agentFor(host) : nullptr;
    if (agent != nullptr) {
      launchEvents_.push_back(std::make_unique<LaunchEvents>(this, host));
      status = agent->launch(request, launchEvents_.back().get());
    } else if (invalid.empty()) {
      status = coord::LaunchStatus("no agent reaches host '" + host +
                                   "' (embedded hvdrun runs elastic jobs on the names of this "
                                   "machine; other hosts need their hvdagent)");
    } else {
      status = coord::LaunchStatus(invalid);
    }
    if (!status.ok()) {
      if (grant.accounted && agent != nullptr) agent->unreserve(request.jobId);
      const std::string cause = "starting " + std::to_string(ids.size()) + " worker(s) on " + host +
                                " failed: " + status.error;
      logging::program("elastic")->warn("{}; host {} is blacklisted", cause, host);
      for (int id : ids) {
        workers_.at(id).running = false;
        workers_.at(id).exit = process::ExitStatus{127, 0};
      }
      lastFailure_ = cause;
      blacklist_.failed(host);
      announce(contract::HostChange::kRemoved, cause);
    }
  }
}

void ElasticJob::fail(const std::string& message, std::optional<int> worker) {
  if (ending_) return;
  coord::JobResult result;
  result.jobId = spec_.jobId;
  result.outcome = coord::JobOutcome::kRankFailed;
  result.exitCode = 1;
  if (worker) {
    const Worker& w = workers_.at(*worker);
    result.host = w.host;
    if (w.exit && !w.exit->success()) {
      result.status = w.exit;
      result.exitCode = w.exit->shellStatus();
    }
  }
  result.summary = "hvdrun: " + message;
  logging::program("elastic")->error("{}", message);
  endWith(std::move(result), spec_.grace);
}

void ElasticJob::succeed() {
  coord::JobResult result;
  result.jobId = spec_.jobId;
  result.outcome = coord::JobOutcome::kSucceeded;
  result.exitCode = 0;
  result.summary = "hvdrun: job " + spec_.jobId + " succeeded";
  // Workers removed earlier that are still around are stopped with the job.
  endWith(std::move(result), spec_.grace);
}

void ElasticJob::endWith(coord::JobResult result, milliseconds grace) {
  ending_ = std::move(result);
  stopDeadline_ = clock_->now() + grace + kStopSlack;
  stopAll(spec_.stopSignal, grace);
}

void ElasticJob::stopAll(int signal, milliseconds grace) {
  std::map<std::string, std::string> launches;  // launch id -> host
  for (const auto& [id, w] : workers_) {
    if (w.running) launches[w.launchId] = w.host;
  }
  for (const auto& [launch, host] : launches) {
    auto it = agents_.find(host);
    if (it != agents_.end() && it->second) it->second->stop(launch, signal, grace);
  }
}

bool ElasticJob::anyRunning() const {
  for (const auto& [id, w] : workers_) {
    if (w.running) return true;
  }
  return false;
}

void ElasticJob::finishIfStopped() {
  if (anyRunning() && stopDeadline_ && clock_->now() < *stopDeadline_) return;
  coord::JobResult result = *ending_;
  for (const auto& [id, w] : workers_) {
    if (w.running) result.unreportedRanks.push_back(id);
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!history_.empty() && !history_.back().end) {
      history_.back().end = std::chrono::system_clock::now();
    }
    result_ = result;
  }
  client_->onJobEnd(result);
}

}  // namespace hvd::agent::jobs
