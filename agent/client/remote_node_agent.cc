#include "agent/client/remote_node_agent.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <future>
#include <utility>

#include "agent/common/thread_guard.h"
#include "agent/relay/tree_hosts.h"
#include "agent/relay/tree_shape.h"
#include "agent/rpc/convert.h"
#include "agent/rpc/methods.h"
#include "hvd_support/logging.h"

namespace hvd::agent::client {

namespace {

std::string seconds(std::chrono::milliseconds timeout) {
  const long long ms = timeout.count();
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
  return std::to_string(ms) + " ms";
}

const char* codeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::CANCELLED:
      return "cancelled";
    case grpc::StatusCode::UNKNOWN:
      return "unknown error";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "invalid argument";
    case grpc::StatusCode::NOT_FOUND:
      return "not found";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "permission denied";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "resource exhausted";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "failed precondition";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "not implemented by the agent (too old?)";
    case grpc::StatusCode::INTERNAL:
      return "internal error";
    case grpc::StatusCode::UNAVAILABLE:
      return "unavailable";
    default:
      return "error";
  }
}

constexpr const char* kShutDown = "the agent connection is shut down";

}  // namespace

std::string describeStatus(const grpc::Status& status, std::chrono::milliseconds timeout) {
  switch (status.error_code()) {
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "no answer within " + seconds(timeout);
    case grpc::StatusCode::UNAUTHENTICATED:
      // The server's message already reads "authentication failed: <why>".
      return status.error_message().empty() ? std::string(rpc::kAuthFailedPrefix)
                                            : status.error_message();
    default:
      return status.error_message().empty() ? std::string(codeName(status.error_code()))
                                            : status.error_message();
  }
}

// One job's Launch stream, for this agent and the hosts it relays to, read through gRPC's
// callback API: its events are handled on gRPC's threads, one at a time, and no thread of ours
// waits on it (the leader of a job over N hosts holds no thread per host).
struct RemoteNodeAgent::Stream : grpc::ClientReadReactor<v1::RankEvent> {
  struct Host {
    std::string name;
    std::string address;
    bool hasAnswer = false;
    coordinator::LaunchStatus answer;
    bool lost = false;  // onAgentLost delivered
  };
  RemoteNodeAgent* agent = nullptr;
  std::string jobId;
  coordinator::JobEvents* events = nullptr;
  grpc::ClientContext context;
  v1::LaunchRequest message;
  v1::RankEvent event;  // the read in progress
  std::chrono::milliseconds timeout{0};
  std::string failure;  // an event could not be handled: the stream was cancelled for this

  // Shared between the awaiting caller, gRPC's threads and shutdown().
  std::mutex mutex;
  std::condition_variable answered;
  std::vector<Host> hosts;        // [0] this agent, then the subtree in order
  std::map<int, size_t> running;  // launched ranks whose exit has not arrived -> host index
  bool abandoned = false;         // a launch was given up waiting for: the stream is cancelled
  bool done = false;              // OnDone has returned: nothing more comes from this stream
  std::chrono::steady_clock::time_point started;  // when the request went out

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream ended: OnDone follows
    common::runGuarded(
        "launch stream of job " + jobId + " on " + agent->options_.host,
        [&] { agent->handleEvent(this, event); },
        [&](const std::string& what) {
          failure = "internal error reading its stream: " + what;
          context.TryCancel();
        });
    StartRead(&event);
  }
  void OnDone(const grpc::Status& status) override {
    common::runGuarded(
        "end of the launch stream of job " + jobId + " on " + agent->options_.host,
        [&] { agent->streamEnded(this, status); }, [](const std::string&) {});
    std::lock_guard<std::mutex> lock(mutex);
    done = true;
    answered.notify_all();
  }

  // Index of the host named `name` that has not answered yet (or any of that name), or npos.
  size_t find(const std::string& name, bool unanswered) const {
    for (size_t i = 0; i < hosts.size(); ++i) {
      if (hosts[i].name == name && (!unanswered || !hosts[i].hasAnswer)) return i;
    }
    return unanswered ? find(name, false) : std::string::npos;
  }
  // Host i's ranks no longer count as running; true if any did.
  bool dropRanks(size_t i) {
    bool any = false;
    for (auto it = running.begin(); it != running.end();) {
      if (it->second == i) {
        it = running.erase(it);
        any = true;
      } else {
        ++it;
      }
    }
    return any;
  }
};

