#include "launcher/horovodrun_flags.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <limits>
#include <utility>

#include "agent/common/cli_checks.h"
#include "contract/worker_variables.h"
#include "hvd/error.hpp"
#include "launcher/config_file.h"
#include "launcher/engine_options.h"

namespace hvd::launcher {

namespace {

using agent::common::finiteRange;
using agent::common::inQuotes;
using agent::common::integerRange;
using agent::common::nonEmpty;
namespace worker = contract::worker;

const char* const kGroup = "horovodrun compatibility (horovodrun's flags; docs/horovodrun.md)";

// NCCL's own variables, which horovodrun sets for its workers (config_parser.py, gloo_run.py):
// the interfaces NCCL's sockets may use, and whether NCCL may use InfiniBand.
constexpr char kNcclSocketIfname[] = "NCCL_SOCKET_IFNAME";
constexpr char kNcclIbDisable[] = "NCCL_IB_DISABLE";

constexpr int kIntMax = std::numeric_limits<int>::max();

// Why a name cannot be a Linux network interface's (IFNAMSIZ: 15 characters), or "".
std::string interfaceNameProblem(const std::string& name) {
  if (name.empty()) return "an empty interface name";
  const bool plain = std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ||
           c == ':';
  });
  if (!plain || name.size() > 15) {
    return inQuotes(name) +
           " is not a network interface name (1 to 15 letters, digits, '-', '_', '.' or ':')";
  }
  return {};
}

CLI::Validator interfaceList() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        for (size_t start = 0;;) {
          const size_t comma = value.find(',', start);
          const std::string problem = interfaceNameProblem(value.substr(start, comma - start));
          if (!problem.empty()) return inQuotes(value) + ": " + problem;
          if (comma == std::string::npos) return {};
          start = comma + 1;
        }
      },
      "NIC[,NIC...]");
}

// horovodrun's whole-number autotune flags: each one's variable and where it is parsed to.
struct AutotuneCount {
  const char* flag;
  const contract::WorkerVariable& variable;
  int HorovodrunFlags::*value;
};
const AutotuneCount kAutotuneCounts[] = {
    {"--autotune-warmup-samples", worker::kAutotuneWarmupSamples,
     &HorovodrunFlags::autotuneWarmupSamples},
    {"--autotune-steps-per-sample", worker::kAutotuneStepsPerSample,
     &HorovodrunFlags::autotuneStepsPerSample},
    {"--autotune-bayes-opt-max-samples", worker::kAutotuneBayesOptMaxSamples,
     &HorovodrunFlags::autotuneBayesOptMaxSamples},
};

// The flags hvd has nothing to do with, by the reason it has none; each given one is named in
// its reason's one warning line.
struct Ignored {
  std::vector<const char*> flags;
  std::string why;
};

const std::vector<Ignored>& ignoredFlags() {
  static const std::vector<Ignored> kIgnored = {
      {{"--ssh-port", "--ssh-identity-file"},
       "hvdrun uses no SSH: it reaches other hosts through the hvdagent on each (--agent-port, "
       "--key-file)"},
      {{"--mpi"},
       "hvd's MPI backend (" + std::string(worker::kCpuBackend.name) +
           "=mpi) runs only in jobs that mpirun starts; hvdrun's ranks use hvd's own TCP and "
           "shared-memory transports, as horovodrun's --gloo (to use MPI, start the program "
           "with mpirun and " +
           worker::kCpuBackend.name + "=mpi)"},
      {{"--mpi-args", "--binding-args", "--mpi-threads-disable"},
       "hvdrun runs no mpirun, and its ranks do not use MPI"},
      {{"--hierarchical-allgather"},
       "hvd has no hierarchical allgather (its hierarchical collective is "
       "--hierarchical-allreduce)"},
      {{"--num-nccl-streams"}, "hvd's NCCL backend runs on one stream per device"},
      {{"--thread-affinity"},
       "hvd does not pin its background thread to a CPU (pin the ranks with taskset or a "
       "cpuset)"},
      {{"--disable-cache"},
       "it turns off horovodrun's cache of its SSH and network checks, and hvdrun keeps no such "
       "cache (the engine's response cache is turned off by --cache-capacity 0)"},
      {{"--log-without-timestamp"}, "hvd's log lines always carry the time"},
  };
  return kIgnored;
}

