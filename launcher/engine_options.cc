#include "launcher/engine_options.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "agent/common/cli_checks.h"

namespace hvd::launcher {

namespace {

using agent::common::finiteRange;
using agent::common::integerRange;
using agent::common::nonEmpty;

// Every digit a double holds, so the rank reads back the value given.
std::string number(double v) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.17g", v);
  return std::string(text);
}

// --timeline-filename's path as the ranks get it; false with *error when it cannot be made
// absolute.
bool timelinePath(const std::string& timeline, std::string* path, std::string* error) {
  // Relative to where hvdrun runs, whatever the ranks' working directory; DYNAMIC is the
  // engine's keyword (no file until start_timeline()), not a file name.
  *path = timeline;
  if (timeline == "DYNAMIC") return true;
  std::error_code failure;  // e.g. hvdrun's working directory was removed
  const std::filesystem::path absolute = std::filesystem::absolute(timeline, failure);
  if (failure) {
    *error = "--timeline-filename '" + timeline + "': " + failure.message();
    return false;
  }
  *path = absolute.lexically_normal().string();
  return true;
}

}  // namespace

void addGpuEngineOptions(CLI::App* app, EngineKnobs* knobs) {
  app->add_option("--gpu-backend", knobs->gpuBackend,
                  "device buffers: auto (NCCL if it loads, else staged through host memory), nccl "
                  "or host -> HVD_GPU_BACKEND")
      ->check(CLI::IsMember({"auto", "nccl", "host"}));
  app->add_flag("--hierarchical-allreduce", knobs->hierarchical,
                "GPU allreduce as reduce-scatter in each node, allreduce across nodes, allgather "
                "in each node -> HVD_HIERARCHICAL_ALLREDUCE=1");
}

void addEngineOptions(CLI::App* app, EngineKnobs* knobs) {
  app->add_option("--fusion-threshold-mb", knobs->fusionMb,
                  "engine: fuse ready allreduces into buffers of up to this many MiB (default "
                  "128; 0 disables fusion) -> HVD_FUSION_THRESHOLD")
      ->check(finiteRange(0, 1048576, "MiB"));
  app->add_option("--cycle-time-ms", knobs->cycleMs,
                  "engine: milliseconds between negotiation cycles (default 1) -> HVD_CYCLE_TIME")
      ->check(finiteRange(0, 60000, "milliseconds"));
  app->add_option("--cache-capacity", knobs->cacheCapacity,
                  "engine: response cache entries (default 1024; 0 disables) -> "
                  "HVD_CACHE_CAPACITY")
      ->check(integerRange(0, 1LL << 30));
  app->add_option("--timeline-filename", knobs->timeline,
                  "engine: write a Chrome-trace timeline (Perfetto, chrome://tracing) of rank 0 "
                  "to this file; DYNAMIC: none until the program calls start_timeline() -> "
                  "HVD_TIMELINE")
      ->check(nonEmpty());
  app->add_flag("--timeline-mark-cycles", knobs->markCycles,
                "engine: mark each negotiation cycle that ran ops in the timeline -> "
                "HVD_TIMELINE_MARK_CYCLES=1");
  app->add_option("--stall-check-warning-time-seconds", knobs->stallWarn,
                  "engine: warn about ops some ranks submitted and others did not after this "
                  "long (default 60; 0 disables) -> HVD_STALL_CHECK_TIME")
      ->check(finiteRange(0, 1e7, "seconds"));
  app->add_option("--stall-check-shutdown-time-seconds", knobs->stallShutdown,
                  "engine: fail the job after a stall this long (default 300; 0 never) -> "
                  "HVD_STALL_SHUTDOWN_TIME")
      ->check(finiteRange(0, 1e7, "seconds"));
}

bool engineSettings(const CLI::App& app, const EngineKnobs& knobs,
                    std::vector<std::string>* settings, std::string* error) {
  if (!knobs.gpuBackend.empty()) settings->push_back("HVD_GPU_BACKEND=" + knobs.gpuBackend);
  if (knobs.hierarchical) settings->push_back("HVD_HIERARCHICAL_ALLREDUCE=1");
  // By count, not by value: a knob given as its default still overrides the caller's variable.
  if (app.count("--fusion-threshold-mb") > 0) {
    settings->push_back("HVD_FUSION_THRESHOLD=" +
                        std::to_string(static_cast<long long>(knobs.fusionMb * 1048576.0)));
  }
  if (app.count("--cycle-time-ms") > 0) {
    settings->push_back("HVD_CYCLE_TIME=" + number(knobs.cycleMs));
  }
  if (app.count("--cache-capacity") > 0) {
    settings->push_back("HVD_CACHE_CAPACITY=" + std::to_string(knobs.cacheCapacity));
  }
  if (app.count("--timeline-filename") > 0) {
    std::string path;
    if (!timelinePath(knobs.timeline, &path, error)) return false;
    settings->push_back("HVD_TIMELINE=" + path);
  }
  if (knobs.markCycles) settings->push_back("HVD_TIMELINE_MARK_CYCLES=1");
  if (app.count("--stall-check-warning-time-seconds") > 0) {
    settings->push_back("HVD_STALL_CHECK_TIME=" + number(knobs.stallWarn));
  }
  if (app.count("--stall-check-shutdown-time-seconds") > 0) {
    settings->push_back("HVD_STALL_SHUTDOWN_TIME=" + number(knobs.stallShutdown));
  }
  return true;
}

}  // namespace hvd::launcher