RemoteNodeAgent::RemoteNodeAgent(RemoteAgentOptions options, rpc::CallSigner* signer)
    : options_(std::move(options)), signer_(signer) {
  channel_ = rpc::makeChannel(options_.address, options_.tls, options_.tlsTargetName);
  stub_ = v1::Agent::NewStub(channel_);
}

RemoteNodeAgent::~RemoteNodeAgent() { shutdown(); }

void RemoteNodeAgent::cancelLaunches() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [jobId, stream] : streams_) stream->context.TryCancel();
}

void RemoteNodeAgent::shutdown() {
  closeLaunches();
  // Calls still in flight (a Stop, an Unreserve) end by their deadline.
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [this] {
    return std::all_of(calls_.begin(), calls_.end(),
                       [](const std::unique_ptr<CallBase>& c) { return c->answered; });
  });
  reapAnswered();
}

void RemoteNodeAgent::closeLaunches() {
  std::map<std::string, std::unique_ptr<Stream>> streams;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    shutdown_ = true;
    streams.swap(streams_);
  }
  for (auto& [jobId, stream] : streams) {
    stream->context.TryCancel();  // the agent stops the job's ranks when its caller goes
  }
  for (auto& [jobId, stream] : streams) {
    std::unique_lock<std::mutex> lock(stream->mutex);
    stream->answered.wait(lock, [s = stream.get()] { return s->done; });
  }
}

// One unary call in flight: what gRPC's callback needs to outlive the caller's frame.
template <typename Request, typename Response>
struct RemoteNodeAgent::Call : CallBase {
  grpc::ClientContext context;
  Request request;
  Response response;
};

template <typename Request, typename Response, typename Send, typename Answer>
void RemoteNodeAgent::send(std::string_view method, Request request,
                           std::chrono::milliseconds timeout, Send sendCall, Answer answer) {
  // The agent owns each call until it has been answered, and frees it on its own thread: the
  // callback lives in the call's memory, so it must not be what destroys the call.
  auto owned = std::make_unique<Call<Request, Response>>();
  Call<Request, Response>* call = owned.get();
  call->request = std::move(request);
  call->context.set_deadline(std::chrono::system_clock::now() + timeout);
  signer_->sign(&call->context, method, call->request);
  {
    // Checked under the lock that registers the call, so shutdown() never misses one.
    std::unique_lock<std::mutex> lock(mutex_);
    if (shutdown_) {
      lock.unlock();
      answer(grpc::Status(grpc::StatusCode::CANCELLED, kShutDown), call->response);
      return;
    }
    reapAnswered();
    calls_.push_back(std::move(owned));
  }
  // gRPC runs the callback on its own threads once the call ends (its deadline bounds that).
  sendCall(&call->context, &call->request, &call->response,
           [this, call, answer = std::move(answer)](grpc::Status status) mutable {
             answer(status, call->response);
             std::lock_guard<std::mutex> lock(mutex_);
             call->answered = true;
             idle_.notify_all();
           });
}

std::chrono::milliseconds RemoteNodeAgent::timeoutFor(size_t subtree, int width) const {
  return options_.callTimeout * (1 + relay::treeDepth(subtree, width));
}

coordinator::AgentError RemoteNodeAgent::errorOf(const grpc::Status& status,
                                                 std::chrono::milliseconds timeout) const {
  coordinator::AgentError error;
  error.host = options_.host;
  error.address = options_.address;
  error.reason = describeStatus(status, timeout);
  error.authenticationFailed = status.error_code() == grpc::StatusCode::UNAUTHENTICATED;
  return error;
}

std::vector<coordinator::AgentError> RemoteNodeAgent::errorsOf(
    const grpc::Status& status, std::chrono::milliseconds timeout,
    const std::vector<relay::Target>& subtree) const {
  std::vector<coordinator::AgentError> errors{errorOf(status, timeout)};
  for (const relay::Target& t : subtree) {
    coordinator::AgentError e;
    e.host = t.host;
    e.address = t.address;
    e.reason = relay::reachedThrough(options_.host, options_.address, errors[0].reason);
    errors.push_back(std::move(e));
  }
  return errors;
}

