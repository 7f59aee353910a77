// hvdagent: the per-node daemon (docs/architecture.md "How a job flows", "Security",
// "Failure semantics"). Wires the pieces together: the cluster key and the call guard, the node's
// one LocalHost (process supervision), job records and their clean-up after a crash, the job store
// every job it leads uses, remote agents for the other hosts of those jobs, and the gRPC server.
// Closed by default: loopback bind, every call signed, never root unless asked twice.
#include <fcntl.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/auth/cluster_key.h"
#include "agent/auth/request_signer.h"
#include "agent/client/remote_node_agent.h"
#include "agent/common/net.h"
#include "agent/common/thread_guard.h"
#include "agent/daemon/agent_cli.h"
#include "agent/daemon/slurm_step.h"
#include "agent/jobs/environment.h"
#include "agent/jobs/local_host.h"
#include "agent/metrics/collect.h"
#include "agent/metrics/exposition.h"
#include "agent/metrics/metrics_server.h"
#include "agent/node/gpu_discovery.h"
#include "agent/node/node_facts.h"
#include "agent/process/posix_spawner.h"
#include "agent/process/signal_pipe.h"
#include "agent/records/atomic_file.h"
#include "agent/records/job_history.h"
#include "agent/records/job_records.h"
#include "agent/rpc/call_auth.h"
#include "agent/rpc/credentials.h"
#include "agent/service/agent_service.h"
#include "contract/exit_codes.h"
#include "hvd/error.hpp"
#include "hvd_support/fd_limit.h"
#include "hvd_support/host.h"
#include "hvd_support/logging.h"
#include "hvd_support/tcp_store_server.h"

extern char** environ;

