// hvdrun (docs/architecture.md "How a job flows", steps 1-2). Two modes over one main loop:
//   * embedded: every host is this machine and no --agent-port was given, so the job
//     coordinator, process supervision and the job's store all run inside this process;
//   * remote: the job is submitted to the leader agent (hosts[0]'s hvdagent) over signed gRPC,
//     which runs the same coordinator and streams the output back (launcher/remote_client.h).
//   * in a Slurm allocation with no -H: remote mode through agents hvdrun starts on the
//     allocation's nodes itself (launcher/slurm_agents.h).
// Plus the commands that run no job: --version, --check-build, `hvdrun keygen` and
// `hvdrun doctor` (launcher/doctor.h).
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "agent/auth/cluster_key.h"
#include "agent/auth/request_signer.h"
#include "agent/common/net.h"
#include "agent/common/thread_guard.h"
#include "agent/coordinator/job_coordinator.h"
#include "agent/elastic/discovery.h"
#include "agent/elastic/script_discovery.h"
#include "agent/jobs/attempts.h"
#include "agent/jobs/elastic_job.h"
#include "agent/jobs/local_host.h"
#include "agent/node/gpu_discovery.h"
#include "agent/process/posix_spawner.h"
#include "agent/rpc/call_auth.h"
#include "agent/rpc/credentials.h"
#include "contract/exit_codes.h"
#include "hvd/error.hpp"
#include "hvd_support/fd_limit.h"
#include "hvd_support/host.h"
#include "hvd_support/logging.h"
#include "hvd_support/tcp_store_server.h"
#include "launcher/build_info.h"
#include "launcher/cli.h"
#include "launcher/doctor.h"
#include "launcher/hosts.h"
#include "launcher/job_commands.h"
#include "launcher/job_environment.h"
#include "launcher/job_spec.h"
#include "launcher/keygen.h"
#include "launcher/output.h"
#include "launcher/remote_client.h"
#include "launcher/signals.h"
#include "launcher/slurm_agents.h"

extern char** environ;

namespace {

namespace coord = hvd::agent::coordinator;
namespace launcher = hvd::launcher;
namespace contract = hvd::contract;

// Prints why the job failed (nothing for success) and returns hvdrun's exit code.
int finish(const coord::JobResult& result) {
  if (result.exitCode != contract::kExitSuccess) {
    std::fputs(launcher::formatFailure(result).c_str(), stderr);
  }
  return result.exitCode;
}

// The embedded job's side of its attempts: output to the terminal, started at once, paced by
// the signal pipe (Ctrl-C cancels), each restart announced on stderr.
class EmbeddedSteps final : public hvd::agent::jobs::AttemptSteps {
 public:
  EmbeddedSteps(coord::ClientEvents* events, int signalPipe, const coord::JobSpec& spec)
      : events_(events), signalPipe_(signalPipe), spec_(spec) {}

  coord::ClientEvents* events(int) override { return events_; }
  coord::JobCoordinator::Start start(coord::JobCoordinator& coordinator, int) override {
    return coordinator.tryStart(/*queue=*/false);
  }
  void wait(coord::JobCoordinator& coordinator) override {
    launcher::waitForSignal(signalPipe_, coordinator);
  }
  void restarting(int attempt, const coord::JobResult& after) override {
    std::fputs(
        launcher::formatRestart(spec_.jobId, attempt, spec_.restart.maxRestarts, after.summary)
            .c_str(),
        stderr);
  }

