#include "launcher/config_file.h"

#include <yaml-cpp/yaml.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <utility>

#include "agent/common/cli_checks.h"
#include "hvd/error.hpp"

namespace hvd::launcher {

namespace {

using agent::common::inQuotes;

// A key of a section: a value for `flag`, or a switch that sets `flag` when true and `opposite`
// (when there is one) when false.
struct Key {
  const char* name;
  bool isSwitch;
  const char* flag;
  const char* opposite;
};

struct Section {
  const char* name;
  std::vector<Key> keys;
};

const std::vector<Section>& sections() {
  static const std::vector<Section> kSections = {
      {"params",
       {{"fusion_threshold_mb", false, "--fusion-threshold-mb", nullptr},
        {"cycle_time_ms", false, "--cycle-time-ms", nullptr},
        {"cache_capacity", false, "--cache-capacity", nullptr},
        {"hierarchical_allreduce", true, "--hierarchical-allreduce", "--no-hierarchical-allreduce"},
        {"hierarchical_allgather", true, "--hierarchical-allgather",
         "--no-hierarchical-allgather"}}},
      {"autotune",
       {{"enabled", true, "--autotune", "--no-autotune"},
        {"log_file", false, "--autotune-log-file", nullptr},
        {"warmup_samples", false, "--autotune-warmup-samples", nullptr},
        {"steps_per_sample", false, "--autotune-steps-per-sample", nullptr},
        {"bayes_opt_max_samples", false, "--autotune-bayes-opt-max-samples", nullptr},
        {"gaussian_process_noise", false, "--autotune-gaussian-process-noise", nullptr}}},
      {"timeline",
       {{"filename", false, "--timeline-filename", nullptr},
        {"mark_cycles", true, "--timeline-mark-cycles", nullptr}}},
      // horovodrun's switch is the other way round: enabled: false means --no-stall-check.
      {"stall_check",
       {{"enabled", true, "--stall-check", "--no-stall-check"},
        {"warning_time_seconds", false, "--stall-check-warning-time-seconds", nullptr},
        {"shutdown_time_seconds", false, "--stall-check-shutdown-time-seconds", nullptr}}},
      {"library_options",
       {{"mpi_threads_disable", true, "--mpi-threads-disable", "--no-mpi-threads-disable"},
        {"num_nccl_streams", false, "--num-nccl-streams", nullptr},
        {"thread_affinity", false, "--thread-affinity", nullptr},
        {"gloo_timeout_seconds", false, "--gloo-timeout-seconds", nullptr}}},
      {"logging",
       {{"level", false, "--log-level", nullptr},
        {"with_timestamp", true, "--log-with-timestamp", "--log-without-timestamp"}}},
  };
  return kSections;
}

std::string where(const YAML::Node& node) {
  const YAML::Mark mark = node.Mark();
  return mark.is_null() ? std::string() : " (line " + std::to_string(mark.line + 1) + ")";
}

const char* shapeOf(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    default:
      return "a single value";
  }
}

class Reader {
 public:
  explicit Reader(std::string path) : path_(std::move(path)) {}

  ConfigFile read() {
    YAML::Node root;
    {
      std::ifstream in(path_);
      if (!in) fail("cannot be read: " + std::string(std::strerror(errno)));
      try {
        root = YAML::Load(in);
      } catch (const YAML::Exception& e) {
        fail("is not YAML: line " + std::to_string(e.mark.line + 1) + ", column " +
             std::to_string(e.mark.column + 1) + ": " + e.msg);
      }
    }
    if (root.IsNull()) return std::move(file_);  // an empty file sets nothing
    if (!root.IsMap()) {
      fail("expected horovodrun's sections (controller, params, ...) as a mapping, found " +
           std::string(shapeOf(root)));
    }
    for (const auto& entry : root) {
      const std::string name = entry.first.as<std::string>();
      if (name == "controller") {
        controller(entry.second);
        continue;
      }
      const Section* section = nullptr;
      for (const Section& s : sections()) {
        if (name == s.name) section = &s;
      }
      if (section == nullptr) {
        unknown(name, entry.first);
        continue;
      }
      readSection(*section, entry.second);
    }
    return std::move(file_);
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw InvalidArgumentError("--config-file " + inQuotes(path_) + " " + why);
  }
  [[noreturn]] void failAt(const std::string& key, const YAML::Node& node,
                           const std::string& why) const {
    throw InvalidArgumentError("--config-file " + inQuotes(path_) + ": " + key + where(node) +
                               ": " + why);
  }

  void unknown(const std::string& key, const YAML::Node& node) {
    file_.warnings.push_back(path_ + ": " + key + where(node) +
                             " is not one of horovodrun's settings; ignored");
  }

  // The text of a single value; nullopt for an empty (null) one.
  std::optional<std::string> scalar(const std::string& key, const YAML::Node& node) const {
    if (node.IsNull()) return std::nullopt;
    if (!node.IsScalar())
      failAt(key, node, "expected a single value, found " + std::string(shapeOf(node)));
    return node.Scalar();
  }

  void controller(const YAML::Node& node) {
    const std::optional<std::string> value = scalar("controller", node);
    if (!value) return;
    std::string lower = *value;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower != "gloo" && lower != "mpi") {
      failAt("controller", node, inQuotes(*value) + " is not a controller (expected gloo or mpi)");
    }
    file_.settings.push_back({"controller", "--" + lower, "", {"--gloo", "--mpi"}});
  }

  void readSection(const Section& section, const YAML::Node& node) {
    if (node.IsNull()) return;
    if (!node.IsMap()) {
      failAt(section.name, node,
             "expected a mapping of settings (name: value), found " + std::string(shapeOf(node)));
    }
    // horovodrun passes the rest of autotune on only when it is enabled, wherever the file says
    // so.
    const bool autotune = std::string(section.name) == "autotune";
    bool enabled = false;
    if (const YAML::Node e = std::as_const(node)["enabled"]; autotune && e && e.IsScalar()) {
      YAML::convert<bool>::decode(e, enabled);
    }
    for (const auto& entry : node) {
      const std::string name = entry.first.as<std::string>();
      const std::string key = std::string(section.name) + "." + name;
      const Key* spec = nullptr;
      for (const Key& k : section.keys) {
        if (name == k.name) spec = &k;
      }
      if (spec == nullptr) {
        unknown(key, entry.first);
        continue;
      }
      const std::optional<std::string> value = scalar(key, entry.second);
      if (!value) continue;
      std::vector<std::string> decidedBy = {spec->flag};
      if (spec->opposite != nullptr) decidedBy.push_back(spec->opposite);
      if (!spec->isSwitch) {
        if (autotune && !enabled) continue;
        file_.settings.push_back({key, spec->flag, *value, decidedBy});
        continue;
      }
      bool on = false;
      if (!YAML::convert<bool>::decode(entry.second, on)) {
        failAt(key, entry.second, inQuotes(*value) + " is not true or false");
      }
      if (on || spec->opposite != nullptr) {
        file_.settings.push_back({key, on ? spec->flag : spec->opposite, "", decidedBy});
      }
    }
  }

  const std::string path_;
  ConfigFile file_;
};

}  // namespace

ConfigFile readConfigFile(const std::string& path) {
  try {
    return Reader(path).read();
  } catch (const YAML::Exception& e) {
    // A key that is not text (a list or a mapping as a key), or another shape yaml-cpp refuses.
    throw InvalidArgumentError("--config-file " + inQuotes(path) + ": " + e.what());
  }
}

}  // namespace hvd::launcher
