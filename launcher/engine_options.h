// hvdrun's engine and GPU knobs (--fusion-threshold-mb, --cycle-time-ms, --cache-capacity,
// --timeline-filename, --timeline-mark-cycles, --stall-check-*-seconds, --gpu-backend,
// --hierarchical-allreduce): each sets a variable of every rank that the runtime's config reader
// takes (HVD_*; it also reads the HOROVOD_* names). Each option's help line, default, range and
// choices come from its variable's entry in the worker table (contract/worker_variables.h), and
// a value the ranks would refuse is refused here by the same rule, so hvdrun and the ranks
// cannot disagree. Registered with the other run options (cli.cc), then turned into the
// "NAME=VALUE" entries of Options::engineSettings; only the knobs given become settings, so the
// runtime's own defaults hold otherwise.
#pragma once

#include <string>
#include <vector>

#include "contract/worker_variables.h"

namespace CLI {
class App;
class Validator;
}  // namespace CLI

namespace hvd::launcher {

// The knobs as parsed: kept as given and checked by CLI11, converted after parsing.
struct EngineKnobs {
  std::string gpuBackend;
  bool hierarchical = false;
  double fusionMb = 0;
  double cycleMs = 0;
  long long cacheCapacity = 0;
  std::string timeline;
  bool markCycles = false;
  double stallWarn = 0;
  double stallShutdown = 0;
};

// --gpu-backend and --hierarchical-allreduce, which --help lists with the GPU options.
void addGpuEngineOptions(CLI::App* app, EngineKnobs* knobs);

// The engine's own knobs, from --fusion-threshold-mb to --stall-check-shutdown-time-seconds.
void addEngineOptions(CLI::App* app, EngineKnobs* knobs);

// After `app` parsed: appends to `settings` one "NAME=VALUE" entry per knob given, GPU knobs
// first, then the engine's in the order of --help. A relative --timeline-filename is made
// absolute against hvdrun's working directory. False, with *error naming the option and quoting
// its value, when that fails.
bool engineSettings(const CLI::App& app, const EngineKnobs& knobs,
                    std::vector<std::string>* settings, std::string* error);

// For the other options that set a worker variable (horovodrun_flags.h), the same rules:
// `variable`'s --help line: its doc, its default in the option's `unit` (`scale` of the
// variable's units in one of the option's) and the variable it sets.
std::string workerOptionHelp(const contract::WorkerVariable& variable, double scale = 1,
                             const char* unit = nullptr);
// A decimal option's check: CLI11's syntax and range in the option's unit, then the ranks' own
// rule for the value they will get.
CLI::Validator workerNumberCheck(const contract::WorkerVariable& variable, double scale,
                                 const char* unit);
// A file an option names, made absolute against hvdrun's working directory (the ranks' may
// differ). False, with *error naming the option and quoting the value, when that fails.
bool absolutePath(const char* option, const std::string& given, std::string* path,
                  std::string* error);
// "NAME=value" for every rank.
std::string workerSetting(const contract::WorkerVariable& variable, const std::string& value);
// `v` with every digit a double holds, so the rank reads back the value given.
std::string exactNumber(double v);

}  // namespace hvd::launcher
