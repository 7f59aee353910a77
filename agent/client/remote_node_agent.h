// The NodeAgent of a host whose hvdagent is reached over gRPC (docs/architecture.md "How a job
// flows", steps 3-4): the leader's coordinator describes, launches and stops through it exactly as
// it does through the in-process LocalHost (agent/jobs/local_host.h).
//
// launch() opens the Launch stream and waits (up to the call timeout) for the agent's first
// event, which says whether every rank started. The stream is read through gRPC's callback API:
// its events reach JobEvents on gRPC's threads, one at a time, and no thread of ours is held
// per stream. When the stream ends before every launched rank has
// reported its exit (agent killed, host gone: keepalive pings notice within seconds), the job
// gets onAgentLost with the reason, and nothing more from this agent.
//
// As a relay::SubtreeLink it also carries calls for the hosts of the agent's subtree, which that
// agent relays (proto Relay): answers for every host come back in one answer or on the one
// Launch stream, and a call's deadline is the call timeout times (1 + the subtree's depth), so
// the deepest hop times out first and its parent can still answer for it. When the stream
// breaks, the agent and every host reached through it are lost, the agent first.
//
// Every call is signed (rpc::CallSigner) and has a deadline; failures are values whose reason
// says what happened ("connection refused", "no answer within 5 s", "authentication failed: bad
// signature"), never exceptions.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agent/coordinator/node_agent.h"
#include "agent/relay/subtree_link.h"
#include "agent/rpc/call_auth.h"
#include "agent/rpc/credentials.h"
#include "hvd/v1/agent.grpc.pb.h"

namespace hvd::agent::client {

struct RemoteAgentOptions {
  std::string host;     // as the user named it; used in messages and onAgentLost
  std::string address;  // "host:port" of its hvdagent
  rpc::TlsOptions tls;
  std::string tlsTargetName;  // see rpc::makeChannel
  // Deadline of Describe and Stop, and how long launch() waits for the agent's answer.
  std::chrono::milliseconds callTimeout{5000};
};

// Maps a failed call's status to the reason in an AgentError / launch error / lost agent:
// "authentication failed: <why>" for UNAUTHENTICATED, "no answer within N s" for
// DEADLINE_EXCEEDED, else the status message (or code name when the message is empty).
std::string describeStatus(const grpc::Status& status, std::chrono::milliseconds timeout);

class RemoteNodeAgent : public coordinator::NodeAgent, public relay::SubtreeLink {
 public:
  // `signer` must outlive the agent.
  RemoteNodeAgent(RemoteAgentOptions options, rpc::CallSigner* signer);
  // Same as shutdown().
  ~RemoteNodeAgent() override;
  RemoteNodeAgent(const RemoteNodeAgent&) = delete;
  RemoteNodeAgent& operator=(const RemoteNodeAgent&) = delete;

  // Cancels every open Launch stream (the remote agent then stops those ranks), waits for each
  // to end and for the calls in flight (each ends by its deadline); no event or
  // answer is delivered after it returns.
  void shutdown();

  std::string host() const override { return options_.host; }
  std::string address() const override { return options_.address; }
  coordinator::DescribeResult describe() override;
  coordinator::ReserveResult reserve(const ledger::Request& request) override;
  // gRPC's callback API: no thread of ours waits on the call.
  void describeAsync(std::function<void(coordinator::DescribeResult)> done) override;
  void reserveAsync(const ledger::Request& request,
                    std::function<void(coordinator::ReserveResult)> done) override;
  // Sent asynchronously, as stop() is; returns at once.
  void unreserve(const std::string& key) override;
  bool beginLaunch(const coordinator::LaunchRequest& request, coordinator::JobEvents* events,
                   std::string* error) override;
  coordinator::LaunchStatus awaitLaunch(const coordinator::LaunchRequest& request,
                                        coordinator::JobEvents* events) override;
  coordinator::LaunchStatus launch(const coordinator::LaunchRequest& request,
                                   coordinator::JobEvents* events) override;
  // Sends Stop asynchronously (a dead agent must not block the coordinator) and returns at once.
  void stop(const std::string& jobId, int signal, std::chrono::milliseconds grace) override;