 private:
  coord::ClientEvents* const events_;
  const int signalPipe_;
  const coord::JobSpec& spec_;
};

int runEmbedded(const launcher::Options& options, const std::vector<contract::HostSlots>& hosts) {
  std::vector<std::string> callerEnv;
  for (char** e = environ; *e != nullptr; ++e) callerEnv.emplace_back(*e);
  const coord::JobSpec spec = launcher::buildJobSpec(
      options, hosts, launcher::forwardedEnvironment(callerEnv, options.exports));

  launcher::OutputRenderer renderer(options.np, options.tagOutput, options.outputDir,
                                    options.timestampOutput);
  const int signalPipe = launcher::installSignalPipe();

  hvd::store::TcpStoreServer store;  // loopback, ephemeral port
  store.start();
  hvd::logging::program("launch")->debug("job {} np {} on {} (embedded), store {}", spec.jobId,
                                         spec.np, hosts[0].host, store.address());

  hvd::agent::process::PosixSpawner spawner;
  hvd::agent::node::NvmlGpuDiscovery gpus;
  hvd::agent::jobs::LocalHost agent(hosts[0].host, &spawner, &gpus);
  launcher::WakingClientEvents events(renderer, launcher::signalPipeWriteFd());
  EmbeddedSteps steps(&events, signalPipe, spec);
  hvd::agent::jobs::AttemptSite site;
  site.local = &agent;
  site.store = &store;
  site.storeHost = "127.0.0.1";  // where the store listens
  site.portHost = "127.0.0.1";   // MASTER_PORT: free on loopback when the job starts
  std::optional<coord::JobResult> result;
  {
    hvd::agent::jobs::JobAttempts attempts(spec, site, &steps);
    result = attempts.run();
  }
  agent.shutdown();
  store.stop();
  // Started at once, never put aside: run() always has the job's end.
  return finish(result.value());
}

// The hosts a discovery-script job with no -H or --hostfile starts on: the script's first
// answer, run here once as Horovod's driver runs it. When they need agents the first is the
// job's leader, which runs the script from then on (its path must exist there too). Empty when
// the script lists no host yet: the job then waits for its hosts where it would have run.
std::vector<contract::HostSlots> firstDiscoveredHosts(const launcher::Options& options) {
  std::vector<std::string> callerEnv;
  for (char** e = environ; *e != nullptr; ++e) callerEnv.emplace_back(*e);
  const int defaultSlots = options.slotsPerHost > 0 ? options.slotsPerHost : 1;
  const auto timeout = std::max(
      std::chrono::milliseconds(static_cast<long long>(options.discoveryIntervalSeconds * 1000)),
      std::chrono::milliseconds(10000));
  hvd::agent::elastic::ScriptDiscovery script(options.discoveryScript, defaultSlots, timeout,
                                              callerEnv);
  std::vector<hvd::agent::elastic::DiscoveredHost> found;
  try {
    found = script.discover();
  } catch (const hvd::Error& e) {
    // Said as the leader says a first failure, and it ends the job as there: exit 1.
    throw hvd::BackendError(std::string("host discovery failed: ") + e.what());
  }
  std::vector<contract::HostSlots> hosts;
  for (const hvd::agent::elastic::DiscoveredHost& h : found) hosts.push_back({h.host, h.slots});
  return hosts;
}

// An elastic job on this machine: every host of the job, whether -H lists it or the discovery
// script finds it, is a name of this machine (localhost, 127.0.0.1, its hostname), a host of its
// own with its own slots, all run here. Hosts of other machines need agents.
int runEmbeddedElastic(const launcher::Options& options,
                       const std::vector<contract::HostSlots>& hosts) {
  std::vector<std::string> callerEnv;
  for (char** e = environ; *e != nullptr; ++e) callerEnv.emplace_back(*e);
  coord::JobSpec spec = launcher::buildJobSpec(
      options, hosts, launcher::forwardedEnvironment(callerEnv, options.exports));
  const int defaultSlots = spec.elastic.slotsPerHost > 0 ? spec.elastic.slotsPerHost : 1;
  std::unique_ptr<hvd::agent::elastic::HostDiscovery> discovery;
  if (!spec.elastic.discoveryScript.empty()) {
    // Each run may take up to the polling period, at least 10 s: a script that asks a cluster
    // manager needs a moment, one that hangs must not stall the job's view of its hosts.
    const auto timeout = std::max(spec.elastic.discoveryInterval, std::chrono::milliseconds(10000));
    discovery = std::make_unique<hvd::agent::elastic::ScriptDiscovery>(
        spec.elastic.discoveryScript, defaultSlots, timeout, callerEnv, spec.cwd);
  } else {
    std::vector<hvd::agent::elastic::DiscoveredHost> fixed;
    for (const contract::HostSlots& h : hosts) {
      fixed.push_back({h.host, h.slots.value_or(defaultSlots)});
    }
    discovery = std::make_unique<hvd::agent::elastic::FixedHosts>(std::move(fixed));
  }

  launcher::OutputRenderer renderer(options.np, options.tagOutput, options.outputDir,
                                    options.timestampOutput);
  const int signalPipe = launcher::installSignalPipe();
  hvd::store::TcpStoreServer store;  // loopback, ephemeral port
  store.start();
  if (const int port = hvd::agent::common::pickFreePort("127.0.0.1"); port > 0) {
    spec.masterPort = port;
  }
  hvd::agent::process::PosixSpawner spawner;
  hvd::agent::node::NvmlGpuDiscovery gpus;
  hvd::agent::jobs::LocalHost agent(hosts[0].host, &spawner, &gpus);
  launcher::WakingClientEvents events(renderer, launcher::signalPipeWriteFd());
  const std::string self = hvd::localHostName();
  hvd::agent::jobs::ElasticSite site;
  site.store = &store;
  site.storeHost = "127.0.0.1";
  // A worker's exit ends the wait below at once (a 0 byte on the signal pipe is no signal).
  site.wake = [] {
    const unsigned char zero = 0;
    (void)!::write(launcher::signalPipeWriteFd(), &zero, 1);
  };
  site.connect =
      [&agent,
       self](const std::string& host) -> std::unique_ptr<hvd::agent::coordinator::NodeAgent> {
    if (!launcher::isLocalHost(host, self)) return nullptr;
    return std::make_unique<hvd::agent::jobs::LocalHost::View>(&agent, host);
  };
  coord::SteadyClock clock;
  std::optional<coord::JobResult> result;
  {
    hvd::agent::jobs::ElasticJob job(spec, site, std::move(discovery), &events, &clock);
    // Ticks every 20 ms: the workers' ready keys are read at each, so a round forms within
    // that of the last worker asking for its place.
    while (!job.finished()) {
      launcher::waitForSignal(signalPipe, job, 20);
      job.tick();
    }
    result = job.result();
  }
  agent.shutdown();
  store.stop();
  return finish(result.value());
}

// Through the agents: the key signs every call, `addresses` are their addresses (empty: each
// host's --agent-port), `signalPipe` is installed.
int runThroughAgents(const launcher::Options& options,
                     const std::vector<contract::HostSlots>& hosts,
                     const hvd::agent::auth::ClusterKey& key,
                     const std::vector<std::string>& addresses, int signalPipe) {
  launcher::checkAgentHosts(hosts);
  const hvd::v1::SubmitJobRequest request = launcher::buildSubmitRequest(options, hosts, addresses);
  const hvd::agent::rpc::TlsOptions tls = launcher::tlsOptions(options);

  launcher::RemoteJobConfig config;
  config.host = hosts[0].host;
  config.address = request.hosts(0).agent_address();
  config.startTimeout =
      std::chrono::milliseconds(static_cast<long long>(options.startTimeoutSeconds * 1000));
  config.detached = options.action == launcher::Action::kSubmit;
  hvd::logging::program("launch")->debug("job {} np {} through the agent on {} ({}), key {}",
                                         request.job_name(), options.np, config.host,
                                         config.address, key.fingerprint());

  launcher::OutputRenderer renderer(options.np, options.tagOutput, options.outputDir,
                                    options.timestampOutput);
  hvd::agent::auth::SystemClock clock;
  hvd::agent::rpc::CallSigner signer(key, clock);
  launcher::WakingClientEvents events(renderer, launcher::signalPipeWriteFd());
  launcher::RemoteJobClient client(hvd::agent::rpc::makeChannel(config.address, tls), &signer,
                                   config, &events);
  client.start(request);
  launcher::waitForJob(signalPipe, client);
  coord::JobResult result = *client.result();
  if (config.detached && result.outcome == coord::JobOutcome::kAgentUnreachable &&
      result.exitCode == contract::kExitAgentUnreachable && options.hostList.empty() &&
      options.hostfile.empty()) {
    // No -H: the job was meant for this machine's agent, which is not running.
    result.summary +=
        " (hvdrun submit hands the job to an hvdagent; start one on this machine, "
        "e.g. `hvdagent` (it listens on 127.0.0.1:7475) or "
        "scripts/systemd/hvdagent-user.service)";
  }
  if (config.detached && result.exitCode == contract::kExitSuccess) {
    // The id alone on stdout, for JOB=$(hvdrun submit ...); how to follow it on stderr.
    std::printf("%s\n", result.jobId.c_str());
    std::fprintf(stderr,
                 "hvdrun: submitted job %s to the agent on %s; follow it with `hvdrun logs -f "
                 "%s`, stop it with `hvdrun cancel %s`\n",
                 result.jobId.c_str(), config.host.c_str(), result.jobId.c_str(),
                 result.jobId.c_str());
    return 0;
  }
  return finish(result);
}

int runRemote(const launcher::Options& options, const std::vector<contract::HostSlots>& hosts) {
  const hvd::agent::auth::ClusterKey key = launcher::loadClusterKey(options);
  return runThroughAgents(options, hosts, key, {}, launcher::installSignalPipe());
}

// In a Slurm allocation without -H: through agents hvdrun starts on its nodes, under a key made
// for this job (launcher/slurm_agents.h).
int runInAllocation(const launcher::Options& options,
                    const std::vector<contract::HostSlots>& hosts) {
  if (options.action == launcher::Action::kSubmit) {
    throw hvd::InvalidArgumentError(
        "hvdrun submit in a Slurm allocation needs agents that outlive hvdrun: give -H with "
        "hosts whose hvdagent runs as a service, or submit the allocation itself (sbatch) with "
        "`hvdrun run` inside");
  }
  if (!options.tlsCert.empty()) {
    throw hvd::InvalidArgumentError(
        "--tls-cert: the agents hvdrun starts in a Slurm allocation use a one-time key, not TLS");
  }
  const int signalPipe = launcher::installSignalPipe();
  const hvd::agent::auth::ClusterKey key = hvd::agent::auth::ClusterKey::random();
  launcher::SlurmAgentsOptions agentOptions;
  agentOptions.agentPath = launcher::defaultAgentPath();
  if (const char* srun = std::getenv("HVD_SRUN"); srun != nullptr && *srun)
    agentOptions.srun = srun;
  for (const contract::HostSlots& h : hosts) agentOptions.nodes.push_back(h.host);
  agentOptions.allowRunAsRoot = options.allowRunAsRoot;
  agentOptions.logLevel = options.verbose ? "debug" : "warn";
  agentOptions.readyTimeout = std::chrono::milliseconds(
      static_cast<long long>(std::max(options.startTimeoutSeconds, 60.0) * 1000));
  std::optional<launcher::SlurmAgents> agents;
  try {
    agents.emplace(agentOptions, key, signalPipe);
  } catch (const hvd::BackendError& e) {
    std::fprintf(stderr, "hvdrun: %s\n", e.what());
    return contract::kExitAgentUnreachable;
  }
  const int code = runThroughAgents(options, hosts, key, agents->addresses(), signalPipe);
  agents->stop();
  return code;
}

int runJob(launcher::Options options) {
  if (std::optional<std::vector<contract::HostSlots>> slurm = launcher::slurmHosts(
          options, [](const char* name) -> const char* { return std::getenv(name); })) {
    if (options.printHosts) {
      std::printf("%s\n", launcher::formatHostList(*slurm).c_str());
      return 0;
    }
    if (options.np == 0) options.np = launcher::slotsTotal(*slurm);
    launcher::checkAllocationFits(options, *slurm);
    return runInAllocation(options, *slurm);
  }
  std::vector<contract::HostSlots> hosts = launcher::resolveHosts(options);
  if (options.printHosts) {
    if (options.np == 0 && options.hostList.empty() && options.hostfile.empty()) {
      hosts[0].slots.reset();
    }
    std::printf("%s\n", launcher::formatHostList(hosts).c_str());
    return 0;
  }
  const std::string self = hvd::localHostName();
  // A submitted job lives on an agent, the one on this machine when every host is local. An
  // elastic job too: its leader agent runs its rounds (docs/elastic.md "Where it runs"); one
  // with a discovery script and no -H is led by the first host of the script's first answer
  // when that answer needs agents (or --agent-port or submit asks for them).
  const bool discoveryNamesHosts =
      !options.discoveryScript.empty() && options.hostList.empty() && options.hostfile.empty();
  const std::vector<contract::HostSlots> found =
      discoveryNamesHosts ? firstDiscoveredHosts(options) : std::vector<contract::HostSlots>{};
  if (!found.empty() &&
      (options.action == launcher::Action::kSubmit || launcher::usesAgents(options, found, self))) {
    return runRemote(options, found);
  }
  if (options.action == launcher::Action::kSubmit || launcher::usesAgents(options, hosts, self)) {
    return runRemote(options, hosts);
  }
  if (options.elastic) return runEmbeddedElastic(options, hosts);
  if (hosts.size() > 1) {
    // One machine is one host: two names for it would split its ranks into two "nodes" that
    // both claim every GPU.
    throw hvd::InvalidArgumentError("'" + hosts[0].host + "' and '" + hosts[1].host +
                                    "' are both this machine; list it once with its slots");
  }
  return runEmbedded(options, hosts);
}

int runAction(int argc, char** argv) {
  // Logs go to stderr: stdout carries the ranks' output.
  spdlog::level::level_enum level = spdlog::level::info;
  if (const char* name = std::getenv("HVD_LOG_LEVEL")) level = spdlog::level::from_str(name);
  hvd::logging::configureProgram("hvdrun", level);
  launcher::Options options;
  if (std::optional<int> code = launcher::parseCommandLine(argc, argv, &options)) return *code;
  if (options.verbose) hvd::logging::configureProgram("hvdrun", spdlog::level::debug);
  switch (options.action) {
    case launcher::Action::kVersion:
      std::fputs(launcher::versionText().c_str(), stdout);
      return 0;
    case launcher::Action::kCheckBuild:
      std::fputs(launcher::checkBuildText().c_str(), stdout);
      return 0;
    case launcher::Action::kKeygen:
      return launcher::runKeygen(options.keyFile, stdout, stderr);
    case launcher::Action::kDoctor:
      return launcher::runDoctor(options);
    case launcher::Action::kRun:
    case launcher::Action::kSubmit:
      return runJob(options);
    default:
      return launcher::runJobCommand(options);
  }
}

}  // namespace

