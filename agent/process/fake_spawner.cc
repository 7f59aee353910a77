#include "agent/process/fake_spawner.h"

#include <utility>

namespace hvd::agent::process {

class FakeProcessGroup : public ProcessGroup {
 public:
  explicit FakeProcessGroup(std::shared_ptr<FakeGroupControl> control)
      : control_(std::move(control)) {}

  ~FakeProcessGroup() override {
    std::lock_guard<std::mutex> lock(control_->mu_);
    control_->destroyed_ = true;
  }

  int size() const override {
    std::lock_guard<std::mutex> lock(control_->mu_);
    return static_cast<int>(control_->specs_.size());
  }
  pid_t pgid() const override { return control_->firstPid_; }
  pid_t pid(int rank) const override { return control_->firstPid_ + rank; }

  std::optional<ExitStatus> exitStatus(int rank) const override {
    std::lock_guard<std::mutex> lock(control_->mu_);
    return control_->statuses_.at(rank);
  }

  bool waitAll(std::chrono::milliseconds) override {
    // Nothing runs on its own in the fake: either the test has emitted every exit or not.
    std::lock_guard<std::mutex> lock(control_->mu_);
    for (const auto& s : control_->statuses_) {
      if (!s) return false;
    }
    return true;
  }

 protected:
  void doStop(int signal, std::chrono::milliseconds grace, bool wait) override {
    bool exitOnStop;
    int n;
    {
      std::lock_guard<std::mutex> lock(control_->mu_);
      control_->stops_.push_back({signal, grace, wait});
      exitOnStop = control_->exitOnStop_;
      n = static_cast<int>(control_->specs_.size());
    }
    if (!exitOnStop) return;
    ExitStatus killed;
    killed.signal = signal;
    for (int rank = 0; rank < n; ++rank) control_->emitExit(rank, killed);
  }

 private:
  std::shared_ptr<FakeGroupControl> control_;
};

void FakeGroupControl::emitLine(int rank, Stream which, std::string_view text) {
  OutputSink* sink;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (destroyed_ || sink_ == nullptr) return;
    sink = sink_;
  }
  sink->line(rank, which, text);
}

void FakeGroupControl::emitExit(int rank, ExitStatus status) {
  ExitCallback onExit;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (destroyed_ || statuses_.at(rank)) return;
    statuses_[rank] = status;
    onExit = onExit_;
  }
  // Called without the lock: the callback may stop the group, which records under it.
  if (onExit) onExit(rank, status);
}

std::vector<SpawnSpec> FakeGroupControl::specs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return specs_;
}

std::vector<FakeGroupControl::StopRequest> FakeGroupControl::stopRequests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stops_;
}

bool FakeGroupControl::destroyed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return destroyed_;
}

SpawnResult FakeSpawner::spawn(const std::vector<SpawnSpec>& ranks, OutputSink* sink,
                               ExitCallback onExit) {
  SpawnResult result;
  std::lock_guard<std::mutex> lock(mu_);
  if (!nextError_.empty()) {
    result.error = std::exchange(nextError_, std::string());
    return result;
  }
  if (ranks.empty()) {
    result.error = "no ranks to start";
    return result;
  }
  auto control = std::make_shared<FakeGroupControl>();
  control->specs_ = ranks;
  control->sink_ = sink;
  control->onExit_ = std::move(onExit);
  control->statuses_.resize(ranks.size());
  control->exitOnStop_ = exitOnStop_;
  control->firstPid_ = nextPid_;
  nextPid_ += static_cast<pid_t>(ranks.size());
  groups_.push_back(control);
  result.group = std::make_unique<FakeProcessGroup>(std::move(control));
  return result;
}

void FakeSpawner::failNextSpawn(std::string error) {
  std::lock_guard<std::mutex> lock(mu_);
  nextError_ = std::move(error);
}

void FakeSpawner::setExitOnStop(bool exitOnStop) {
  std::lock_guard<std::mutex> lock(mu_);
  exitOnStop_ = exitOnStop;
}

size_t FakeSpawner::groupCount() const {
  std::lock_guard<std::mutex> lock(mu_);
  return groups_.size();
}

std::shared_ptr<FakeGroupControl> FakeSpawner::group(size_t index) const {
  std::lock_guard<std::mutex> lock(mu_);
  return groups_.at(index);
}

}  // namespace hvd::agent::process
