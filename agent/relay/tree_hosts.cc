#include "agent/relay/tree_hosts.h"

#include <algorithm>
#include <future>
#include <utility>

#include "agent/relay/tree_shape.h"

namespace hvd::agent::relay {

namespace coord = coordinator;

std::string reachedThrough(const std::string& child, const std::string& address,
                           const std::string& reason) {
  return "reached through the agent on " + child + " (" + address + "), which failed: " + reason;
}

// One host's NodeAgent: every call becomes a Call of the tree's current round.
class TreeHosts::HostAgent final : public coord::NodeAgent {
 public:
  HostAgent(TreeHosts* tree, size_t index) : tree_(tree), index_(index) {}

  std::string host() const override { return tree_->hosts_[index_].host; }
  std::string address() const override { return tree_->hosts_[index_].address; }

  void describeAsync(std::function<void(coord::DescribeResult)> done) override {
    Call call;
    call.kind = Kind::kDescribe;
    call.host = index_;
    call.described = std::move(done);
    tree_->submit(std::move(call));
  }
  void reserveAsync(const ledger::Request& request,
                    std::function<void(coord::ReserveResult)> done) override {
    Call call;
    call.kind = Kind::kReserve;
    call.host = index_;
    call.reserve = request;
    call.reserved = std::move(done);
    tree_->submit(std::move(call));
  }
  coord::DescribeResult describe() override {
    std::promise<coord::DescribeResult> answer;
    describeAsync([&answer](coord::DescribeResult r) { answer.set_value(std::move(r)); });
    tree_->sendQueued();
    return answer.get_future().get();
  }
  coord::ReserveResult reserve(const ledger::Request& request) override {
    std::promise<coord::ReserveResult> answer;
    reserveAsync(request, [&answer](coord::ReserveResult r) { answer.set_value(std::move(r)); });
    tree_->sendQueued();
    return answer.get_future().get();
  }
  void unreserve(const std::string& key) override {
    Call call;
    call.kind = Kind::kUnreserve;
    call.host = index_;
    call.jobId = key;
    tree_->submit(std::move(call));
  }
  bool beginLaunch(const coord::LaunchRequest& request, coord::JobEvents* events,
                   std::string* error) override {
    (void)error;  // a branch that cannot be sent answers in awaitLaunch
    Call call;
    call.kind = Kind::kLaunch;
    call.host = index_;
    call.jobId = request.jobId;
    call.launch = request;
    call.events = events;
    tree_->submit(std::move(call));
    return true;
  }
  coord::LaunchStatus awaitLaunch(const coord::LaunchRequest& request,
                                  coord::JobEvents* events) override {
    (void)events;
    return tree_->awaitLaunch(index_, request.jobId);
  }
  coord::LaunchStatus launch(const coord::LaunchRequest& request,
                             coord::JobEvents* events) override {
    std::string error;
    beginLaunch(request, events, &error);
    return awaitLaunch(request, events);
  }
  void stop(const std::string& jobId, int signal, std::chrono::milliseconds grace) override {
    Call call;
    call.kind = Kind::kStop;
    call.host = index_;
    call.jobId = jobId;
    call.signal = signal;
    call.grace = grace;
    tree_->submit(std::move(call));
  }

 private:
  TreeHosts* const tree_;
  const size_t index_;
};

TreeHosts::TreeHosts(std::vector<Target> hosts, int width, LinkFactory links)
    : hosts_(std::move(hosts)),
      width_(std::max(1, width)),
      factory_(std::move(links)),
      launches_(hosts_.size()) {
  for (size_t i = 0; i < hosts_.size(); ++i)
    agents_.push_back(std::make_unique<HostAgent>(this, i));
}

TreeHosts::~TreeHosts() { shutdown(); }

coord::NodeAgent* TreeHosts::agent(size_t i) const { return agents_.at(i).get(); }

std::vector<coord::NodeAgent*> TreeHosts::agents() const {
  std::vector<coord::NodeAgent*> out;
  for (const auto& a : agents_) out.push_back(a.get());
  return out;
}

size_t TreeHosts::linksBuilt() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return links_.size();
}

void TreeHosts::hold() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++held_;
}

void TreeHosts::flush() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (held_ > 0) --held_;
  }
  sendQueued();
}

void TreeHosts::cancelLaunches() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [host, link] : links_) link->cancelLaunches();
}

void TreeHosts::closeLaunches() {
  std::vector<SubtreeLink*> links;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    shutdown_ = true;  // nothing more is sent
    for (auto& [host, link] : links_) links.push_back(link.get());
  }
  launchSent_.notify_all();
  for (SubtreeLink* link : links) link->closeLaunches();
}

void TreeHosts::shutdown() {
  std::map<size_t, std::unique_ptr<SubtreeLink>> links;
  std::vector<Call> dropped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    shutdown_ = true;
    links.swap(links_);
    dropped.swap(queued_);
  }
  launchSent_.notify_all();
  // Queued answers are still owed: a caller may be waiting for them.
  for (Call& call : dropped) answerShutDown(call);
  links.clear();  // each link cancels its streams and waits for its calls in flight
}

void TreeHosts::submit(Call call) {
  bool now = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queued_.push_back(std::move(call));
    // After a shutdown nothing waits for a flush: the call is answered (as shut down) at once.
    now = held_ == 0 || shutdown_;
  }
  if (now) sendQueued();
}

