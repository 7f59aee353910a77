#include "launcher/engine_options.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <system_error>

#include "agent/common/cli_checks.h"
#include "contract/worker_values.h"
#include "contract/worker_variables.h"
#include "hvd/error.hpp"

namespace hvd::launcher {

namespace worker = contract::worker;
using contract::VariableType;
using contract::WorkerVariable;

namespace {

using agent::common::finiteRange;
using agent::common::integerRange;
using agent::common::nonEmpty;

constexpr double kMiB = 1048576.0;

// --timeline-filename's path as the ranks get it; false with *error when it cannot be made
// absolute.
bool timelinePath(const std::string& timeline, std::string* path, std::string* error) {
  // DYNAMIC is the engine's keyword (no file until start_timeline()), not a file name.
  *path = timeline;
  if (timeline == "DYNAMIC") return true;
  return absolutePath("--timeline-filename", timeline, path, error);
}

}  // namespace

bool absolutePath(const char* option, const std::string& given, std::string* path,
                  std::string* error) {
  std::error_code failure;  // e.g. hvdrun's working directory was removed
  const std::filesystem::path absolute = std::filesystem::absolute(given, failure);
  if (failure) {
    *error = std::string(option) + " '" + given + "': " + failure.message();
    return false;
  }
  *path = absolute.lexically_normal().string();
  return true;
}

namespace {

// --- From the worker table: each option's help, range and setting are its variable's ---------

std::vector<std::string> choices(const WorkerVariable& v) {
  std::vector<std::string> out;
  std::istringstream words(v.choices != nullptr ? v.choices : "");
  for (std::string w; words >> w;) out.push_back(w);
  return out;
}

// A value the ranks would refuse is refused here, by the same rule (contract/worker_values.h):
// `text` in the variable's own unit.
std::string refusedByRanks(const WorkerVariable& v, const std::string& given,
                           const std::string& text) {
  try {
    contract::parseWorkerValue(v, v.name, text);
    return {};
  } catch (const InvalidArgumentError& e) {
    return "'" + given + "' is not accepted by the ranks: " + e.what();
  }
}

// A whole-number option in the variable's own unit.
CLI::Validator countOf(const WorkerVariable& v) {
  return integerRange(static_cast<long long>(v.min), static_cast<long long>(v.max));
}

}  // namespace

std::string exactNumber(double v) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.17g", v);
  return std::string(text);
}

std::string workerSetting(const WorkerVariable& v, const std::string& value) {
  return std::string(v.name) + "=" + value;
}

std::string workerOptionHelp(const WorkerVariable& v, double scale, const char* unit) {
  std::string text = v.doc;
  if (v.defaultValue != nullptr && v.type != VariableType::kBool) {
    std::string value = scale == 1 ? std::string(v.defaultValue)
                                   : exactNumber(std::strtod(v.defaultValue, nullptr) / scale);
    if (unit != nullptr) value += " " + std::string(unit);
    // Inside the line's own parenthesis when it ends with one: "(0 disables; default 1024)".
    if (!text.empty() && text.back() == ')') {
      text.insert(text.size() - 1, "; default " + value);
    } else {
      text += " (default " + value + ")";
    }
  }
  if (unit != nullptr) text += "; given here in " + std::string(unit);
  text += " -> " + std::string(v.name);
  if (v.type == VariableType::kBool) text += "=1";
  return text;
}

CLI::Validator workerNumberCheck(const WorkerVariable& v, double scale, const char* unit) {
  const CLI::Validator range = finiteRange(v.min / scale, v.max / scale, unit);
  return CLI::Validator(
      [range, &v, scale](std::string& value) {
        std::string problem = range(value);
        if (!problem.empty()) return problem;
        const double n = std::strtod(value.c_str(), nullptr) * scale;
        return refusedByRanks(v, value,
                              v.type == VariableType::kNumber
                                  ? exactNumber(n)
                                  : std::to_string(static_cast<long long>(n)));
      },
      range.get_description());
}

void addGpuEngineOptions(CLI::App* app, EngineKnobs* knobs) {
  app->add_option("--gpu-backend", knobs->gpuBackend, workerOptionHelp(worker::kGpuBackend))
      ->check(CLI::IsMember(choices(worker::kGpuBackend)));
  app->add_flag("--hierarchical-allreduce", knobs->hierarchical,
                workerOptionHelp(worker::kHierarchicalAllreduce));
}

void addEngineOptions(CLI::App* app, EngineKnobs* knobs) {
  app->add_option("--fusion-threshold-mb", knobs->fusionMb,
                  workerOptionHelp(worker::kFusionThreshold, kMiB, "MiB"))
      ->check(workerNumberCheck(worker::kFusionThreshold, kMiB, "MiB"));
  app->add_option("--cycle-time-ms", knobs->cycleMs, workerOptionHelp(worker::kCycleTime))
      ->check(workerNumberCheck(worker::kCycleTime, 1, "milliseconds"));
  app->add_option("--cache-capacity", knobs->cacheCapacity,
                  workerOptionHelp(worker::kCacheCapacity))
      ->check(countOf(worker::kCacheCapacity));
  app->add_option("--timeline-filename", knobs->timeline, workerOptionHelp(worker::kTimeline))
      ->check(nonEmpty());
  app->add_flag("--timeline-mark-cycles", knobs->markCycles,
                workerOptionHelp(worker::kTimelineMarkCycles));
  app->add_option("--stall-check-warning-time-seconds", knobs->stallWarn,
                  workerOptionHelp(worker::kStallCheckTime))
      ->check(workerNumberCheck(worker::kStallCheckTime, 1, "seconds"));
  app->add_option("--stall-check-shutdown-time-seconds", knobs->stallShutdown,
                  workerOptionHelp(worker::kStallShutdownTime))
      ->check(workerNumberCheck(worker::kStallShutdownTime, 1, "seconds"));
}

bool engineSettings(const CLI::App& app, const EngineKnobs& knobs,
                    std::vector<std::string>* settings, std::string* error) {
  if (!knobs.gpuBackend.empty())
    settings->push_back(workerSetting(worker::kGpuBackend, knobs.gpuBackend));
  if (knobs.hierarchical) settings->push_back(workerSetting(worker::kHierarchicalAllreduce, "1"));
  // By count, not by value: a knob given as its default still overrides the caller's variable.
  if (app.count("--fusion-threshold-mb") > 0) {
    settings->push_back(workerSetting(
        worker::kFusionThreshold, std::to_string(static_cast<long long>(knobs.fusionMb * kMiB))));
  }
  if (app.count("--cycle-time-ms") > 0) {
    settings->push_back(workerSetting(worker::kCycleTime, exactNumber(knobs.cycleMs)));
  }
  if (app.count("--cache-capacity") > 0) {
    settings->push_back(workerSetting(worker::kCacheCapacity, std::to_string(knobs.cacheCapacity)));
  }
  if (app.count("--timeline-filename") > 0) {
    std::string path;
    if (!timelinePath(knobs.timeline, &path, error)) return false;
    settings->push_back(workerSetting(worker::kTimeline, path));
  }
  if (knobs.markCycles) settings->push_back(workerSetting(worker::kTimelineMarkCycles, "1"));
  if (app.count("--stall-check-warning-time-seconds") > 0) {
    settings->push_back(workerSetting(worker::kStallCheckTime, exactNumber(knobs.stallWarn)));
  }
  if (app.count("--stall-check-shutdown-time-seconds") > 0) {
    settings->push_back(
        workerSetting(worker::kStallShutdownTime, exactNumber(knobs.stallShutdown)));
  }
  return true;
}

}  // namespace hvd::launcher
