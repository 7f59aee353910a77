// horovodrun's flags (Horovod 0.28.1, horovod/runner/launch.py) that hvdrun has under no name of
// its own, so that a launch command copied from horovodrun runs unchanged; --help lists them
// under "horovodrun compatibility" and docs/horovodrun.md has the table. Each one does what it
// does in horovodrun through hvd's own mechanism (a worker variable of
// contract/worker_variables.h, or the NCCL variable horovodrun sets), or, where hvd has nothing
// it could mean (SSH, mpirun, autotuning), is accepted with one warning line on stderr that says
// why it is ignored. The flags that are another spelling of an hvdrun option (-hostfile, -cb,
// -prefix-timestamp, -v) are that option.
//
// Also --config-file, horovodrun's YAML file (config_file.h): its keys become the flags they
// stand for, unless the command line gives those flags, as in horovodrun.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "launcher/options.h"

namespace CLI {
class App;
}  // namespace CLI

namespace hvd::launcher {

// The flags as parsed, checked by CLI11 (ranges, interface names), converted after parsing.
struct HorovodrunFlags {
  std::vector<std::string> nics;  // --network-interface(s), each as given (may be a comma list)
  bool gloo = false;
  bool mpi = false;
  bool tcp = false;
  bool noStallCheck = false;
  bool stallCheck = false;  // horovodrun's hidden opposite of --no-stall-check
  double glooTimeoutSeconds = 0;
  bool noHierarchicalAllreduce = false;
  // Accepted only to be ignored (with a warning where they would change something).
  bool hierarchicalAllgather = false;
  bool noHierarchicalAllgather = false;
  bool disableCache = false;
  int numNcclStreams = 0;
  int threadAffinity = 0;
  int sshPort = 0;
  std::string sshIdentityFile;
  std::string mpiArgs;
  std::string bindingArgs;
  bool mpiThreadsDisable = false;
  bool noMpiThreadsDisable = false;
  bool logWithTimestamp = false;
  bool logWithoutTimestamp = false;
  bool autotune = false;
  bool noAutotune = false;
  std::string autotuneLogFile;
  int autotuneWarmupSamples = 0;
  int autotuneStepsPerSample = 0;
  int autotuneBayesOptMaxSamples = 0;
  double autotuneNoise = 0;
  std::string configFile;
  // The flags --config-file gave: flag -> "library_options.num_nccl_streams in FILE", so that a
  // warning names what the user wrote.
  std::map<std::string, std::string> fromConfigFile;
};

// Registers the flags (group "horovodrun compatibility"). --prefix-output-with-timestamp sets
// options->timestampOutput; --no-hierarchical-allreduce excludes the --hierarchical-allreduce
// that addGpuEngineOptions (engine_options.h) registered before.
void addHorovodrunFlags(CLI::App* app, Options* options, HorovodrunFlags* flags);

// After `app` parsed, and before anything reads the options: the keys of --config-file (when
// given) that the command line does not decide, each set as its flag and checked by the flag's
// own rules. Returns the file's warnings (keys that are not horovodrun's). Throws
// hvd::InvalidArgumentError naming the file, the key and the flag's complaint.
std::vector<std::string> applyConfigFile(CLI::App& app, HorovodrunFlags* flags);

// Then: appends to `settings` one "NAME=VALUE" entry per variable the flags set for every rank
// (the worker table's HVD_* names, NCCL's own), and returns the warnings: one line per reason,
// naming every flag given for it (and, for one the config file gave, its key). Throws
// hvd::InvalidArgumentError when --autotune-log-file cannot be made absolute.
std::vector<std::string> horovodrunSettings(const CLI::App& app, const HorovodrunFlags& flags,
                                            std::vector<std::string>* settings);

// --network-interface(s) values as the interface names they list: comma lists split, each name
// once, in the order given.
std::vector<std::string> interfaceNames(const std::vector<std::string>& given);

}  // namespace hvd::launcher