int main(int argc, char** argv) {
  // One channel per agent, and the ranks' output streams: a cluster job outgrows the usual
  // soft limit of 1024 descriptors long before the hard limit.
  hvd::raiseOpenFileLimit();
  try {
    return runAction(argc, argv);
  } catch (const launcher::SlurmStartInterrupted& e) {
    std::fprintf(stderr, "hvdrun: %s\n", e.what());
    return contract::kExitCancelled;
  } catch (const hvd::InvalidArgumentError& e) {
    std::fprintf(stderr, "hvdrun: %s\n", e.what());
    return contract::kExitUsage;
  } catch (const hvd::InternalError& e) {
    std::fprintf(stderr, "hvdrun: internal error: %s\n", e.what());
    return contract::kExitInternalError;
  } catch (const hvd::Error& e) {
    // An expected failure of its kind (a port in use, a peer gone): said as it is.
    std::fprintf(stderr, "hvdrun: %s\n", e.what());
    return 1;
  } catch (...) {
    // Anything else is a bug that escaped every handler; still one line and a documented code
    // (--help: "70 internal error") rather than std::terminate's abort and core dump.
    std::fprintf(stderr, "hvdrun: internal error: %s\n",
                 hvd::agent::common::currentExceptionMessage().c_str());
    return contract::kExitInternalError;
  }
}
