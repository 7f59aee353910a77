#include "agent/daemon/agent_cli.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "agent/common/cli_checks.h"
#include "agent/metrics/metrics_listen.h"
#include "agent/records/job_records.h"
#include "agent/rpc/defaults.h"
#include "hvd/error.hpp"

namespace hvd::agent::daemon {

using common::finiteRange;
using common::integerRange;
using common::nonEmpty;

std::optional<int> parseAgentCommandLine(int argc, char** argv, AgentCliOptions* options) {
  CLI::App app(
      "hvdagent: the per-node daemon of hvd. It describes its node and runs the ranks of jobs "
      "that hvdrun submits, for callers that sign every request with the cluster key.",
      "hvdagent");
  common::prefixErrorsWithName(&app);
  app.footer(
      "Exit status: 0 after SIGTERM or SIGINT (running jobs stopped); 1 cannot serve (address "
      "in use, state dir not writable); 2 usage error (also a missing or unsafe key file, or root "
      "without both confirmations); 70 internal error (a bug in hvdagent: please report the "
      "message).\n");
  options->listen = "127.0.0.1:" + std::to_string(rpc::kDefaultAgentPort);
  app.add_option("--listen", options->listen,
                 "IP:PORT or [IPv6]:PORT to serve on (default loopback 127.0.0.1:" +
                     std::to_string(rpc::kDefaultAgentPort) +
                     "; a wider bind, e.g. 0.0.0.0:7475, must be asked for; port 0: ephemeral)")
      ->check(nonEmpty());
  app.add_option("--key-file", options->keyFile,
                 "cluster key file, mode 0600 (default: $HVD_KEY_FILE, else ~/.hvd/cluster.key)")
      ->check(nonEmpty());
  app.add_option("--tls-cert", options->tls.certFile, "server certificate (PEM) for mutual TLS")
      ->check(nonEmpty());
  app.add_option("--tls-key", options->tls.keyFile, "private key of --tls-cert (PEM)")
      ->check(nonEmpty());
  app.add_option("--tls-ca", options->tls.caFile,
                 "CA (PEM) that client certificates must be signed by")
      ->check(nonEmpty());
  app.add_option("--state-dir", options->stateDir,
                 "where job records and logs live, one directory per job under jobs/ (default: "
                 "/var/lib/hvdagent as root, else "
                 "$XDG_STATE_HOME/hvdagent or ~/.local/state/hvdagent)")
      ->check(nonEmpty());
  app.add_flag("--allow-run-as-root", options->allowRunAsRoot,
               "run as root (also needs HVD_ALLOW_RUN_AS_ROOT_CONFIRM=1 in the environment)");
  app.add_option("--port-file", options->portFile,
                 "write the bound port to this file once serving (for --listen ...:0)")
      ->check(nonEmpty());
  app.add_option("--log-level", options->logLevel,
                 "trace, debug, info, warn, error, critical or off (default info)")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  app.add_option("--shutdown-grace", options->shutdownGraceSeconds,
                 "on SIGTERM/SIGINT, seconds running jobs get between their stop signal and "
                 "SIGKILL (at most their own grace; default 5)")
      ->check(finiteRange(0, 3600, "seconds"));
  app.add_option("--keep-jobs", options->keepJobs,
                 "records and logs of finished jobs kept; the oldest go first (default 1000)")
      ->check(integerRange(1, 1LL << 24));
  app.add_option("--max-log-mb", options->maxLogMb,
                 "MiB of log file per job, each line's ~30-byte prefix (time, rank, stream, host) "
                 "included; lines past it are counted, not kept (default 1024)")
      ->check(integerRange(1, 1LL << 30));
  app.add_option("--max-store-mb", options->maxStoreMb,
                 "MiB of keys and values a job may keep in the agent's store; a rank's set past "
                 "it fails with an error naming the job (default 64; hvd needs a few KiB per "
                 "rank)")
      ->check(integerRange(1, 1LL << 20));
  app.add_option("--slots", options->slots,
                 "ranks this node runs at once across all jobs (0: one per GPU on a GPU node, no "
                 "limit on a CPU-only node; default 0)")
      ->check(integerRange(0, 1000000));  // the per-host limit of -H slots
  app.add_flag("--slurm-step", options->slurmStep,
               "started by hvdrun in a Slurm allocation: key on stdin, listen on this node's "
               "address toward the launching host (port 0), temporary state dir, print "
               "'hvdagent-ready NODE ADDRESS' when serving, exit when stdin closes");
  std::string metricsListen;
  app.add_option("--metrics-listen", metricsListen,
                 "serve Prometheus metrics at http://ADDR/metrics: PORT or :PORT (loopback), "
                 "IP:PORT or [IPv6]:PORT (a wider bind, e.g. 0.0.0.0:9100, must be asked for; "
                 "port 0: ephemeral); default: not served")
      ->check(nonEmpty());
  app.add_option("--metrics-port-file", options->metricsPortFile,
                 "write the metrics' bound port to this file once serving (for "
                 "--metrics-listen ...:0)")
      ->check(nonEmpty());
  app.add_flag("--version", options->version, "print hvdagent's version and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::printf("%s", app.help().c_str());
    return 0;
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  options->listenGiven = app.count("--listen") > 0;
  options->stateDirGiven = app.count("--state-dir") > 0;
  if (options->slurmStep && app.count("--key-file") > 0) {
    std::fprintf(stderr, "hvdagent: --slurm-step takes its key on stdin, not --key-file\n");
    return 2;
  }
  if (app.count("--metrics-listen") > 0) {
    try {
      options->metricsListen = metrics::parseMetricsListen(metricsListen);
    } catch (const InvalidArgumentError& e) {
      std::fprintf(stderr, "hvdagent: %s\n", e.what());
      return 2;
    }
  } else if (app.count("--metrics-port-file") > 0) {
    std::fprintf(stderr, "hvdagent: --metrics-port-file needs --metrics-listen\n");
    return 2;
  }
  if (app.count("--key-file") == 0) options->keyFile = rpc::defaultKeyFile();
  if (!options->stateDirGiven && !options->slurmStep) {
    options->stateDir = records::defaultStateDir();
    if (options->stateDir.empty()) {
      std::fprintf(stderr,
                   "hvdagent: no state directory: XDG_STATE_HOME and HOME are unset and uid %u "
                   "has no home directory; pass --state-dir DIR (a directory only this user "
                   "can write)\n",
                   static_cast<unsigned>(::geteuid()));
      return 2;
    }
  }
  return std::nullopt;
}

std::string rootRefusal(bool isRoot, bool allowFlag, const char* confirmEnv) {
  if (!isRoot) return {};
  const bool confirmed = confirmEnv != nullptr && std::string(confirmEnv) == "1";
  if (allowFlag && confirmed) return {};
  return "hvdagent: refusing to run as root: every job would run as root. To allow it anyway, "
         "pass --allow-run-as-root AND set HVD_ALLOW_RUN_AS_ROOT_CONFIRM=1 in the environment" +
         std::string(allowFlag   ? " (HVD_ALLOW_RUN_AS_ROOT_CONFIRM=1 is missing)"
                     : confirmed ? " (--allow-run-as-root is missing)"
                                 : "");
}

}  // namespace hvd::agent::daemon