template <typename Result, typename Response, typename SetOwn, typename SetRelayed>
std::vector<Result> RemoteNodeAgent::answersOf(const grpc::Status& status,
                                               std::chrono::milliseconds timeout,
                                               const std::vector<relay::Target>& subtree,
                                               const Response& response, SetOwn setOwn,
                                               SetRelayed setRelayed) const {
  std::vector<Result> results(1 + subtree.size());
  if (!status.ok()) {
    std::vector<coordinator::AgentError> errors = errorsOf(status, timeout, subtree);
    for (size_t i = 0; i < results.size(); ++i) results[i].error = std::move(errors[i]);
    return results;
  }
  setOwn(response, &results[0]);
  for (size_t i = 0; i < subtree.size(); ++i) {
    Result& r = results[i + 1];
    const int at = static_cast<int>(i);
    if (at >= response.relayed_size()) {
      r.error = {subtree[i].host, subtree[i].address,
                 "the agent on " + options_.host + " relayed no answer for it"};
    } else if (response.relayed(at).has_failure()) {
      r.error = rpc::fromProto(response.relayed(at).failure());
    } else {
      setRelayed(response.relayed(at), &r);
    }
  }
  return results;
}

std::function<void(const grpc::Status&)> RemoteNodeAgent::warnOnFailure(std::string what) const {
  return [this, what = std::move(what)](const grpc::Status& status) {
    // After shutdown() nothing is sent, and nobody waits for the answer: not worth a warning.
    if (status.ok() || status.error_message() == kShutDown) return;
    hvd::logging::program("client")->warn("{} on {} ({}) failed: {}", what, options_.host,
                                          options_.address,
                                          describeStatus(status, options_.callTimeout));
  };
}

void RemoteNodeAgent::reapAnswered() {
  calls_.erase(std::remove_if(calls_.begin(), calls_.end(),
                              [](const std::unique_ptr<CallBase>& c) { return c->answered; }),
               calls_.end());
}

void RemoteNodeAgent::describeTree(
    const std::vector<relay::Target>& subtree, int width,
    std::function<void(std::vector<coordinator::DescribeResult>)> done) {
  const std::chrono::milliseconds timeout = timeoutFor(subtree.size(), width);
  v1::DescribeRequest request;
  if (!subtree.empty())
    *request.mutable_relay() = rpc::toProto(subtree, width, options_.callTimeout);
  send<v1::DescribeRequest, v1::DescribeResponse>(
      rpc::kDescribeMethod, std::move(request), timeout,
      [this](auto* context, auto* message, auto* response, auto callback) {
        stub_->async()->Describe(context, message, response, std::move(callback));
      },
      [this, subtree, timeout, done = std::move(done)](const grpc::Status& status,
                                                       const v1::DescribeResponse& response) {
        done(answersOf<coordinator::DescribeResult>(
            status, timeout, subtree, response,
            [](const v1::DescribeResponse& own, coordinator::DescribeResult* r) {
              r->description = rpc::fromProto(own);
              r->agentUnixTimeUs = own.unix_time_us();
              for (const v1::GpuHolding& h : own.gpu_holdings()) {
                r->gpuHolders.push_back({h.gpu_index(), h.job_id()});
              }
            },
            [](const v1::RelayedDescribe& relayed, coordinator::DescribeResult* r) {
              r->description = rpc::fromProto(relayed.description());
            }));
      });
}

void RemoteNodeAgent::reserveTree(
    const std::vector<ledger::Request>& requests, const std::vector<relay::Target>& subtree,
    int width, std::function<void(std::vector<coordinator::ReserveResult>)> done) {
  const std::chrono::milliseconds timeout = timeoutFor(subtree.size(), width);
  v1::ReserveRequest request = rpc::toProto(requests.at(0));
  if (!subtree.empty()) {
    *request.mutable_relay() = rpc::toProto(subtree, width, options_.callTimeout);
    for (size_t i = 1; i < requests.size(); ++i) *request.add_relayed() = rpc::toProto(requests[i]);
  }
  send<v1::ReserveRequest, v1::ReserveResponse>(
      rpc::kReserveMethod, std::move(request), timeout,
      [this](auto* context, auto* message, auto* response, auto callback) {
        stub_->async()->Reserve(context, message, response, std::move(callback));
      },
      [this, subtree, timeout, done = std::move(done)](const grpc::Status& status,
                                                       const v1::ReserveResponse& response) {
        done(answersOf<coordinator::ReserveResult>(
            status, timeout, subtree, response,
            [](const v1::ReserveResponse& own, coordinator::ReserveResult* r) {
              r->grant = rpc::fromProto(own);
            },
            [](const v1::RelayedReserve& relayed, coordinator::ReserveResult* r) {
              r->grant = rpc::fromProto(relayed.response());
            }));
      });
}

