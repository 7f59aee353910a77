#include "launcher/job_commands.h"

#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <thread>

#include "agent/auth/request_signer.h"
#include "agent/client/remote_node_agent.h"
#include "agent/common/thread_guard.h"
#include "agent/rpc/call_auth.h"
#include "agent/rpc/convert.h"
#include "agent/rpc/methods.h"
#include "contract/exit_codes.h"
#include "hvd/error.hpp"
#include "hvd_support/unix_time.h"
#include "launcher/hosts.h"
#include "launcher/job_render.h"
#include "launcher/output.h"
#include "launcher/signals.h"
#include "launcher/stream_watch.h"

namespace hvd::launcher {
namespace {

namespace coord = agent::coordinator;
using agent::rpc::jobStateName;
using std::chrono::milliseconds;

constexpr int kExitNoSuchJob = 1;

// One signed connection per agent asked.
class Session {
 public:
  explicit Session(const Options& options)
      : key_(loadClusterKey(options)),
        signer_(key_, clock_),
        tls_(tlsOptions(options)),
        timeout_(static_cast<long long>(options.startTimeoutSeconds * 1000)) {}

  v1::Agent::Stub& stub(const AgentTarget& target) {
    auto it = stubs_.find(target.address);
    if (it == stubs_.end()) {
      it = stubs_
               .emplace(target.address,
                        v1::Agent::NewStub(agent::rpc::makeChannel(target.address, tls_)))
               .first;
    }
    return *it->second;
  }
  template <typename Request>
  void prepare(grpc::ClientContext* context, std::string_view method, const Request& request,
               bool deadline = true) {
    if (deadline) context->set_deadline(std::chrono::system_clock::now() + timeout_);
    context->set_wait_for_ready(false);
    signer_.sign(context, method, request);
  }
  milliseconds timeout() const { return timeout_; }

 private:
  agent::auth::ClusterKey key_;
  agent::auth::SystemClock clock_;
  agent::rpc::CallSigner signer_;
  agent::rpc::TlsOptions tls_;
  milliseconds timeout_;
  std::map<std::string, std::unique_ptr<v1::Agent::Stub>> stubs_;
};

// A failed call as hvdrun says it, and the exit code that goes with it.
int reportCallError(const AgentTarget& target, const grpc::Status& status, milliseconds timeout) {
  const std::string reason = agent::client::describeStatus(status, timeout);
  if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
    std::fprintf(stderr,
                 "hvdrun: agent on %s (%s) refused the request: %s (is --key-file the cluster's "
                 "key?)\n",
                 target.host.c_str(), target.address.c_str(), reason.c_str());
    return contract::kExitAuthenticationFailed;
  }
  if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
    std::fprintf(stderr, "hvdrun: %s\n", status.error_message().c_str());
    return contract::kExitUsage;
  }
  std::fprintf(stderr, "hvdrun: agent on %s (%s) is unreachable: %s\n", target.host.c_str(),
               target.address.c_str(), reason.c_str());
  return contract::kExitAgentUnreachable;
}

// The agent that leads `jobId` and its record; else the exit code after saying why.
struct Found {
  const AgentTarget* target = nullptr;
  v1::JobInfo job;
  int exitCode = 0;
};
Found findJob(Session& session, const std::vector<AgentTarget>& targets, const std::string& jobId) {
  Found found;
  int lastError = 0;
  for (const AgentTarget& target : targets) {
    v1::GetJobRequest request;
    request.set_job_id(jobId);
    grpc::ClientContext context;
    session.prepare(&context, agent::rpc::kGetJobMethod, request);
    const grpc::Status status = session.stub(target).GetJob(&context, request, &found.job);
    if (status.ok()) {
      found.target = &target;
      return found;
    }
    if (status.error_code() != grpc::StatusCode::NOT_FOUND) {
      lastError = reportCallError(target, status, session.timeout());
    }
  }
  if (lastError != 0 && targets.size() == 1) {
    found.exitCode = lastError;
    return found;
  }
  std::string where;
  for (const AgentTarget& t : targets) where += (where.empty() ? "" : ", ") + t.host;
  std::fprintf(stderr,
               "hvdrun: no job '%s' on the agents of %s (a job lives on the agent of its first "
               "host: name that host with -H; `hvdrun ps -H HOST` lists an agent's jobs)\n",
               jobId.c_str(), where.c_str());
  found.exitCode = lastError != 0 ? lastError : kExitNoSuchJob;
  return found;
}

