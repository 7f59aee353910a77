#include "agent/client/remote_node_agent.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <future>
#include <set>
#include <utility>

#include "agent/common/thread_guard.h"
#include "agent/rpc/convert.h"
#include "agent/rpc/methods.h"
#include "common/logging.h"

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

// One job's Launch stream and the thread that reads it.
struct RemoteNodeAgent::Stream {
  std::string jobId;
  coordinator::JobEvents* events = nullptr;
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::RankEvent>> reader;
  std::set<int> running;  // launched ranks whose exit has not arrived
  std::thread thread;

  // The launch handshake between launch() and the reader thread.
  std::mutex mutex;
  std::condition_variable answered;
  bool hasAnswer = false;
  std::string error;                      // the launch error (empty: every rank started)
  std::vector<std::pair<int, int>> pids;  // (rank, pid) from LaunchResult
  bool abandoned = false;                 // launch() gave up waiting: deliver nothing
  bool finished = false;                  // reader->Finish() was called (reader thread only)
  std::chrono::steady_clock::time_point started;  // when the request went out
};

RemoteNodeAgent::RemoteNodeAgent(RemoteAgentOptions options, rpc::CallSigner* signer)
    : options_(std::move(options)), signer_(signer) {
  channel_ = rpc::makeChannel(options_.address, options_.tls, options_.tlsTargetName);
  stub_ = v1::Agent::NewStub(channel_);
}

RemoteNodeAgent::~RemoteNodeAgent() { shutdown(); }

void RemoteNodeAgent::shutdown() {
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
    if (stream->thread.joinable()) stream->thread.join();
  }
  // Calls still in flight (a Stop, an Unreserve) end by their deadline.
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [this] {
    return std::all_of(calls_.begin(), calls_.end(),
                       [](const std::unique_ptr<CallBase>& c) { return c->answered; });
  });
  reapAnswered();
}

// One unary call in flight: what gRPC's callback needs to outlive the caller's frame.
template <typename Request, typename Response>
struct RemoteNodeAgent::Call : CallBase {
  grpc::ClientContext context;
  Request request;
  Response response;
};