void addNetworkFlags(CLI::App* app, HorovodrunFlags* flags) {
  app->add_option("--network-interfaces,--network-interface", flags->nics,
                  "network interfaces for the job's traffic, comma-separated or repeated (both "
                  "spellings): the first carries hvd's data plane on every host (its address "
                  "there -> " +
                      std::string(worker::kDataIface.name) + "), all are NCCL's -> " +
                      kNcclSocketIfname)
      ->allow_extra_args(false)
      ->check(interfaceList())
      ->group(kGroup);
  app->add_flag("--tcp", flags->tcp,
                std::string("TCP only: NCCL without InfiniBand -> ") + kNcclIbDisable +
                    "=1 (hvd's own transports use TCP between hosts already)")
      ->group(kGroup);
  CLI::Option* gloo =
      app->add_flag("--gloo", flags->gloo,
                    "hvd's own transports for host buffers (TCP between hosts, shared memory "
                    "within one), as horovodrun's Gloo: the default -> " +
                        std::string(worker::kCpuBackend.name) + "=hvd")
          ->group(kGroup);
  app->add_flag("--mpi", flags->mpi,
                "ignored, with a warning: hvd's MPI backend serves jobs that mpirun starts")
      ->excludes(gloo)
      ->group(kGroup);
  app->add_option("--gloo-timeout-seconds", flags->glooTimeoutSeconds,
                  "horovodrun's Gloo timeout: " + workerOptionHelp(worker::kTimeout))
      ->check(workerNumberCheck(worker::kTimeout, 1, "seconds"))
      ->group(kGroup);
}

void addEngineFlags(CLI::App* app, HorovodrunFlags* flags) {
  CLI::Option* off = app->add_flag("--no-stall-check", flags->noStallCheck,
                                   "turn the stall check off, its warnings and its shutdown -> " +
                                       std::string(worker::kStallCheckDisable.name) + "=1")
                         ->group(kGroup);
  app->add_flag("--stall-check", flags->stallCheck,
                "keep it on whatever the environment says -> " +
                    std::string(worker::kStallCheckDisable.name) + "=0")
      ->excludes(off)
      ->group(kGroup);
  CLI::Option* on = app->get_option("--hierarchical-allreduce");
  app->add_flag("--no-hierarchical-allreduce", flags->noHierarchicalAllreduce,
                "the ring allreduce (the default), whatever the environment says -> " +
                    std::string(worker::kHierarchicalAllreduce.name) + "=0")
      ->excludes(on)
      ->group(kGroup);
  CLI::Option* allgather =
      app->add_flag("--hierarchical-allgather", flags->hierarchicalAllgather,
                    "ignored, with a warning: hvd has no hierarchical allgather")
          ->group(kGroup);
  app->add_flag("--no-hierarchical-allgather", flags->noHierarchicalAllgather,
                "accepted: hvd's allgather is never hierarchical")
      ->excludes(allgather)
      ->group(kGroup);
  app->add_flag("--disable-cache", flags->disableCache,
                "ignored, with a warning: horovodrun's cache of its SSH and network checks, "
                "which hvdrun does not have (the engine's response cache: --cache-capacity 0)")
      ->group(kGroup);
  app->add_option("--num-nccl-streams", flags->numNcclStreams,
                  "ignored, with a warning: hvd's NCCL backend uses one stream per device")
      ->check(integerRange(0, kIntMax))
      ->group(kGroup);
  app->add_option("--thread-affinity", flags->threadAffinity,
                  "ignored, with a warning: hvd does not pin its background thread")
      ->check(integerRange(0, kIntMax))
      ->group(kGroup);
  CLI::Option* autotune =
      app->add_flag("--autotune", flags->autotune, workerOptionHelp(worker::kAutotune))
          ->group(kGroup);
  app->add_flag("--no-autotune", flags->noAutotune,
                "keep autotune off whatever the environment says -> " +
                    std::string(worker::kAutotune.name) + "=0")
      ->excludes(autotune)
      ->group(kGroup);
  app->add_option("--autotune-log-file", flags->autotuneLogFile,
                  workerOptionHelp(worker::kAutotuneLog))
      ->check(nonEmpty())
      ->group(kGroup);
  for (const AutotuneCount& count : kAutotuneCounts) {
    app->add_option(count.flag, flags->*count.value, workerOptionHelp(count.variable))
        ->check(integerRange(static_cast<long long>(count.variable.min),
                             static_cast<long long>(count.variable.max)))
        ->group(kGroup);
  }
  app->add_option("--autotune-gaussian-process-noise", flags->autotuneNoise,
                  workerOptionHelp(worker::kAutotuneGaussianProcessNoise))
      ->check(workerNumberCheck(worker::kAutotuneGaussianProcessNoise, 1, "a variance"))
      ->group(kGroup);
}

