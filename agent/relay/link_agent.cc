#include "agent/relay/link_agent.h"

#include <future>
#include <utility>
#include <vector>

namespace hvd::agent::relay {

namespace coord = coordinator;

void LinkAgent::describeAsync(std::function<void(coord::DescribeResult)> done) {
  link_->describeTree({}, 0, [done = std::move(done)](std::vector<coord::DescribeResult> r) {
    done(std::move(r.at(0)));
  });
}

void LinkAgent::reserveAsync(const ledger::Request& request,
                             std::function<void(coord::ReserveResult)> done) {
  link_->reserveTree(
      {request}, {}, 0,
      [done = std::move(done)](std::vector<coord::ReserveResult> r) { done(std::move(r.at(0))); });
}

coord::DescribeResult LinkAgent::describe() {
  // `done` runs exactly once, by the call's deadline (the link's contract).
  auto answer = std::make_shared<std::promise<coord::DescribeResult>>();
  std::future<coord::DescribeResult> result = answer->get_future();
  describeAsync([answer](coord::DescribeResult r) { answer->set_value(std::move(r)); });
  return result.get();
}

coord::ReserveResult LinkAgent::reserve(const ledger::Request& request) {
  auto answer = std::make_shared<std::promise<coord::ReserveResult>>();
  std::future<coord::ReserveResult> result = answer->get_future();
  reserveAsync(request, [answer](coord::ReserveResult r) { answer->set_value(std::move(r)); });
  return result.get();
}

void LinkAgent::unreserve(const std::string& key) { link_->unreserveTree(key, {}, 0); }

bool LinkAgent::beginLaunch(const coord::LaunchRequest& request, coord::JobEvents* events,
                            std::string* error) {
  *error = link_->beginLaunchTree({request}, {}, 0, events);
  return true;
}

coord::LaunchStatus LinkAgent::awaitLaunch(const coord::LaunchRequest& request,
                                           coord::JobEvents* /*events*/) {
  return link_->awaitLaunchTree(request.jobId, 0);
}

coord::LaunchStatus LinkAgent::launch(const coord::LaunchRequest& request,
                                      coord::JobEvents* events) {
  std::string error;
  beginLaunch(request, events, &error);
  if (!error.empty()) return coord::LaunchStatus(error);
  return awaitLaunch(request, events);
}

void LinkAgent::stop(const std::string& jobId, int signal, std::chrono::milliseconds grace) {
  link_->stopTree(jobId, signal, grace, {}, 0);
}

}  // namespace hvd::agent::relay
