#include "agent/coordinator/fake_node_agent.h"

#include <exception>
#include <utility>

#include "agent/coordinator/rank_environments.h"

namespace hvd::agent::coordinator {

HeldAnswers::HeldAnswers(size_t expected, std::chrono::milliseconds patience)
    : expected_(expected) {
  timer_ = std::thread([this, patience] {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait_for(lock, patience, [this] { return released_ || closing_; });
    if (!released_) release(lock);
  });
}

HeldAnswers::~HeldAnswers() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closing_ = true;
  }
  changed_.notify_all();
  timer_.join();
}

void HeldAnswers::hold(const std::string& host, std::function<void()> answer) {
  std::unique_lock<std::mutex> lock(mutex_);
  log_.push_back("ask " + host);
  held_.emplace_back(host, std::move(answer));
  if (released_ || ++asked_ == expected_) release(lock);
}

// Gives the held answers without the lock: an answer may be what the caller waits for.
void HeldAnswers::release(std::unique_lock<std::mutex>& lock) {
  released_ = true;
  changed_.notify_all();
  while (!held_.empty()) {
    auto [host, answer] = std::move(held_.front());
    held_.erase(held_.begin());
    log_.push_back("answer " + host);
    lock.unlock();
    answer();
    lock.lock();
  }
}

std::vector<std::string> HeldAnswers::log() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return log_;
}

FakeNodeAgent::FakeNodeAgent(std::string host, std::string address)
    : host_(std::move(host)), address_(address.empty() ? host_ + ":7070" : std::move(address)) {
  description_.hostname = host_;
  description_.addresses = {address_.substr(0, address_.rfind(':'))};
  description_.cpus = 4;
  description_.version = "fake";
}

void FakeNodeAgent::setGpuCount(int count) {
  std::lock_guard<std::mutex> lock(mutex_);
  description_.gpus.clear();
  for (int i = 0; i < count; ++i) {
    node::GpuInfo gpu;
    gpu.index = i;
    gpu.uuid = "GPU-fake-" + std::to_string(i);
    gpu.name = "Fake GPU " + std::to_string(i);
    gpu.memoryBytes = 16ull << 30;
    description_.gpus.push_back(gpu);
  }
}

void FakeNodeAgent::setDescription(NodeDescription description) {
  std::lock_guard<std::mutex> lock(mutex_);
  description_ = std::move(description);
}

void FakeNodeAgent::failDescribe(std::string reason, bool authentication) {
  std::lock_guard<std::mutex> lock(mutex_);
  describeError_ = std::move(reason);
  describeAuthFailed_ = authentication;
}

void FakeNodeAgent::failLaunch(std::string reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  launchError_ = std::move(reason);
}

void FakeNodeAgent::useLedger(ledger::ResourceLedger* ledger) {
  std::lock_guard<std::mutex> lock(mutex_);
  ledger_ = ledger;
}

void FakeNodeAgent::failReserve(std::string reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  reserveError_ = std::move(reason);
}

void FakeNodeAgent::holdDescribes(HeldAnswers* held) {
  std::lock_guard<std::mutex> lock(mutex_);
  heldDescribes_ = held;
}

void FakeNodeAgent::holdReserves(HeldAnswers* held) {
  std::lock_guard<std::mutex> lock(mutex_);
  heldReserves_ = held;
}

void FakeNodeAgent::describeAsync(std::function<void(DescribeResult)> done) {
  HeldAnswers* held = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    held = heldDescribes_;
  }
  if (held == nullptr) return done(describe());
  DescribeResult result = describe();
  held->hold(host_, [done = std::move(done), result = std::move(result)] { done(result); });
}

void FakeNodeAgent::reserveAsync(const ledger::Request& request,
                                 std::function<void(ReserveResult)> done) {
  HeldAnswers* held = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    held = heldReserves_;
  }
  if (held == nullptr) return done(reserve(request));
  ReserveResult result = reserve(request);
  held->hold(host_, [done = std::move(done), result = std::move(result)] { done(result); });
}

std::vector<ledger::Request> FakeNodeAgent::reserves() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return reserves_;
}

std::vector<std::string> FakeNodeAgent::unreserves() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return unreserves_;
}