void addLauncherFlags(CLI::App* app, Options* options, HorovodrunFlags* flags) {
  const char* const kNoSsh =
      "ignored, with a warning: hvdrun reaches other hosts through hvdagent, not SSH";
  app->add_option("-p,--ssh-port", flags->sshPort, kNoSsh)
      ->check(integerRange(1, 65535))
      ->group(kGroup);
  app->add_option("-i,--ssh-identity-file", flags->sshIdentityFile, kNoSsh)
      ->check(nonEmpty())
      ->group(kGroup);
  const char* const kNoMpi = "ignored, with a warning: hvdrun runs no mpirun and its ranks no MPI";
  app->add_option("--mpi-args", flags->mpiArgs, kNoMpi)->group(kGroup);
  app->add_option("--binding-args", flags->bindingArgs, kNoMpi)->group(kGroup);
  CLI::Option* threads =
      app->add_flag("--mpi-threads-disable", flags->mpiThreadsDisable, kNoMpi)->group(kGroup);
  app->add_flag("--no-mpi-threads-disable", flags->noMpiThreadsDisable,
                "accepted: hvdrun's ranks do not use MPI")
      ->excludes(threads)
      ->group(kGroup);
  CLI::Option* with =
      app->add_flag("--log-with-timestamp,--no-log-hide-timestamp", flags->logWithTimestamp,
                    "accepted: hvd's log lines always carry the time")
          ->group(kGroup);
  app->add_flag("--log-without-timestamp,--log-hide-timestamp", flags->logWithoutTimestamp,
                "ignored, with a warning: hvd's log lines always carry the time")
      ->excludes(with)
      ->group(kGroup);
  app->add_flag("--prefix-output-with-timestamp", options->timestampOutput,
                "as --timestamp-output (also -prefix-timestamp)")
      ->group(kGroup);
  app->add_option("--config-file", flags->configFile,
                  "horovodrun's YAML file of parameters (controller, params, autotune, "
                  "timeline, stall_check, library_options, logging): each key as the flag it "
                  "stands for; a flag given here wins")
      ->check(nonEmpty())
      ->group(kGroup);
}

// "--num-nccl-streams" or "--num-nccl-streams (library_options.num_nccl_streams in c.yaml)".
std::string named(const HorovodrunFlags& flags, const char* flag) {
  const auto it = flags.fromConfigFile.find(flag);
  return it == flags.fromConfigFile.end() ? std::string(flag)
                                          : std::string(flag) + " (" + it->second + ")";
}

}  // namespace

void addHorovodrunFlags(CLI::App* app, Options* options, HorovodrunFlags* flags) {
  addNetworkFlags(app, flags);
  addEngineFlags(app, flags);
  addLauncherFlags(app, options, flags);
}