namespace {

namespace svc = hvd::agent::service;
namespace node = hvd::agent::node;
namespace jobs = hvd::agent::jobs;
namespace records = hvd::agent::records;
namespace daemon = hvd::agent::daemon;
namespace metrics = hvd::agent::metrics;

// Blocks until SIGTERM or SIGINT arrives; returns it. Meanwhile, every second, writes again the
// job records a full or failing disk refused.
int waitForSignal(int pipeRead, records::JobHistory* history) {
  for (;;) {
    pollfd pfd = {pipeRead, POLLIN, 0};
    if (::poll(&pfd, 1, 1000) <= 0) {
      history->flush();
      continue;
    }
    unsigned char signo = 0;
    if (::read(pipeRead, &signo, 1) == 1 && signo != 0) return signo;
  }
}

// Atomically, so a test polling for the file never reads half of it. `option` names it in the
// error.
void writePortFile(const std::string& path, int port, const char* option = "--port-file") {
  if (!records::writeFileAtomically(path, std::to_string(port) + "\n", 0644)) {
    throw hvd::InvalidArgumentError("cannot write " + std::string(option) + " " + path + ": " +
                                    std::strerror(errno));
  }
}

// --metrics-listen: the metrics server, on a thread of its own, reading the agent's parts at
// each scrape (agent/metrics). Null when not asked for.
std::unique_ptr<metrics::MetricsServer> serveMetrics(const daemon::AgentCliOptions& options,
                                                     const metrics::AgentParts& parts) {
  if (!options.metricsListen) return nullptr;
  auto server = std::make_unique<metrics::MetricsServer>(*options.metricsListen, [parts] {
    return metrics::renderMetrics(metrics::collectSnapshot(parts));
  });
  if (!options.metricsPortFile.empty()) {
    writePortFile(options.metricsPortFile, server->port(), "--metrics-port-file");
  }
  return server;
}

int serve(const daemon::AgentCliOptions& options, const hvd::agent::common::ListenAddress& listen,
          const hvd::agent::auth::ClusterKey& key, std::vector<std::string> baseEnv) {
  std::shared_ptr<grpc::ServerCredentials> credentials =
      hvd::agent::rpc::makeServerCredentials(options.tls);

  records::JobRecords records(options.stateDir);
  const records::CleanupReport cleanup = records.cleanupLeftovers();
  if (cleanup.killed > 0 || cleanup.skipped > 0) {
    hvd::logging::program("daemon")->warn(
        "cleaned up after a previous agent: killed {} leftover job group(s), "
        "{} record(s) no longer matched a running group",
        cleanup.killed, cleanup.skipped);
  }

  records::JobHistory history(options.stateDir, options.keepJobs);
  const records::HistoryLoadReport& loaded = history.loadReport();
  if (loaded.markedLost > 0) {
    hvd::logging::program("daemon")->warn(
        "{} job(s) were running when the previous agent died; marked LOST", loaded.markedLost);
  }
  if (loaded.untrusted > 0) {
    hvd::logging::program("daemon")->warn(
        "{} job director(ies) under {}/jobs were ignored: another user could have "
        "written them (see the warnings above)",
        loaded.untrusted, options.stateDir);
  }
  if (loaded.unreadable > 0) {
    hvd::logging::program("daemon")->warn(
        "{} job director(ies) under {}/jobs have no readable record", loaded.unreadable,
        options.stateDir);
  }

  hvd::store::TcpStoreServerOptions storeOptions;
  storeOptions.bindAddress = listen.host;
  storeOptions.maxJobBytes = static_cast<size_t>(options.maxStoreMb) << 20;
  hvd::store::TcpStoreServer store(storeOptions);
  store.start();

  hvd::agent::process::PosixSpawner spawner;
  hvd::agent::node::NvmlGpuDiscovery nvml;
  hvd::agent::node::CachedGpuDiscovery gpus(nvml);
  // The ledger's GPUs are the node's at start-up: GPUs do not come and go under a running agent.
  hvd::agent::ledger::ResourceLedger ledger(hvd::localHostName(), gpus.discover(), options.slots,
                                            [] { return std::chrono::steady_clock::now(); });
  jobs::LocalHostOptions localOptions;
  localOptions.host = hvd::localHostName();
  localOptions.spawner = &spawner;
  localOptions.gpus = &gpus;
  localOptions.ledger = &ledger;
  localOptions.records = &records;
  localOptions.baseEnv = std::move(baseEnv);
  jobs::LocalHost local(std::move(localOptions));

  hvd::agent::auth::SystemClock clock;
  hvd::agent::auth::RequestVerifier verifier(key, clock);
  hvd::agent::rpc::CallGuard guard(&verifier);
  hvd::agent::rpc::CallSigner signer(key, clock);

  svc::AgentServiceOptions serviceOptions;
  serviceOptions.listenHost = listen.host;
  serviceOptions.tlsEnabled = options.tls.enabled();
  serviceOptions.shutdownGrace =
      std::chrono::milliseconds(static_cast<long long>(options.shutdownGraceSeconds * 1000));
  const hvd::agent::rpc::TlsOptions tls = options.tls;
  serviceOptions.maxLogBytes = options.maxLogMb << 20;
  serviceOptions.ledger = &ledger;
  serviceOptions.remoteAgents = [tls, &signer](const jobs::RemoteHost& host) {
    hvd::agent::client::RemoteAgentOptions remote;
    remote.host = host.host;
    remote.address = host.address;
    remote.tls = tls;
    remote.callTimeout = host.callTimeout;
    return std::make_unique<hvd::agent::client::RemoteNodeAgent>(remote, &signer);
  };
  svc::AgentService service(serviceOptions, &guard, &local, &gpus, &store, &history);

  // Before the gRPC server: an address it cannot bind stops the agent before it serves, and
  // the metrics' port file is there once --port-file is.
  metrics::AgentParts metricsParts;
  metricsParts.version = node::agentVersion();
  metricsParts.led = &service.ledJobs();
  metricsParts.local = &local;
  metricsParts.ledger = &ledger;
  metricsParts.history = &history;
  std::unique_ptr<metrics::MetricsServer> metricsServer = serveMetrics(options, metricsParts);

  const int signalPipe = hvd::agent::process::installSignalPipe();

  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen.toString(), credentials, &port);
  hvd::agent::rpc::configureServerKeepalive(&builder);
  // gRPC sets SO_REUSEPORT by default: a second agent (or anything else of this user) could
  // then bind the same port and take a share of the calls. One port, one agent.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    throw hvd::BackendError("cannot listen on " + listen.toString() +
                            " (address in use, or not an address of this host?)");
  }
  if (!options.portFile.empty()) writePortFile(options.portFile, port);
  if (options.slurmStep) {
    // hvdrun reads this through srun; then the end of stdin is the end of this agent.
    const std::string line =
        daemon::readyLine(daemon::slurmNodeName(std::getenv),
                          hvd::agent::common::joinHostPort(listen.host, port)) +
        "\n";
    std::fputs(line.c_str(), stdout);
    std::fflush(stdout);
    const int wake = hvd::agent::process::signalPipeWriteFd();
    daemon::watchForEnd(STDIN_FILENO, [wake] {
      const unsigned char signo = SIGTERM;
      (void)!::write(wake, &signo, 1);
    });
  }
  hvd::logging::program("daemon")->info(
      "hvdagent {}: listening on {}, key fingerprint {}, TLS {}, store port {}, "
      "state dir {} ({} job record(s))",
      node::agentVersion(), hvd::agent::common::joinHostPort(listen.host, port), key.fingerprint(),
      options.tls.enabled() ? "on (client certificates required)" : "off", store.port(),
      records.dir(), loaded.loaded);
  if (metricsServer) {
    hvd::logging::program("daemon")->info(
        "metrics at http://{}/metrics",
        hvd::agent::common::joinHostPort(options.metricsListen->host, metricsServer->port()));
  }
  if (const int resumed = service.resumeQueued(); resumed > 0) {
    hvd::logging::program("daemon")->info(
        "{} queued job(s) of the previous agent are waiting again", resumed);
  }

  const int signo = waitForSignal(signalPipe, &history);
  hvd::logging::program("daemon")->info("got {}, stopping running jobs and shutting down",
                                        signo == SIGINT ? "SIGINT" : "SIGTERM");
  if (metricsServer) metricsServer->stop();
  service.shutdown();
  server->Shutdown(std::chrono::system_clock::now() + serviceOptions.shutdownGrace +
                   std::chrono::seconds(5));
  server->Wait();
  service.join();    // led jobs end as their ranks exit (bounded by the shutdown grace)
  local.shutdown();  // whatever is left: SIGKILL and reap
  if (const size_t unwritten = history.flush(); unwritten > 0) {
    hvd::logging::program("daemon")->error(
        "{} job record(s) could not be written ({}); after a restart those jobs read "
        "as they were last recorded",
        unwritten, history.space()->describe());
  }
  store.stop();
  hvd::logging::program("daemon")->info("stopped");
  return 0;
}