void RemoteNodeAgent::describeAsync(std::function<void(coordinator::DescribeResult)> done) {
  describeTree({}, 0, [done = std::move(done)](std::vector<coordinator::DescribeResult> r) {
    done(std::move(r[0]));
  });
}

void RemoteNodeAgent::reserveAsync(const ledger::Request& request,
                                   std::function<void(coordinator::ReserveResult)> done) {
  reserveTree({request}, {}, 0,
              [done = std::move(done)](std::vector<coordinator::ReserveResult> r) {
                done(std::move(r[0]));
              });
}

coordinator::DescribeResult RemoteNodeAgent::describe() {
  std::promise<coordinator::DescribeResult> answer;
  describeAsync([&answer](coordinator::DescribeResult r) { answer.set_value(std::move(r)); });
  return answer.get_future().get();
}

coordinator::ReserveResult RemoteNodeAgent::reserve(const ledger::Request& request) {
  std::promise<coordinator::ReserveResult> answer;
  reserveAsync(request,
               [&answer](coordinator::ReserveResult r) { answer.set_value(std::move(r)); });
  return answer.get_future().get();
}

void RemoteNodeAgent::unreserveTree(const std::string& key,
                                    const std::vector<relay::Target>& subtree, int width) {
  v1::UnreserveRequest request;
  request.set_job_id(key);
  if (!subtree.empty())
    *request.mutable_relay() = rpc::toProto(subtree, width, options_.callTimeout);
  send<v1::UnreserveRequest, v1::UnreserveResponse>(
      rpc::kUnreserveMethod, std::move(request), timeoutFor(subtree.size(), width),
      [this](auto* context, auto* message, auto* response, auto callback) {
        stub_->async()->Unreserve(context, message, response, std::move(callback));
      },
      // Not fatal: the reservation's lease returns it anyway.
      [warn = warnOnFailure("giving back the reservation of job " + key)](
          const grpc::Status& status, const v1::UnreserveResponse&) { warn(status); });
}

void RemoteNodeAgent::unreserve(const std::string& key) { unreserveTree(key, {}, 0); }

coordinator::LaunchStatus RemoteNodeAgent::launch(const coordinator::LaunchRequest& request,
                                                  coordinator::JobEvents* events) {
  std::string error;
  beginLaunch(request, events, &error);
  if (!error.empty()) return {error};
  return awaitLaunch(request, events);
}

bool RemoteNodeAgent::beginLaunch(const coordinator::LaunchRequest& request,
                                  coordinator::JobEvents* events, std::string* error) {
  *error = beginLaunchTree({request}, {}, 0, events);
  return true;
}

coordinator::LaunchStatus RemoteNodeAgent::awaitLaunch(const coordinator::LaunchRequest& request,
                                                       coordinator::JobEvents* events) {
  (void)events;
  return awaitLaunchTree(request.jobId, 0);
}