std::vector<std::string> applyConfigFile(CLI::App& app, HorovodrunFlags* flags) {
  if (app.count("--config-file") == 0) return {};
  const std::string& path = flags->configFile;
  const ConfigFile file = readConfigFile(path);
  for (const ConfigSetting& setting : file.settings) {
    const bool decided = std::any_of(setting.decidedBy.begin(), setting.decidedBy.end(),
                                     [&](const std::string& f) { return app.count(f) > 0; });
    if (decided) continue;
    CLI::Option* option = app.get_option(setting.flag);
    try {
      // As if given on the command line: the flag's own checks, then its variable is set.
      option->add_result(option->get_expected_min() == 0 ? std::string("true") : setting.value);
      option->run_callback();
    } catch (const CLI::Error& e) {
      throw InvalidArgumentError("--config-file " + inQuotes(path) + ": " + setting.key + ": " +
                                 e.what());
    }
    flags->fromConfigFile[setting.flag] = setting.key + " in " + path;
  }
  return file.warnings;
}

std::vector<std::string> interfaceNames(const std::vector<std::string>& given) {
  std::vector<std::string> names;
  for (const std::string& value : given) {
    for (size_t start = 0;;) {
      const size_t comma = value.find(',', start);
      const std::string name = value.substr(start, comma - start);
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return names;
}

std::vector<std::string> horovodrunSettings(const CLI::App& app, const HorovodrunFlags& flags,
                                            std::vector<std::string>* settings) {
  if (!flags.nics.empty()) {
    // horovodrun gives Gloo one interface (HOROVOD_GLOO_IFACE) and NCCL all of them.
    const std::vector<std::string> names = interfaceNames(flags.nics);
    std::string all;
    for (const std::string& name : names) all += (all.empty() ? "" : ",") + name;
    settings->push_back(workerSetting(worker::kDataIface, names.front()));
    settings->push_back(std::string(kNcclSocketIfname) + "=" + all);
  }
  if (flags.gloo) settings->push_back(workerSetting(worker::kCpuBackend, "hvd"));
  if (flags.tcp) settings->push_back(std::string(kNcclIbDisable) + "=1");
  if (app.count("--gloo-timeout-seconds") > 0) {
    settings->push_back(workerSetting(worker::kTimeout, exactNumber(flags.glooTimeoutSeconds)));
  }
  if (flags.noStallCheck || flags.stallCheck) {
    settings->push_back(workerSetting(worker::kStallCheckDisable, flags.noStallCheck ? "1" : "0"));
  }
  if (flags.noHierarchicalAllreduce) {
    settings->push_back(workerSetting(worker::kHierarchicalAllreduce, "0"));
  }
  if (flags.autotune || flags.noAutotune) {
    settings->push_back(workerSetting(worker::kAutotune, flags.autotune ? "1" : "0"));
  }
  if (app.count("--autotune-log-file") > 0) {
    std::string path, error;
    if (!absolutePath("--autotune-log-file", flags.autotuneLogFile, &path, &error)) {
      throw InvalidArgumentError(error);
    }
    settings->push_back(workerSetting(worker::kAutotuneLog, path));
  }
  for (const AutotuneCount& count : kAutotuneCounts) {
    if (app.count(count.flag) > 0) {
      settings->push_back(workerSetting(count.variable, std::to_string(flags.*count.value)));
    }
  }
  if (app.count("--autotune-gaussian-process-noise") > 0) {
    settings->push_back(
        workerSetting(worker::kAutotuneGaussianProcessNoise, exactNumber(flags.autotuneNoise)));
  }
  std::vector<std::string> warnings;
  for (const Ignored& reason : ignoredFlags()) {
    std::string given;
    for (const char* flag : reason.flags) {
      if (app.count(flag) > 0) given += (given.empty() ? "" : ", ") + named(flags, flag);
    }
    if (!given.empty()) warnings.push_back(given + " ignored: " + reason.why);
  }
  return warnings;
}

}  // namespace hvd::launcher