int agentMain(int argc, char** argv) {
  // The jobs' base environment is the agent's as it was started, before anything changes it.
  std::vector<std::string> baseEnv = jobs::baseEnvironment(environ);

  daemon::AgentCliOptions options;
  if (std::optional<int> code = daemon::parseAgentCommandLine(argc, argv, &options)) return *code;
  if (options.version) {
    std::printf("hvdagent %s\n", node::agentVersion().c_str());
    return 0;
  }
  // A --slurm-step agent's stdout is hvdrun's channel for the ready line; its log goes to stderr,
  // which srun forwards to hvdrun's stderr.
  hvd::logging::configureProgram(
      "hvdagent", spdlog::level::from_str(options.logLevel),
      options.slurmStep ? hvd::logging::Sink::kStderr : hvd::logging::Sink::kStdout);

  // The job store holds one connection per rank, and the workers inherit the limit: raise the
  // soft limit of open files to the hard one before anything opens.
  const hvd::FileLimit files = hvd::raiseOpenFileLimit();
  if (files.now != files.before) {
    hvd::logging::program("daemon")->info("open-file limit raised from {} to {}", files.before,
                                          files.now);
  }

  const std::string refusal = daemon::rootRefusal(::geteuid() == 0, options.allowRunAsRoot,
                                                  std::getenv("HVD_ALLOW_RUN_AS_ROOT_CONFIRM"));
  if (!refusal.empty()) {
    std::fprintf(stderr, "%s\n", refusal.c_str());
    return 2;
  }
  hvd::agent::common::ListenAddress listen;
  std::optional<hvd::agent::auth::ClusterKey> key;
  std::optional<daemon::TemporaryStateDir> temporaryState;
  if (options.slurmStep) {
    try {
      key = hvd::agent::auth::ClusterKey::receive(STDIN_FILENO,
                                                  "the cluster key on stdin (--slurm-step)");
      if (!options.listenGiven) options.listen = daemon::slurmStepListen(std::getenv);
      if (!options.stateDirGiven) {
        temporaryState.emplace(std::getenv);
        options.stateDir = temporaryState->path();
      }
    } catch (const hvd::Error& e) {
      std::fprintf(stderr, "hvdagent: %s\n", e.what());
      return 2;
    }
  }
  try {
    listen = hvd::agent::common::parseListenAddress(options.listen);
  } catch (const hvd::InvalidArgumentError& e) {
    std::fprintf(stderr, "hvdagent: %s\n", e.what());
    return 2;
  }
  if (!key && options.keyFile.empty()) {
    std::fprintf(stderr,
                 "hvdagent: no cluster key file: pass --key-file F or set HVD_KEY_FILE (create "
                 "one with `hvdrun keygen`)\n");
    return 2;
  }
  try {
    if (!key) key = hvd::agent::auth::ClusterKey::load(options.keyFile);
  } catch (const hvd::Error& e) {
    std::fprintf(stderr, "hvdagent: cannot use the cluster key: %s\n", e.what());
    return 2;
  }
  try {
    return serve(options, listen, *key, std::move(baseEnv));
  } catch (const hvd::InvalidArgumentError& e) {
    std::fprintf(stderr, "hvdagent: %s\n", e.what());
    return 2;
  } catch (const hvd::InternalError&) {
    throw;
  } catch (const hvd::Error& e) {
    // Expected failures of their kind: the port is taken, the state dir is not writable.
    std::fprintf(stderr, "hvdagent: %s\n", e.what());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return agentMain(argc, argv);
  } catch (...) {
    // A bug that escaped every handler: one line and EX_SOFTWARE, not std::terminate's abort
    // (systemd restarts the agent either way; the line says why it had to).
    std::fprintf(stderr, "hvdagent: internal error: %s\n",
                 hvd::agent::common::currentExceptionMessage().c_str());
    return hvd::contract::kExitInternalError;
  }
}