void TreeHosts::sendQueued() {
  std::vector<Call> calls;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    calls.swap(queued_);
  }
  if (calls.empty()) return;
  // Rounds: calls of one kind and the same arguments, each host once, in host order.
  std::stable_sort(calls.begin(), calls.end(), [](const Call& a, const Call& b) {
    if (a.kind != b.kind) return a.kind < b.kind;
    if (a.jobId != b.jobId) return a.jobId < b.jobId;
    if (a.signal != b.signal) return a.signal < b.signal;
    if (a.grace != b.grace) return a.grace < b.grace;
    return a.host < b.host;
  });
  std::vector<Call> round;
  for (Call& call : calls) {
    if (!round.empty()) {
      const Call& last = round.back();
      if (last.kind != call.kind || last.jobId != call.jobId || last.signal != call.signal ||
          last.grace != call.grace || last.host == call.host) {
        sendRound(std::move(round));
        round.clear();
      }
    }
    round.push_back(std::move(call));
  }
  if (!round.empty()) sendRound(std::move(round));
}

void TreeHosts::answerShutDown(Call& call) const {
  const coord::AgentError error{hosts_[call.host].host, hosts_[call.host].address,
                                "the agent connection is shut down"};
  if (call.described) call.described(coord::DescribeResult{std::nullopt, error});
  if (call.reserved) {
    coord::ReserveResult r;
    r.error = error;
    call.reserved(std::move(r));
  }
}

SubtreeLink* TreeHosts::linkOf(size_t host) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (shutdown_) return nullptr;
  std::unique_ptr<SubtreeLink>& link = links_[host];
  if (!link) link = factory_(hosts_[host]);
  return link.get();
}

std::vector<Target> TreeHosts::targetsOf(const std::vector<Call>& calls, size_t first,
                                         size_t count) const {
  std::vector<Target> subtree;
  for (size_t i = first + 1; i < first + count; ++i) subtree.push_back(hosts_[calls[i].host]);
  return subtree;
}

void TreeHosts::sendRound(std::vector<Call> calls) {
  for (const Branch& branch : splitBranches(calls.size(), width_)) {
    const size_t childHost = calls[branch.first].host;
    SubtreeLink* link = linkOf(childHost);
    const std::vector<Target> subtree = targetsOf(calls, branch.first, branch.count);
    const auto at = [&](size_t i) -> Call& { return calls[branch.first + i]; };
    const Kind kind = calls[branch.first].kind;
    if (!link) {
      // Shut down: owed answers say so; nothing else is sent.
      for (size_t i = 0; i < branch.count; ++i) answerShutDown(at(i));
      if (kind == Kind::kLaunch) {
        std::lock_guard<std::mutex> lock(mutex_);
        for (size_t i = 0; i < branch.count; ++i) {
          LaunchSlot& slot = launches_[at(i).host][at(i).jobId];
          slot.sent = true;
          slot.error = "the agent connection to " + hosts_[at(i).host].host + " is shut down";
        }
        launchSent_.notify_all();
      }
      continue;
    }
    switch (kind) {
      case Kind::kDescribe: {
        std::vector<std::function<void(coord::DescribeResult)>> dones;
        for (size_t i = 0; i < branch.count; ++i) dones.push_back(std::move(at(i).described));
        link->describeTree(
            subtree, width_,
            [dones = std::move(dones)](std::vector<coord::DescribeResult> results) {
              for (size_t i = 0; i < dones.size(); ++i) {
                dones[i](i < results.size() ? std::move(results[i]) : coord::DescribeResult{});
              }
            });
        break;
      }
      case Kind::kReserve: {
        std::vector<ledger::Request> requests;
        std::vector<std::function<void(coord::ReserveResult)>> dones;
        for (size_t i = 0; i < branch.count; ++i) {
          requests.push_back(at(i).reserve);
          dones.push_back(std::move(at(i).reserved));
        }
        link->reserveTree(requests, subtree, width_,
                          [dones = std::move(dones)](std::vector<coord::ReserveResult> results) {
                            for (size_t i = 0; i < dones.size(); ++i) {
                              coord::ReserveResult missing;
                              missing.error.reason = "no answer for this host";
                              dones[i](i < results.size() ? std::move(results[i]) : missing);
                            }
                          });
        break;
      }
      case Kind::kUnreserve:
        link->unreserveTree(at(0).jobId, subtree, width_);
        break;
      case Kind::kStop:
        link->stopTree(at(0).jobId, at(0).signal, at(0).grace, subtree, width_);
        break;
      case Kind::kLaunch: {
        std::vector<coord::LaunchRequest> requests;
        for (size_t i = 0; i < branch.count; ++i) requests.push_back(at(i).launch);
        const std::string error = link->beginLaunchTree(requests, subtree, width_, at(0).events);
        std::lock_guard<std::mutex> lock(mutex_);
        for (size_t i = 0; i < branch.count; ++i) {
          LaunchSlot& slot = launches_[at(i).host][at(i).jobId];
          slot.sent = true;
          slot.link = link;
          slot.index = i;
          slot.error = error;
        }
        launchSent_.notify_all();
        break;
      }
    }
  }
}

coord::LaunchStatus TreeHosts::awaitLaunch(size_t host, const std::string& jobId) {
  sendQueued();  // a launch still queued goes out now rather than never
  LaunchSlot slot;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    launchSent_.wait(lock, [&] {
      auto it = launches_[host].find(jobId);
      return shutdown_ || (it != launches_[host].end() && it->second.sent);
    });
    auto it = launches_[host].find(jobId);
    if (it == launches_[host].end()) {
      return {"job " + jobId + " was not launched on " + hosts_[host].host};
    }
    slot = it->second;
  }
  if (!slot.error.empty() || !slot.link) {
    return {slot.error.empty() ? "the agent connection is shut down" : slot.error};
  }
  return slot.link->awaitLaunchTree(jobId, slot.index);
}

}  // namespace hvd::agent::relay