ReserveResult FakeNodeAgent::reserve(const ledger::Request& request) {
  ledger::ResourceLedger* ledger = nullptr;
  ReserveResult result;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    reserves_.push_back(request);
    if (reserveError_) {
      result.error = {host_, address_, *reserveError_};
      return result;
    }
    ledger = ledger_;
  }
  if (ledger == nullptr) {
    result.accounted = false;
    return result;
  }
  result.grant = ledger->reserve(request);
  return result;
}

void FakeNodeAgent::unreserve(const std::string& key) {
  ledger::ResourceLedger* ledger = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    unreserves_.push_back(key);
    ledger = ledger_;
  }
  if (ledger != nullptr) ledger->release(key);
}

std::vector<LaunchRequest> FakeNodeAgent::launches() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return launches_;
}

std::vector<FakeNodeAgent::StopCall> FakeNodeAgent::stops() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stops_;
}

int FakeNodeAgent::describeCalls() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return describeCalls_;
}

JobEvents* FakeNodeAgent::events() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_;
}

// Events are delivered without holding mutex_: the coordinator may call stop() back from them.
bool FakeNodeAgent::emitOutput(int rank, process::Stream stream, const std::string& line) {
  JobEvents* sink = events();
  if (!sink) return false;
  sink->onOutput(rank, stream, line);
  return true;
}

bool FakeNodeAgent::emitExit(int rank, process::ExitStatus status) {
  JobEvents* sink = events();
  if (!sink) return false;
  sink->onExit(rank, status);
  return true;
}

bool FakeNodeAgent::loseAgent(const std::string& reason) {
  JobEvents* sink = events();
  if (!sink) return false;
  sink->onAgentLost(host_, reason);
  return true;
}

DescribeResult FakeNodeAgent::describe() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++describeCalls_;
  DescribeResult result;
  if (describeError_) {
    result.error = {host_, address_, *describeError_, describeAuthFailed_};
  } else {
    result.description = description_;
  }
  return result;
}

LaunchStatus FakeNodeAgent::launch(const LaunchRequest& request, JobEvents* events) {
  std::lock_guard<std::mutex> lock(mutex_);
  // As a real agent, it builds its ranks' environments from the host's template; the launch
  // is recorded with them.
  LaunchRequest built = request;
  try {
    buildRankEnvironments(&built);
  } catch (const std::exception& e) {
    launches_.push_back(request);
    return {e.what()};
  }
  launches_.push_back(std::move(built));
  if (launchError_) return {*launchError_};
  // As a real agent: a launch on a reservation that is gone does not start.
  if (request.reserved && ledger_ != nullptr && !ledger_->bind(request.jobId)) {
    return {"no reservation of job " + request.jobId + " on " + host_ + " (its lease expired)"};
  }
  events_ = events;
  LaunchStatus status;
  for (const RankLaunch& r : request.ranks) status.pids.emplace_back(r.rank, kFakePidBase + r.rank);
  return status;
}

void FakeNodeAgent::launchInTwoHalves(std::vector<std::string>* calls) {
  std::lock_guard<std::mutex> lock(mutex_);
  twoHalves_ = true;
  calls_ = calls;
}

bool FakeNodeAgent::beginLaunch(const LaunchRequest& request, JobEvents* events,
                                std::string* error) {
  (void)error;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!twoHalves_) return false;
    if (calls_ != nullptr) calls_->push_back("begin " + host_);
  }
  LaunchStatus status = launch(request, events);
  std::lock_guard<std::mutex> lock(mutex_);
  begun_ = std::move(status);
  return true;
}

LaunchStatus FakeNodeAgent::awaitLaunch(const LaunchRequest& request, JobEvents* events) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (twoHalves_ && begun_) {
      if (calls_ != nullptr) calls_->push_back("await " + host_);
      LaunchStatus status = std::move(*begun_);
      begun_.reset();
      return status;
    }
  }
  return launch(request, events);
}

void FakeNodeAgent::stop(const std::string& jobId, int signal, std::chrono::milliseconds grace) {
  std::lock_guard<std::mutex> lock(mutex_);
  stops_.push_back({jobId, signal, grace});
}

}  // namespace hvd::agent::coordinator