std::string RemoteNodeAgent::beginLaunchTree(
    const std::vector<coordinator::LaunchRequest>& requests,
    const std::vector<relay::Target>& subtree, int width, coordinator::JobEvents* events) {
  const coordinator::LaunchRequest& own = requests.at(0);
  auto stream = std::make_unique<Stream>();
  Stream* s = stream.get();
  s->jobId = own.jobId;
  s->events = events;
  s->started = std::chrono::steady_clock::now();
  s->timeout = timeoutFor(subtree.size(), width);
  s->hosts.push_back({options_.host, options_.address});
  for (const relay::Target& t : subtree) s->hosts.push_back({t.host, t.address});
  for (size_t i = 0; i < requests.size() && i < s->hosts.size(); ++i) {
    for (const coordinator::RankLaunch& rank : requests[i].ranks) s->running[rank.rank] = i;
  }
  s->message = rpc::toProto(own);
  if (!subtree.empty()) {
    *s->message.mutable_relay() = rpc::toProto(subtree, width, options_.callTimeout);
    for (size_t i = 1; i < requests.size(); ++i) {
      *s->message.add_relayed() = rpc::toProto(requests[i]);
    }
  }
  signer_->sign(&s->context, rpc::kLaunchMethod, s->message);
  s->agent = this;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (shutdown_) return "the agent connection to " + options_.host + " is shut down";
    if (streams_.count(own.jobId) != 0) {
      return "job " + own.jobId + " was already launched on " + options_.host;
    }
    streams_.emplace(own.jobId, std::move(stream));
  }
  // Started outside the lock (its callbacks may run on this thread), and nothing here waits
  // for the agent to take the call: one slow agent holds up neither the other hosts' launches
  // nor a relaying agent's watch over its own caller. A shutdown() meanwhile cancels it, and
  // waits for its end, which starting it brings.
  stub_->async()->Launch(&s->context, &s->message, s);
  s->StartRead(&s->event);
  s->StartCall();
  return "";
}

coordinator::LaunchStatus RemoteNodeAgent::awaitLaunchTree(const std::string& jobId, size_t index) {
  Stream* s = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = streams_.find(jobId);
    if (found == streams_.end()) {
      return {"job " + jobId + " was not launched on " + options_.host};
    }
    s = found->second.get();
  }
  std::unique_lock<std::mutex> lock(s->mutex);
  if (index >= s->hosts.size()) return {"no such host in the launch"};
  Stream::Host& host = s->hosts[index];
  // The timeout counts from the request, as a single launch's did.
  if (!s->answered.wait_until(lock, s->started + s->timeout, [&] { return host.hasAnswer; })) {
    // Given up: the whole stream goes (if the ranks start after all, the agent stops them), and
    // every host that has not answered fails with it.
    s->abandoned = true;
    for (size_t i = 0; i < s->hosts.size(); ++i) {
      Stream::Host& h = s->hosts[i];
      if (h.hasAnswer) continue;
      h.hasAnswer = true;
      h.answer = coordinator::LaunchStatus{
          "the agent on " + h.name + " (" + h.address + ") did not confirm the launch within " +
          seconds(s->timeout) +
          (i == 0 ? "" : " (reached through the agent on " + options_.host + ")")};
      s->dropRanks(i);
    }
    lock.unlock();
    s->context.TryCancel();
    lock.lock();
  }
  return host.answer;
}

void RemoteNodeAgent::handleEvent(Stream* s, const v1::RankEvent& event) {
  if (event.has_launched() || event.has_host_launched()) {
    std::lock_guard<std::mutex> lock(s->mutex);
    const size_t i = event.has_launched() ? 0 : s->find(event.host_launched().host(), true);
    if (i == std::string::npos || s->hosts[i].hasAnswer) return;
    const v1::LaunchResult& result =
        event.has_launched() ? event.launched() : event.host_launched().result();
    s->hosts[i].hasAnswer = true;
    s->hosts[i].answer = rpc::fromProto(result);
    if (!result.error().empty()) s->dropRanks(i);
    s->answered.notify_all();
  } else if (event.has_output()) {
    const v1::RankOutput& out = event.output();
    s->events->onOutput(out.rank(), rpc::fromProto(out.stream()), out.line());
  } else if (event.has_exit()) {
    const v1::RankExit& exit = event.exit();
    {
      std::lock_guard<std::mutex> lock(s->mutex);
      if (s->running.erase(exit.rank()) == 0) return;  // not ours, or reported twice
    }
    process::ExitStatus status;
    status.exitCode = exit.exit_code();
    status.signal = exit.signal();
    s->events->onExit(exit.rank(), status);
  } else if (event.has_host_lost()) {
    std::string name;
    {
      std::lock_guard<std::mutex> lock(s->mutex);
      const size_t i = s->find(event.host_lost().host(), false);
      if (i == std::string::npos || i == 0 || s->hosts[i].lost) return;
      s->hosts[i].lost = true;
      if (!s->hosts[i].hasAnswer) {
        s->hosts[i].hasAnswer = true;
        s->hosts[i].answer = coordinator::LaunchStatus{"the agent on " + s->hosts[i].name + " (" +
                                                       s->hosts[i].address +
                                                       ") was lost: " + event.host_lost().reason()};
        s->answered.notify_all();
      }
      if (!s->dropRanks(i)) return;
      name = s->hosts[i].name;
    }
    s->events->onAgentLost(name, event.host_lost().reason());
  } else if (event.has_draining()) {
    std::string name;
    {
      std::lock_guard<std::mutex> lock(s->mutex);
      const std::string& host = event.draining().host();
      const size_t i = host.empty() ? 0 : s->find(host, false);
      if (i == std::string::npos || s->hosts[i].lost) return;
      name = s->hosts[i].name;
    }
    s->events->onHostDraining(name);
  }
}