int runPs(Session& session, const std::vector<AgentTarget>& targets) {
  std::vector<v1::JobInfo> jobs;
  int failures = 0;
  int lastError = 0;
  for (const AgentTarget& target : targets) {
    v1::ListJobsRequest request;
    v1::ListJobsResponse response;
    grpc::ClientContext context;
    session.prepare(&context, agent::rpc::kListJobsMethod, request);
    const grpc::Status status = session.stub(target).ListJobs(&context, request, &response);
    if (!status.ok()) {
      lastError = reportCallError(target, status, session.timeout());
      ++failures;
      continue;
    }
    for (const v1::JobInfo& job : response.jobs()) jobs.push_back(job);
  }
  std::stable_sort(jobs.begin(), jobs.end(), [](const v1::JobInfo& a, const v1::JobInfo& b) {
    return a.submitted_unix_ms() < b.submitted_unix_ms();
  });
  std::fputs(formatJobTable(jobs, nowUnixMs()).c_str(), stdout);
  return failures == static_cast<int>(targets.size()) ? lastError : 0;
}

// Watches the signal pipe while a stream is read: the first SIGINT/SIGTERM cancels `context`.
class InterruptWatch {
 public:
  explicit InterruptWatch(grpc::ClientContext* context) : pipe_(installSignalPipe()) {
    thread_ = std::thread([this, context] {
      // A watcher that fails could no longer stop the stream on Ctrl-C: end it now instead.
      agent::common::runGuarded(
          "hvdrun: Ctrl-C watcher",
          [&] {
            while (!done_) {
              pollfd pfd = {pipe_, POLLIN, 0};
              if (::poll(&pfd, 1, 100) <= 0) continue;
              unsigned char signo = 0;
              if (::read(pipe_, &signo, 1) == 1 && signo != 0) {
                interrupted_ = true;
                context->TryCancel();
              }
            }
          },
          [context](const std::string&) { context->TryCancel(); });
    });
  }
  ~InterruptWatch() {
    done_ = true;
    thread_.join();
  }
  bool interrupted() const { return interrupted_; }

 private:
  int pipe_;
  std::atomic<bool> done_{false};
  std::atomic<bool> interrupted_{false};
  std::thread thread_;
};

