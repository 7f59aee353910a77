#include "agent/coordinator/fake_node_agent.h"

#include <utility>

namespace hvd::agent::coordinator {

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
  launches_.push_back(request);
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