void RemoteNodeAgent::streamEnded(Stream* s, const grpc::Status& status) {
  bool quiet = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    quiet = shutdown_;  // we cancelled the stream ourselves: not a lost agent
  }
  std::string reason =
      status.ok() ? "the agent ended the job's stream early" : describeStatus(status, s->timeout);
  if (!s->failure.empty()) reason = s->failure;
  endStream(s, reason, quiet);
}

void RemoteNodeAgent::endStream(Stream* s, const std::string& reason, bool quiet) {
  // Who is lost with this agent, in host order: this agent first, so it is the root cause.
  std::vector<std::pair<std::string, std::string>> lost;
  {
    std::lock_guard<std::mutex> lock(s->mutex);
    const std::string own = "agent on " + options_.host + " (" + options_.address + "): " + reason;
    for (size_t i = 0; i < s->hosts.size(); ++i) {
      Stream::Host& h = s->hosts[i];
      if (!h.hasAnswer) {
        // The stream ended before the host's launch was confirmed: the launch failed.
        h.hasAnswer = true;
        h.answer = coordinator::LaunchStatus{
            i == 0 ? own
                   : "agent on " + h.name + " (" + h.address +
                         "): " + relay::reachedThrough(options_.host, options_.address, reason)};
        s->dropRanks(i);
        continue;
      }
      if (h.lost || !h.answer.ok()) continue;
      if (!s->dropRanks(i)) continue;
      h.lost = true;
      if (i == 0) {
        std::string why = reason;
        if (s->hosts.size() > 1) {
          why += "; the hosts it relayed to are lost with it:";
          for (size_t j = 1; j < s->hosts.size(); ++j) why += " " + s->hosts[j].name;
        }
        lost.emplace_back(h.name, why);
      } else {
        lost.emplace_back(h.name, relay::reachedThrough(options_.host, options_.address, reason));
      }
    }
    s->answered.notify_all();
  }
  if (quiet) return;
  if (!lost.empty()) {
    hvd::logging::program("client")->debug("remote agent {} ({}): job {} stream ended: {}",
                                           options_.host, options_.address, s->jobId, reason);
  }
  for (const auto& [host, why] : lost) s->events->onAgentLost(host, why);
}

void RemoteNodeAgent::stopTree(const std::string& jobId, int signal,
                               std::chrono::milliseconds grace,
                               const std::vector<relay::Target>& subtree, int width) {
  v1::StopRequest request;
  request.set_job_id(jobId);
  request.set_signal(signal);
  request.set_grace_ms(grace.count());
  if (!subtree.empty())
    *request.mutable_relay() = rpc::toProto(subtree, width, options_.callTimeout);
  // A failed Stop is only logged, as a refused one is: the job's end (its stream) still comes.
  send<v1::StopRequest, v1::StopResponse>(
      rpc::kStopMethod, std::move(request), timeoutFor(subtree.size(), width),
      [this](auto* context, auto* message, auto* response, auto callback) {
        stub_->async()->Stop(context, message, response, std::move(callback));
      },
      [warn = warnOnFailure("stop of job " + jobId)](const grpc::Status& status,
                                                     const v1::StopResponse&) { warn(status); });
}

void RemoteNodeAgent::stop(const std::string& jobId, int signal, std::chrono::milliseconds grace) {
  stopTree(jobId, signal, grace, {}, 0);
}

}  // namespace hvd::agent::client
