#include "launcher/doctor.h"

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>

#include "agent/auth/request_signer.h"
#include "agent/client/remote_node_agent.h"
#include "launcher/build_info.h"
#include "launcher/doctor_render.h"

namespace hvd::launcher {
namespace {

int64_t nowUnixUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::vector<AgentProbe> probeAgents(const std::vector<AgentTarget>& targets,
                                    agent::rpc::CallSigner* signer,
                                    const agent::rpc::TlsOptions& tls,
                                    std::chrono::milliseconds timeout) {
  std::vector<AgentProbe> probes(targets.size());
  std::vector<std::unique_ptr<agent::client::RemoteNodeAgent>> agents;
  std::mutex mutex;
  std::condition_variable answered;
  size_t pending = targets.size();
  for (size_t i = 0; i < targets.size(); ++i) {
    probes[i].host = targets[i].host;
    probes[i].address = targets[i].address;
    agent::client::RemoteAgentOptions remote;
    remote.host = targets[i].host;
    remote.address = targets[i].address;
    remote.tls = tls;
    remote.callTimeout = timeout;
    agents.push_back(std::make_unique<agent::client::RemoteNodeAgent>(remote, signer));
  }
  // Every call out before any answer is awaited: one --start-timeout in all, not one per host.
  for (size_t i = 0; i < targets.size(); ++i) {
    probes[i].sentUnixUs = nowUnixUs();
    agents[i]->describeAsync([&, i](agent::coordinator::DescribeResult result) {
      const int64_t now = nowUnixUs();
      std::lock_guard<std::mutex> lock(mutex);
      probes[i].answeredUnixUs = now;
      probes[i].result = std::move(result);
      if (--pending == 0) answered.notify_all();
    });
  }
  {
    // Each call answers by its deadline (RemoteNodeAgent's contract), so this wait ends.
    std::unique_lock<std::mutex> lock(mutex);
    answered.wait(lock, [&] { return pending == 0; });
  }
  for (auto& a : agents) a->shutdown();
  return probes;
}

int runDoctor(const Options& options) {
  const std::vector<AgentTarget> targets =
      jobCommandAgents(options, std::getenv("HVD_AGENT_HOSTS"));
  const agent::auth::ClusterKey key = loadClusterKey(options);
  agent::auth::SystemClock clock;
  agent::rpc::CallSigner signer(key, clock);
  const auto timeout =
      std::chrono::milliseconds(static_cast<long long>(options.startTimeoutSeconds * 1000));
  const std::vector<AgentProbe> probes =
      probeAgents(targets, &signer, tlsOptions(options), timeout);
  const DoctorReport report = buildDoctorReport(probes, hvdrunVersion());
  // The links between the hosts come here in a later change: a measurement job over the agents
  // that passed, whose findings join `report` before it is printed.
  const std::string text = options.json ? formatDoctorJson(report) : formatDoctorTable(report);
  std::fputs(text.c_str(), stdout);
  return report.ok() ? 0 : 1;
}

}  // namespace hvd::launcher