template <typename Request, typename Response, typename Send, typename Answer>
void RemoteNodeAgent::send(std::string_view method, Request request, Send sendCall, Answer answer) {
  // The agent owns each call until it has been answered, and frees it on its own thread: the
  // callback lives in the call's memory, so it must not be what destroys the call.
  auto owned = std::make_unique<Call<Request, Response>>();
  Call<Request, Response>* call = owned.get();
  call->request = std::move(request);
  call->context.set_deadline(std::chrono::system_clock::now() + options_.callTimeout);
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

coordinator::AgentError RemoteNodeAgent::errorOf(const grpc::Status& status) const {
  coordinator::AgentError error;
  error.host = options_.host;
  error.address = options_.address;
  error.reason = describeStatus(status, options_.callTimeout);
  error.authenticationFailed = status.error_code() == grpc::StatusCode::UNAUTHENTICATED;
  return error;
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

void RemoteNodeAgent::describeAsync(std::function<void(coordinator::DescribeResult)> done) {
  send<v1::DescribeRequest, v1::DescribeResponse>(
      rpc::kDescribeMethod, v1::DescribeRequest{},
      [this](auto* context, auto* request, auto* response, auto callback) {
        stub_->async()->Describe(context, request, response, std::move(callback));
      },
      [this, done = std::move(done)](const grpc::Status& status,
                                     const v1::DescribeResponse& response) {
        coordinator::DescribeResult result;
        if (!status.ok()) {
          result.error = errorOf(status);
        } else {
          result.description = rpc::fromProto(response);
        }
        done(std::move(result));
      });
}

void RemoteNodeAgent::reserveAsync(const ledger::Request& request,
                                   std::function<void(coordinator::ReserveResult)> done) {
  send<v1::ReserveRequest, v1::ReserveResponse>(
      rpc::kReserveMethod, rpc::toProto(request),
      [this](auto* context, auto* message, auto* response, auto callback) {
        stub_->async()->Reserve(context, message, response, std::move(callback));
      },
      [this, done = std::move(done)](const grpc::Status& status,
                                     const v1::ReserveResponse& response) {
        coordinator::ReserveResult result;
        if (!status.ok()) {
          result.error = errorOf(status);
        } else {
          result.grant = rpc::fromProto(response);
        }
        done(std::move(result));
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

void RemoteNodeAgent::unreserve(const std::string& key) {
  v1::UnreserveRequest request;
  request.set_job_id(key);
  send<v1::UnreserveRequest, v1::UnreserveResponse>(
      rpc::kUnreserveMethod, std::move(request),
      [this](auto* context, auto* message, auto* response, auto callback) {
        stub_->async()->Unreserve(context, message, response, std::move(callback));
      },
      // Not fatal: the reservation's lease returns it anyway.
      [warn = warnOnFailure("giving back the reservation of job " + key)](
          const grpc::Status& status, const v1::UnreserveResponse&) { warn(status); });
}

coordinator::LaunchStatus RemoteNodeAgent::launch(const coordinator::LaunchRequest& request,
                                                  coordinator::JobEvents* events) {
  std::string error;
  beginLaunch(request, events, &error);
  if (!error.empty()) return {error};
  return awaitLaunch(request, events);
}

bool RemoteNodeAgent::beginLaunch(const coordinator::LaunchRequest& request,
                                  coordinator::JobEvents* events, std::string* error) {
  auto stream = std::make_unique<Stream>();
  Stream* s = stream.get();
  s->jobId = request.jobId;
  s->events = events;
  s->started = std::chrono::steady_clock::now();
  for (const coordinator::RankLaunch& rank : request.ranks) s->running.insert(rank.rank);
  std::lock_guard<std::mutex> lock(mutex_);
  if (shutdown_) {
    *error = "the agent connection to " + options_.host + " is shut down";
    return true;
  }
  if (streams_.count(request.jobId) != 0) {
    *error = "job " + request.jobId + " was already launched on " + options_.host;
    return true;
  }
  const v1::LaunchRequest message = rpc::toProto(request);
  signer_->sign(&s->context, rpc::kLaunchMethod, message);
  s->reader = stub_->Launch(&s->context, message);
  s->thread = std::thread([this, s] {
    common::runGuarded(
        "launch stream of job " + s->jobId + " on " + options_.host, [&] { readStream(s); },
        [&](const std::string& what) { streamFailed(s, what); });
  });
  streams_.emplace(request.jobId, std::move(stream));
  return true;
}

coordinator::LaunchStatus RemoteNodeAgent::awaitLaunch(const coordinator::LaunchRequest& request,
                                                       coordinator::JobEvents* events) {
  (void)events;
  Stream* s = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = streams_.find(request.jobId);
    if (found == streams_.end()) {
      return {"job " + request.jobId + " was not launched on " + options_.host};
    }
    s = found->second.get();
  }
  std::unique_lock<std::mutex> lock(s->mutex);
  // The call timeout counts from the request, as a single launch's did.
  if (!s->answered.wait_until(lock, s->started + options_.callTimeout,
                              [s] { return s->hasAnswer; })) {
    s->abandoned = true;
    lock.unlock();
    s->context.TryCancel();  // if the ranks start after all, the agent stops them
    return {"the agent on " + options_.host + " (" + options_.address +
            ") did not confirm the launch within " + seconds(options_.callTimeout)};
  }
  coordinator::LaunchStatus status;
  status.error = s->error;
  status.pids = s->pids;
  return status;
}

void RemoteNodeAgent::readStream(Stream* s) {
  v1::RankEvent event;
  bool launched = false;
  if (s->reader->Read(&event) && event.has_launched()) {
    launched = event.launched().error().empty();
    std::lock_guard<std::mutex> lock(s->mutex);
    s->hasAnswer = true;
    s->error = event.launched().error();
    for (const v1::RankPid& p : event.launched().pids()) s->pids.emplace_back(p.rank(), p.pid());
    launched = launched && !s->abandoned;
    s->answered.notify_all();
  }
  if (launched) {
    while (s->reader->Read(&event)) {
      if (event.has_output()) {
        const v1::RankOutput& out = event.output();
        s->events->onOutput(out.rank(), rpc::fromProto(out.stream()), out.line());
      } else if (event.has_exit()) {
        const v1::RankExit& exit = event.exit();
        if (s->running.erase(exit.rank()) == 0) continue;  // not ours, or reported twice
        process::ExitStatus status;
        status.exitCode = exit.exit_code();
        status.signal = exit.signal();
        s->events->onExit(exit.rank(), status);
      }
    }
  }
  const grpc::Status status = s->reader->Finish();
  s->finished = true;
  {
    std::lock_guard<std::mutex> lock(s->mutex);
    if (!s->hasAnswer) {
      // The stream ended before the agent said anything: the launch failed on the way there.
      s->hasAnswer = true;
      s->error = "agent on " + options_.host + " (" + options_.address +
                 "): " + describeStatus(status, options_.callTimeout);
      s->answered.notify_all();
      return;
    }
  }
  if (!launched || s->running.empty()) return;
  bool stopping = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping = shutdown_;
  }
  if (stopping) return;  // we cancelled the stream ourselves: not a lost agent
  const std::string reason = status.ok() ? "the agent ended the job's stream early"
                                         : describeStatus(status, options_.callTimeout);
  hvd::logging::program("client")->debug(
      "remote agent {} ({}): job {} stream ended with {} rank(s) running: {}", options_.host,
      options_.address, s->jobId, s->running.size(), reason);
  s->events->onAgentLost(options_.host, reason);
}

void RemoteNodeAgent::streamFailed(Stream* s, const std::string& what) {
  // Once finished, the exception came from reporting the stream's end: it was handled.
  if (s->finished) return;
  s->context.TryCancel();  // the agent stops the job's ranks when its caller goes
  v1::RankEvent ignored;
  while (s->reader->Read(&ignored)) {
  }
  s->reader->Finish();
  s->finished = true;
  const std::string reason = "internal error reading its stream: " + what;
  bool running = false;
  {
    std::lock_guard<std::mutex> lock(s->mutex);
    if (!s->hasAnswer) {
      s->hasAnswer = true;
      s->error = "agent on " + options_.host + " (" + options_.address + "): " + reason;
      s->answered.notify_all();
      return;
    }
    running = s->error.empty() && !s->abandoned && !s->running.empty();
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (shutdown_) return;
  }
  if (running) s->events->onAgentLost(options_.host, reason);
}

void RemoteNodeAgent::stop(const std::string& jobId, int signal, std::chrono::milliseconds grace) {
  v1::StopRequest request;
  request.set_job_id(jobId);
  request.set_signal(signal);
  request.set_grace_ms(grace.count());
  // A failed Stop is only logged, as a refused one is: the job's end (its stream) still comes.
  send<v1::StopRequest, v1::StopResponse>(
      rpc::kStopMethod, std::move(request),
      [this](auto* context, auto* message, auto* response, auto callback) {
        stub_->async()->Stop(context, message, response, std::move(callback));
      },
      [warn = warnOnFailure("stop of job " + jobId)](const grpc::Status& status,
                                                     const v1::StopResponse&) { warn(status); });
}

}  // namespace hvd::agent::client