// logs and attach: the JobLogs stream rendered like an attached run's output.
int runLogs(Session& session, const Options& options, const AgentTarget& target,
            const v1::JobInfo& job, bool attach) {
  v1::JobLogsRequest request;
  request.set_job_id(options.jobId);
  if (options.logRanks) {
    request.set_has_ranks(true);
    request.set_first_rank(options.logRanks->first);
    request.set_last_rank(options.logRanks->second);
  }
  request.set_stderr_only(options.stderrOnly);
  request.set_tail_lines(options.tailLines);
  request.set_follow(attach || options.follow);
  request.set_from_end(attach);
  grpc::ClientContext context;
  // No deadline for the call: a log's stream lasts as long as its size and its reader take.
  // Without --follow each wait for the agent's next message is bounded instead (StreamWatch);
  // a followed job may rightly be silent for hours.
  session.prepare(&context, agent::rpc::kJobLogsMethod, request, /*deadline=*/false);
  OutputRenderer renderer(std::max(1, job.np()), options.tagOutput, "", false);
  std::optional<coord::JobResult> end;
  grpc::Status status;
  bool interrupted = false;
  bool silent = false;
  {
    InterruptWatch watch(&context);
    std::optional<StreamWatch> reads;
    if (!request.follow()) reads.emplace(&context, session.timeout());
    std::unique_ptr<grpc::ClientReader<v1::JobLogsEvent>> reader =
        session.stub(target).JobLogs(&context, request);
    if (attach) {
      // The agent answers with its metadata once it has marked where "from now" is: saying
      // "attached" only then makes it true (every line after it is followed). An error answer
      // has no such key and is reported below instead.
      reader->WaitForInitialMetadata();
      if (context.GetServerInitialMetadata().count(agent::rpc::kFollowingFromEndKey) != 0) {
        std::fprintf(stderr, "hvdrun: attached to job %s (%s); Ctrl-C detaches, the job goes on\n",
                     job.job_id().c_str(), jobStateName(job.state()).c_str());
      }
    }
    v1::JobLogsEvent event;
    // Where the lines pass from one attempt to the next, the restart is said on stderr as an
    // attached run says it, with the failure that caused it when the record has it.
    std::optional<int> attempt;
    const auto render = [&](const v1::JobOutput& o) {
      if (attempt && o.attempt() > *attempt) {
        std::string why;
        for (const v1::AttemptInfo& a : job.attempts()) {
          if (a.attempt() == o.attempt() - 1) why = a.end().summary();
        }
        std::fflush(stdout);
        std::fputs(formatRestart(job.job_id(), o.attempt(), job.max_restarts(), why).c_str(),
                   stderr);
      }
      attempt = o.attempt();
      renderer.onOutput(o.rank(), o.host(), agent::rpc::fromProto(o.stream()), o.line());
    };
    while (true) {
      if (reads) reads->waiting();
      if (!reader->Read(&event)) break;
      if (reads) reads->received();
      if (event.has_output()) {
        render(event.output());
      } else if (event.has_batch()) {
        for (const v1::JobOutput& o : event.batch().lines()) render(o);
      } else if (event.has_end()) {
        end = agent::rpc::fromProto(event.end());
      }
    }
    status = reader->Finish();
    interrupted = watch.interrupted();
    silent = reads && reads->expired();
  }
  std::fflush(stdout);
  if (interrupted) {
    if (attach) {
      std::fprintf(stderr,
                   "hvdrun: detached from job %s; it keeps running (hvdrun cancel %s stops it)\n",
                   options.jobId.c_str(), options.jobId.c_str());
      return 0;
    }
    return contract::kExitCancelled;
  }
  if (silent) {
    // Said as a call that timed out: "no answer within <timeout>".
    return reportCallError(target, grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, ""),
                           session.timeout());
  }
  if (!status.ok()) return reportCallError(target, status, session.timeout());
  if (!attach && agent::rpc::isFinalState(job.state()) && job.log_lines_dropped() > 0) {
    // The log's own notice may be missing too (a disk too full even for it): the record says.
    std::fprintf(
        stderr, "hvdrun: job %s: %llu line(s) were not logged (%s)\n", job.job_id().c_str(),
        static_cast<unsigned long long>(job.log_lines_dropped()),
        job.log_drop_reason().empty() ? "the agent's --max-log-mb" : job.log_drop_reason().c_str());
  }
  if (!attach) return 0;
  if (!end) {
    std::fprintf(stderr, "hvdrun: the agent on %s ended the stream before job %s ended\n",
                 target.host.c_str(), options.jobId.c_str());
    return contract::kExitAgentLost;
  }
  if (end->exitCode != 0) std::fputs(formatFailure(*end).c_str(), stderr);
  return end->exitCode;
}

