// A NodeAgent for unit tests of the coordinator: its description (or failure) is set by the test,
// launches and stops are recorded, and the test plays the agent's side of a job by emitting
// output, exits and agent loss. Events go to the JobEvents given to the last launch(), on the
// calling thread, so tests need no threads.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/coordinator/node_agent.h"

namespace hvd::agent::coordinator {

// Holds the answers of asynchronous calls (describeAsync, reserveAsync) until `expected` calls
// have come in, then gives them all, in the order they were asked; logs "ask <host>" and
// "answer <host>" so a test can see whether every host was asked before any answer. A caller
// that waits for each answer before the next request is not left hanging: after `patience`
// the held answers go out and every later call is answered at once (and the log shows it).
class HeldAnswers {
 public:
  HeldAnswers(size_t expected, std::chrono::milliseconds patience);
  ~HeldAnswers();
  HeldAnswers(const HeldAnswers&) = delete;
  HeldAnswers& operator=(const HeldAnswers&) = delete;

  void hold(const std::string& host, std::function<void()> answer);
  std::vector<std::string> log() const;

 private:
  void release(std::unique_lock<std::mutex>& lock);

  const size_t expected_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::pair<std::string, std::function<void()>>> held_;
  std::vector<std::string> log_;
  size_t asked_ = 0;
  bool released_ = false;
  bool closing_ = false;
  std::thread timer_;
};

class FakeNodeAgent : public NodeAgent {
 public:
  // launch() reports rank r's pid as kFakePidBase + r.
  static constexpr int kFakePidBase = 1000;

  struct StopCall {
    std::string jobId;
    int signal = 0;
    std::chrono::milliseconds grace{0};
  };

  // Describes itself as `host` with no GPUs, 4 CPUs and version "fake" until told otherwise.
  explicit FakeNodeAgent(std::string host, std::string address = "");

  // Configuration.
  void setGpuCount(int count);  // count GPUs with NVML-like facts
  void setDescription(NodeDescription description);
  // describe() reports the agent unreachable, or (authentication) refusing our credentials.
  void failDescribe(std::string reason, bool authentication = false);
  void failLaunch(std::string reason);  // launch() refuses with this error
  // Launches in two halves (beginLaunch starts the ranks, awaitLaunch answers), as a remote
  // agent does; each half appends "begin <host>" / "await <host>" to `calls` when given.
  void launchInTwoHalves(std::vector<std::string>* calls = nullptr);
  // reserve() goes to `ledger` (which must outlive the agent; several fakes may share one, as
  // jobs share a node); without one it answers "not accounted" and the described GPUs are used.
  void useLedger(ledger::ResourceLedger* ledger);
  // reserve() reports the agent unreachable with this reason.
  void failReserve(std::string reason);
  // describeAsync / reserveAsync answer through `held` (which must outlive the agent) instead
  // of at once.
  void holdDescribes(HeldAnswers* held);
  void holdReserves(HeldAnswers* held);

  // Observation.
  std::vector<LaunchRequest> launches() const;
  std::vector<StopCall> stops() const;
  int describeCalls() const;
  std::vector<ledger::Request> reserves() const;
  std::vector<std::string> unreserves() const;

  // The agent's side of the job: delivered to the JobEvents of the last successful launch.
  // Returns false when nothing was launched yet (a test set-up mistake).
  bool emitOutput(int rank, process::Stream stream, const std::string& line);
  bool emitExit(int rank, process::ExitStatus status);
  bool loseAgent(const std::string& reason);

  // NodeAgent.
  std::string host() const override { return host_; }
  std::string address() const override { return address_; }
  DescribeResult describe() override;
  ReserveResult reserve(const ledger::Request& request) override;
  void describeAsync(std::function<void(DescribeResult)> done) override;
  void reserveAsync(const ledger::Request& request,
                    std::function<void(ReserveResult)> done) override;
  void unreserve(const std::string& key) override;
  LaunchStatus launch(const LaunchRequest& request, JobEvents* events) override;
  bool beginLaunch(const LaunchRequest& request, JobEvents* events, std::string* error) override;
  LaunchStatus awaitLaunch(const LaunchRequest& request, JobEvents* events) override;
  void stop(const std::string& jobId, int signal, std::chrono::milliseconds grace) override;

 private:
  JobEvents* events() const;

  const std::string host_;
  const std::string address_;
  mutable std::mutex mutex_;
  NodeDescription description_;
  std::optional<std::string> describeError_;
  bool describeAuthFailed_ = false;
  std::optional<std::string> launchError_;
  bool twoHalves_ = false;
  std::vector<std::string>* calls_ = nullptr;
  std::optional<LaunchStatus> begun_;  // the answer awaitLaunch gives
  std::optional<std::string> reserveError_;
  ledger::ResourceLedger* ledger_ = nullptr;
  HeldAnswers* heldDescribes_ = nullptr;
  HeldAnswers* heldReserves_ = nullptr;
  std::vector<ledger::Request> reserves_;
  std::vector<std::string> unreserves_;
  std::vector<LaunchRequest> launches_;
  std::vector<StopCall> stops_;
  int describeCalls_ = 0;
  JobEvents* events_ = nullptr;
};

}  // namespace hvd::agent::coordinator
