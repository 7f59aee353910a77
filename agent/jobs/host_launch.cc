#include "agent/jobs/host_launch.h"

#include <atomic>
#include <map>
#include <thread>
#include <utility>

#include "agent/common/thread_guard.h"
#include "agent/coordinator/call_batch.h"
#include "agent/jobs/event_queue.h"
#include "hvd/error.hpp"
#include "hvd_support/logging.h"

namespace hvd::agent::jobs {
namespace {

using coordinator::LaunchRequest;
using coordinator::LaunchStatus;
using Kind = LaunchEvent::Kind;

// The ranks' events, from the supervisors' and the relayed hosts' threads, into the queue the
// caller's thread writes from; output within the queue's budget (event_queue.h).
class QueuedEvents final : public coordinator::JobEvents {
 public:
  explicit QueuedEvents(EventQueue<LaunchEvent>* queue) : queue_(queue) {}

  void onOutput(int rank, process::Stream stream, std::string_view line) override {
    size_t dropped = 0;
    if (!budget_.admit(rank, line.size(), queue_->queuedBytes(), &dropped)) return;
    if (dropped > 0) pushOutput(rank, process::Stream::kStderr, OutputBudget::notice(dropped));
    pushOutput(rank, stream, line);
  }
  void onExit(int rank, const process::ExitStatus& status) override {
    if (const size_t dropped = budget_.takeDropped(rank); dropped > 0) {
      pushOutput(rank, process::Stream::kStderr, OutputBudget::notice(dropped));
    }
    LaunchEvent event;
    event.kind = Kind::kExit;
    event.rank = rank;
    event.exit = status;
    queue_->push(std::move(event));
  }
  // A relayed host's agent (never the local one).
  void onAgentLost(const std::string& host, const std::string& reason) override {
    LaunchEvent event;
    event.kind = Kind::kHostLost;
    event.host = host;
    event.reason = reason;
    queue_->push(std::move(event));
  }
  // A relayed host's agent is stopping gracefully.
  void onHostDraining(const std::string& host) override {
    LaunchEvent event;
    event.kind = Kind::kDraining;
    event.host = host;
    queue_->push(std::move(event));
  }

 private:
  void pushOutput(int rank, process::Stream stream, std::string_view line) {
    LaunchEvent event;
    event.kind = Kind::kOutput;
    event.rank = rank;
    event.stream = stream;
    event.line.assign(line.data(), line.size());
    queue_->push(std::move(event), line.size());
  }

  EventQueue<LaunchEvent>* const queue_;
  OutputBudget budget_;
};

LaunchEvent hostLaunched(const std::string& host, LaunchStatus result) {
  LaunchEvent event;
  event.kind = Kind::kHostLaunched;
  event.host = host;
  event.result = std::move(result);
  return event;
}

// Every rank whose end the caller is still owed, and the host it runs on ("" for this one).
class OwedRanks {
 public:
  OwedRanks(const LaunchRequest& local, const std::vector<RelayedLaunch>& relayed) {
    for (const coordinator::RankLaunch& r : local.ranks) hosts_[r.rank] = "";
    for (const RelayedLaunch& l : relayed) {
      for (const coordinator::RankLaunch& r : l.request.ranks) hosts_[r.rank] = l.host;
    }
  }
  // A rank's exit settles it; a relayed host that failed to launch or was lost, all of its own.
  void settle(const LaunchEvent& event) {
    if (event.kind == Kind::kExit) hosts_.erase(event.rank);
    const bool hostGone =
        (event.kind == Kind::kHostLaunched && !event.result.ok()) || event.kind == Kind::kHostLost;
    if (!hostGone) return;
    for (auto it = hosts_.begin(); it != hosts_.end();) {
      it = it->second == event.host ? hosts_.erase(it) : std::next(it);
    }
  }
  bool empty() const { return hosts_.empty(); }