  // relay::SubtreeLink: the NodeAgent calls above are these with an empty subtree.
  void describeTree(const std::vector<relay::Target>& subtree, int width,
                    std::function<void(std::vector<coordinator::DescribeResult>)> done) override;
  void reserveTree(const std::vector<ledger::Request>& requests,
                   const std::vector<relay::Target>& subtree, int width,
                   std::function<void(std::vector<coordinator::ReserveResult>)> done) override;
  void unreserveTree(const std::string& key, const std::vector<relay::Target>& subtree,
                     int width) override;
  void stopTree(const std::string& jobId, int signal, std::chrono::milliseconds grace,
                const std::vector<relay::Target>& subtree, int width) override;
  std::string beginLaunchTree(const std::vector<coordinator::LaunchRequest>& requests,
                              const std::vector<relay::Target>& subtree, int width,
                              coordinator::JobEvents* events) override;
  coordinator::LaunchStatus awaitLaunchTree(const std::string& jobId, size_t index) override;
  void cancelLaunches() override;
  // The first half of shutdown(): the streams, not the calls in flight.
  void closeLaunches() override;

 private:
  struct Stream;
  struct CallBase {
    virtual ~CallBase() = default;
    bool answered = false;  // under mutex_
  };
  template <typename Request, typename Response>
  struct Call;

  // Sends one signed unary call with the call timeout through sendCall (the stub's async form)
  // and hands its status and response to answer on gRPC's thread; kept in calls_ until then.
  // After shutdown() nothing is sent: answer gets CANCELLED at once, on the calling thread.
  template <typename Request, typename Response, typename Send, typename Answer>
  void send(std::string_view method, Request request, std::chrono::milliseconds timeout,
            Send sendCall, Answer answer);
  // The deadline of a call for this agent and `subtree`.
  std::chrono::milliseconds timeoutFor(size_t subtree, int width) const;
  // A failed call's AgentError: this host, its address, describeStatus, authentication.
  coordinator::AgentError errorOf(const grpc::Status& status,
                                  std::chrono::milliseconds timeout) const;
  // The errors of a failed call for this agent and `subtree`: this agent's, and for each subtree
  // host one that names this agent as the one it was reached through.
  std::vector<coordinator::AgentError> errorsOf(const grpc::Status& status,
                                                std::chrono::milliseconds timeout,
                                                const std::vector<relay::Target>& subtree) const;
  // The answers of a relayed Describe or Reserve: this agent's from the response (setOwn), each
  // subtree host's from its relayed entry (setRelayed, or the failure it carries), or every one
  // failed with the call (errorsOf).
  template <typename Result, typename Response, typename SetOwn, typename SetRelayed>
  std::vector<Result> answersOf(const grpc::Status& status, std::chrono::milliseconds timeout,
                                const std::vector<relay::Target>& subtree, const Response& response,
                                SetOwn setOwn, SetRelayed setRelayed) const;
  // The answer of a call whose failure is only logged ("<what> on <host> (<address>) failed").
  std::function<void(const grpc::Status&)> warnOnFailure(std::string what) const;
  // Frees the answered calls (mutex_ held).
  void reapAnswered();
  // One event of a Launch stream (gRPC's thread, one at a time per stream).
  void handleEvent(Stream* stream, const v1::RankEvent& event);
  void streamEnded(Stream* stream, const grpc::Status& status);
  // The stream ended (status, or an internal error): unanswered hosts get `reason` as their
  // launch error, hosts with running ranks are lost (this agent first). Never under a lock.
  void endStream(Stream* stream, const std::string& reason, bool quiet);

  const RemoteAgentOptions options_;
  rpc::CallSigner* const signer_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Agent::Stub> stub_;

  std::mutex mutex_;
  bool shutdown_ = false;
  std::map<std::string, std::unique_ptr<Stream>> streams_;  // by job id
  std::vector<std::unique_ptr<CallBase>> calls_;            // unary calls sent, freed once answered
  std::condition_variable idle_;
};

}  // namespace hvd::agent::client