int runCancel(Session& session, const Options& options, const AgentTarget& target,
              const v1::JobInfo& job) {
  v1::CancelJobRequest request;
  request.set_job_id(options.jobId);
  if (options.cancelGraceSeconds) {
    request.set_has_grace(true);
    request.set_grace_ms(static_cast<long long>(*options.cancelGraceSeconds * 1000));
  }
  v1::CancelJobResponse response;
  {
    grpc::ClientContext context;
    session.prepare(&context, agent::rpc::kCancelJobMethod, request);
    const grpc::Status status = session.stub(target).CancelJob(&context, request, &response);
    if (!status.ok()) return reportCallError(target, status, session.timeout());
  }
  if (!response.was_running()) {
    std::printf("job %s already ended (%s); nothing to cancel\n", options.jobId.c_str(),
                jobStateName(response.state()).c_str());
    return 0;
  }
  std::fprintf(stderr, "hvdrun: stopping job %s\n", options.jobId.c_str());
  // Until it has ended: the grace, the agents' SIGKILL and the exit reports, which the leader
  // gives up waiting for after its own slack; past that something is wrong, and hvdrun says so.
  const milliseconds grace =
      options.cancelGraceSeconds
          ? milliseconds(static_cast<long long>(*options.cancelGraceSeconds * 1000))
          : milliseconds(job.grace_ms());
  const milliseconds patience =
      grace + coord::JobCoordinator::kStopReportSlack + std::chrono::seconds(20);
  const auto deadline = std::chrono::steady_clock::now() + patience;
  while (std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(200));
    v1::GetJobRequest get;
    get.set_job_id(options.jobId);
    v1::JobInfo current;
    grpc::ClientContext context;
    session.prepare(&context, agent::rpc::kGetJobMethod, get);
    const grpc::Status status = session.stub(target).GetJob(&context, get, &current);
    if (!status.ok()) return reportCallError(target, status, session.timeout());
    if (agent::rpc::isFinalState(current.state())) {
      std::printf("job %s %s\n", options.jobId.c_str(), jobStateName(current.state()).c_str());
      return 0;
    }
  }
  std::fprintf(stderr,
               "hvdrun: job %s has not ended %lld s after the cancel (its grace is %lld s); "
               "`hvdrun status %s` shows which ranks are left\n",
               options.jobId.c_str(), static_cast<long long>(patience.count() / 1000),
               static_cast<long long>(grace.count() / 1000), options.jobId.c_str());
  return contract::kExitTimeout;
}

}  // namespace

std::vector<AgentTarget> jobCommandAgents(const Options& options, const char* agentHostsEnv) {
  std::vector<contract::HostSlots> hosts;
  if (!options.hostList.empty() && !options.hostfile.empty()) {
    throw InvalidArgumentError("give either -H or --hostfile, not both");
  }
  if (!options.hostList.empty()) {
    hosts = contract::parseHostList(options.hostList);
  } else if (!options.hostfile.empty()) {
    hosts = contract::parseHostfile(options.hostfile);
  } else if (agentHostsEnv != nullptr && *agentHostsEnv != '\0') {
    try {
      hosts = contract::parseHostList(agentHostsEnv);
    } catch (const InvalidArgumentError& e) {
      throw InvalidArgumentError(std::string("HVD_AGENT_HOSTS: ") + e.what());
    }
  } else {
    hosts = {contract::HostSlots{"localhost", std::nullopt}};
  }
  std::vector<AgentTarget> targets;
  for (const contract::HostSlots& h : hosts)
    targets.push_back({h.host, agentAddress(h.host, options.agentPort)});
  return targets;
}

agent::auth::ClusterKey loadClusterKey(const Options& options) {
  if (options.keyFile.empty()) {
    throw InvalidArgumentError(
        "no cluster key file: give --key-file or set HVD_KEY_FILE (HOME is not set)");
  }
  try {
    return agent::auth::ClusterKey::load(options.keyFile);
  } catch (const InvalidArgumentError& e) {
    std::string message = e.what();
    if (message.find("hvdrun keygen") == std::string::npos) {
      message += " (create one with `hvdrun keygen --key-file " + options.keyFile +
                 "` and copy it to every host)";
    }
    throw InvalidArgumentError(message);
  }
}

agent::rpc::TlsOptions tlsOptions(const Options& options) {
  return {options.tlsCert, options.tlsKey, options.tlsCa};
}

int runJobCommand(const Options& options) {
  const std::vector<AgentTarget> targets =
      jobCommandAgents(options, std::getenv("HVD_AGENT_HOSTS"));
  Session session(options);
  if (options.action == Action::kPs) return runPs(session, targets);
  const Found found = findJob(session, targets, options.jobId);
  if (found.target == nullptr) return found.exitCode;
  switch (options.action) {
    case Action::kStatus:
      std::fputs(formatJobStatus(found.job, nowUnixMs()).c_str(), stdout);
      return 0;
    case Action::kLogs:
      return runLogs(session, options, *found.target, found.job, /*attach=*/false);
    case Action::kAttach:
      return runLogs(session, options, *found.target, found.job, /*attach=*/true);
    case Action::kCancel:
      return runCancel(session, options, *found.target, found.job);
    default:
      return contract::kExitUsage;
  }
}

}  // namespace hvd::launcher
