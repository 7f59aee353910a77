// horovodrun's --config-file: Horovod's YAML file of runtime parameters (the keys of
// horovod/runner/common/util/config_parser.py), read as the command-line flags each key stands
// for, so that the file and the command line reach the ranks through one path and a value on the
// command line wins over the file's (horovodrun_flags.h applies them). Pure: nothing here knows
// CLI11, and nothing is checked but the file's shape; each value is checked later exactly as the
// flag's own value is.
//
// The keys, by section (as horovodrun reads them):
//   controller: gloo | mpi                                  --gloo | --mpi
//   params: fusion_threshold_mb, cycle_time_ms, cache_capacity, hierarchical_allreduce,
//           hierarchical_allgather
//   autotune: enabled, log_file, warmup_samples, steps_per_sample, bayes_opt_max_samples,
//             gaussian_process_noise                         (the rest only when enabled: true)
//   timeline: filename, mark_cycles
//   stall_check: enabled (false: --no-stall-check), warning_time_seconds, shutdown_time_seconds
//   library_options: mpi_threads_disable, num_nccl_streams, thread_affinity, gloo_timeout_seconds
//   logging: level, with_timestamp
// A true/false key sets its flag or the flag's opposite (--no-..., where one exists). A key that
// is empty (null) is skipped, as horovodrun skips it.
#pragma once

#include <string>
#include <vector>

namespace hvd::launcher {

struct ConfigSetting {
  std::string key;  // "params.fusion_threshold_mb", for messages
  // Where the value goes: the flag, with its value ("" for a flag that takes none).
  std::string flag;
  std::string value;
  // Every flag that decides the same thing (the flag and its opposite): when the command line
  // gives any of them, the file's value is not used.
  std::vector<std::string> decidedBy;
};

struct ConfigFile {
  std::vector<ConfigSetting> settings;  // in the file's order
  // One line per key that is not one of horovodrun's (a typo, or a newer Horovod's), ignored.
  std::vector<std::string> warnings;
};

// Reads `path`. Throws hvd::InvalidArgumentError naming the file: one that cannot be read, is not
// YAML (with the line and column), or whose shape is not horovodrun's (a section that is not a
// mapping, a value that is not a single value, a controller other than gloo or mpi, a true/false
// key with another value), naming the key.
ConfigFile readConfigFile(const std::string& path);

}  // namespace hvd::launcher