 private:
  std::map<int, std::string> hosts_;
};

}  // namespace

HostLaunch::HostLaunch(LocalHost* local, LaunchRequest request, std::vector<RelayedLaunch> relayed,
                       std::unique_ptr<relay::TreeHosts> tree)
    : local_(local),
      request_(std::move(request)),
      relayed_(std::move(relayed)),
      tree_(std::move(tree)) {
  if (request_.jobId.empty()) throw InvalidArgumentError("the launch request has no job id");
  if (request_.ranks.empty()) throw InvalidArgumentError("the launch request has no ranks");
  const size_t hosts = tree_ ? tree_->size() : 0;
  if (relayed_.size() != hosts) {
    throw InvalidArgumentError("the launch request relays " + std::to_string(relayed_.size()) +
                               " launches for " + std::to_string(hosts) + " hosts");
  }
  for (const RelayedLaunch& l : relayed_) {
    if (l.request.jobId != request_.jobId || l.request.ranks.empty()) {
      throw InvalidArgumentError("the relayed launch for " + l.host + " is not one of job " +
                                 request_.jobId + " or has no ranks");
    }
  }
}

std::string HostLaunch::command() const {
  const std::vector<std::string>& argv = request_.ranks.front().spec.argv;
  return argv.empty() ? "" : argv.front();
}

HostLaunch::Outcome HostLaunch::run(LaunchCaller& caller, const std::string& callerName) {
  const std::string& jobId = request_.jobId;
  EventQueue<LaunchEvent> queue;
  QueuedEvents events(&queue);
  const LaunchStatus status = local_->start(request_, &events);
  if (!status.ok()) {
    logging::program("service")->warn("job {}: launch failed: {}", jobId, status.error);
    caller.launched(status);
    // Nothing was relayed: the caller learns why for each host.
    for (const RelayedLaunch& l : relayed_) {
      caller.write(hostLaunched(
          l.host, LaunchStatus("not launched: the launch on the relaying agent failed first (" +
                               status.error + ")")));
    }
    return Outcome::kNotStarted;
  }
  bool callerGone = !caller.launched(status);
  // From here on the job runs: whatever happens, it is stopped and released before returning.
  struct Release {
    LocalHost* local;
    const std::string& id;
    ~Release() { local->release(id); }
  } release{local_, jobId};

  // The subtree: launched as one round, answered one host at a time on a thread of its own
  // while this one writes events.
  std::atomic<bool> awaited{!tree_};
  std::thread awaiter;
  struct Join {
    std::thread& t;
    ~Join() {
      if (t.joinable()) t.join();
    }
  } join{awaiter};
  if (tree_) {
    {
      coordinator::HeldRound round(tree_.get());
      for (size_t i = 0; i < relayed_.size(); ++i) {
        std::string ignored;  // a launch that cannot go out answers in awaitLaunch
        tree_->agent(i)->beginLaunch(relayed_[i].request, &events, &ignored);
      }
    }
    awaiter = std::thread([&] {
      common::runGuarded(
          "relayed launch of job " + jobId,
          [&] {
            for (size_t i = 0; i < relayed_.size(); ++i) {
              queue.push(hostLaunched(relayed_[i].host,
                                      tree_->agent(i)->awaitLaunch(relayed_[i].request, &events)));
            }
          },
          [&](const std::string& what) {
            // Whatever is still unanswered fails: the caller must not wait on it.
            for (const RelayedLaunch& l : relayed_) {
              queue.push(hostLaunched(l.host,
                                      LaunchStatus("internal error relaying the launch: " + what)));
            }
          });
      awaited = true;
    });
  }

  OwedRanks owed(request_, relayed_);
  bool stopped = false;
  bool drainTold = !request_.drainable;  // only a drainable launch's caller hears of it
  const auto writeAll = [&](std::vector<LaunchEvent> batch) {
    for (const LaunchEvent& event : batch) {
      owed.settle(event);
      if (!callerGone && !caller.write(event)) callerGone = true;
    }
  };
  while (!owed.empty() || !awaited) {
    writeAll(queue.popAll(kPollInterval));
    // The caller may close the stream as soon as it has the last exit: that is no loss.
    if (owed.empty() && awaited) break;
    if (!callerGone && caller.gone()) callerGone = true;
    if (drainRequested_ && !drainTold && !callerGone) {
      LaunchEvent event;
      event.kind = Kind::kDraining;
      if (!caller.write(event)) callerGone = true;
      drainTold = true;
      logging::program("service")->info(
          "job {}: this agent is stopping; told {} so that the ranks leave the job", jobId,
          callerName);
    }
    if (callerGone && !stopped) {
      // The leader went away (hvdrun killed, leader agent lost): no worker outlives it, here
      // or on the hosts relayed to (their agents stop theirs when this stream goes).
      logging::program("service")->warn(
          "job {}: caller {} went away; stopping its ranks (signal {}, grace {} ms)", jobId,
          callerName, request_.stopSignal, request_.grace.count());
      local_->stop(jobId, request_.stopSignal, request_.grace);
      if (tree_) tree_->cancelLaunches();
      stopped = true;
    }
  }
  if (awaiter.joinable()) awaiter.join();
  writeAll(queue.popAll(std::chrono::milliseconds(0)));
  logging::program("service")->info("job {}: every rank has exited", jobId);
  return callerGone ? Outcome::kCallerGone : Outcome::kFinished;
}

}  // namespace hvd::agent::jobs
