#include "launcher/doctor_render.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>

#include "hvd_support/json_text.h"

namespace hvd::launcher {
namespace {

using agent::coordinator::GpuHolder;
using agent::node::GpuInfo;

constexpr char kUnknown[] = "-";

// "+12.3 ±0.4": milliseconds to a tenth, the estimate and half the round trip.
std::string clockText(const ClockOffset& clock) {
  const auto tenths = [](int64_t us) { return (std::llabs(us) + 50) / 100; };
  char text[64];
  const int64_t offset = tenths(clock.offsetUs);
  const int64_t uncertainty = tenths(clock.uncertaintyUs);
  std::snprintf(text, sizeof(text), "%s%" PRId64 ".%" PRId64 " \u00b1%" PRId64 ".%" PRId64,
                clock.offsetUs < 0 && offset != 0 ? "-" : "+", offset / 10, offset % 10,
                uncertainty / 10, uncertainty % 10);
  return text;
}

// Display columns of UTF-8 text: every byte but continuation bytes starts one ("±" is one).
size_t columns(const std::string& text) {
  return static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

std::string gib(uint64_t bytes) {
  const uint64_t kGiB = uint64_t{1} << 30;
  return std::to_string((bytes + kGiB / 2) / kGiB) + " GiB";
}

std::string rowGpus(const HostRow& row) {
  return row.node ? gpuSummary(row.node->gpus, row.gpuHolders) : kUnknown;
}

std::string jsonOrNull(bool known, const std::string& json) { return known ? json : "null"; }

std::string jsonHost(const HostRow& row) {
  const bool answered = row.node.has_value();
  std::string out = "{\"host\":" + jsonString(row.host);
  out += ",\"address\":" + jsonString(row.address);
  out += ",\"status\":" + jsonString(statusName(row.status));
  out += ",\"reachable\":" + std::string(row.status != HostStatus::kUnreachable ? "true" : "false");
  out += ",\"authenticated\":" + std::string(answered ? "true" : "false");
  out += ",\"error\":" + jsonOrNull(!row.error.empty(), jsonString(row.error));
  out += ",\"hostname\":" + jsonOrNull(answered, answered ? jsonString(row.node->hostname) : "");
  out += ",\"version\":" + jsonOrNull(answered, answered ? jsonString(row.node->version) : "");
  out += ",\"clock_offset_us\":" +
         jsonOrNull(row.clock.has_value(), row.clock ? std::to_string(row.clock->offsetUs) : "");
  out +=
      ",\"clock_uncertainty_us\":" +
      jsonOrNull(row.clock.has_value(), row.clock ? std::to_string(row.clock->uncertaintyUs) : "");
  out += ",\"cpus\":" + jsonOrNull(answered, answered ? std::to_string(row.node->cpus) : "");
  if (!answered) return out + ",\"addresses\":null,\"gpus\":null}";
  out += ",\"addresses\":[";
  for (size_t i = 0; i < row.node->addresses.size(); ++i) {
    out += (i == 0 ? "" : ",") + jsonString(row.node->addresses[i]);
  }
  out += "],\"gpus\":[";
  for (size_t i = 0; i < row.node->gpus.size(); ++i) {
    const GpuInfo& gpu = row.node->gpus[i];
    out += i == 0 ? "{" : ",{";
    out += "\"index\":" + std::to_string(gpu.index);
    out += ",\"name\":" + jsonString(gpu.name);
    out += ",\"uuid\":" + jsonString(gpu.uuid);
    out += ",\"pci_bus_id\":" + jsonString(gpu.pciBusId);
    out += ",\"memory_bytes\":" + std::to_string(gpu.memoryBytes);
    out += ",\"held_by\":[";
    bool first = true;
    for (const GpuHolder& holder : row.gpuHolders) {
      if (holder.gpu != gpu.index) continue;
      out += (first ? "" : ",") + jsonString(holder.job);
      first = false;
    }
    out += "]}";
  }
  return out + "]}";
}

const char* problemKind(HostStatus kind) {
  switch (kind) {
    case HostStatus::kUnreachable:
      return "unreachable";
    case HostStatus::kAuthFailed:
      return "auth_failed";
    case HostStatus::kVersionMismatch:
      return "version_mismatch";
    case HostStatus::kClock:
      return "clock";
    case HostStatus::kOk:
      break;
  }
  return "ok";
}

}  // namespace

std::string gpuSummary(const std::vector<GpuInfo>& gpus, const std::vector<GpuHolder>& holders) {
  if (gpus.empty()) return "none";
  std::string out;
  for (size_t i = 0; i < gpus.size();) {
    size_t same = 1;
    while (i + same < gpus.size() && gpus[i + same].name == gpus[i].name &&
           gpus[i + same].memoryBytes == gpus[i].memoryBytes) {
      ++same;
    }
    out += (out.empty() ? "" : ", ") + std::to_string(same) + "x " +
           (gpus[i].name.empty() ? std::string("GPU") : gpus[i].name) + " (" +
           gib(gpus[i].memoryBytes) + ")";
    i += same;
  }
  // Jobs in the order they first hold a GPU, each with its GPUs.
  std::vector<std::pair<std::string, std::string>> byJob;
  for (const GpuHolder& holder : holders) {
    auto it = std::find_if(byJob.begin(), byJob.end(),
                           [&](const auto& entry) { return entry.first == holder.job; });
    if (it == byJob.end()) {
      byJob.emplace_back(holder.job, std::to_string(holder.gpu));
    } else {
      it->second += "," + std::to_string(holder.gpu);
    }
  }
  for (const auto& [job, indices] : byJob) out += "; GPU " + indices + " held by " + job;
  return out;
}

std::string jsonString(std::string_view text) {
  std::string out = "\"";
  appendJsonEscaped(out, text, InvalidUtf8::kReplacement);
  return out + "\"";
}

std::string formatDoctorTable(const DoctorReport& report) {
  std::vector<std::vector<std::string>> cells = {
      {"HOST", "ADDRESS", "STATUS", "VERSION", "CLOCK (ms)", "CPUS", "GPUS"}};
  for (const HostRow& row : report.hosts) {
    cells.push_back({row.host, row.address, statusName(row.status),
                     row.node ? (row.node->version.empty() ? "?" : row.node->version) : kUnknown,
                     row.clock ? clockText(*row.clock) : kUnknown,
                     row.node ? std::to_string(row.node->cpus) : kUnknown, rowGpus(row)});
  }
  std::vector<size_t> widths(cells[0].size(), 0);
  for (const auto& line : cells) {
    for (size_t c = 0; c < line.size(); ++c) widths[c] = std::max(widths[c], columns(line[c]));
  }
  std::string out;
  for (const auto& line : cells) {
    std::string text;
    for (size_t c = 0; c < line.size(); ++c) {
      text += line[c];
      // The last column is not padded: no trailing blanks.
      if (c + 1 < line.size()) text.append(widths[c] - columns(line[c]) + 2, ' ');
    }
    out += text + "\n";
  }
  out += "\n";
  const size_t hosts = report.hosts.size();
  if (report.ok()) {
    return out + "all " + std::to_string(hosts) + " agent(s) OK (hvdrun " + report.hvdrunVersion +
           ")\n";
  }
  size_t failing = 0;
  for (const HostRow& row : report.hosts) failing += row.status != HostStatus::kOk ? 1 : 0;
  out += std::to_string(report.problems.size()) + " problem(s) on " + std::to_string(failing) +
         " of " + std::to_string(hosts) + " host(s) (hvdrun " + report.hvdrunVersion + "):\n";
  for (const Problem& problem : report.problems) out += "  " + problem.message + "\n";
  return out;
}

std::string formatDoctorJson(const DoctorReport& report) {
  std::string out = "{\"ok\":" + std::string(report.ok() ? "true" : "false");
  out += ",\"hvdrun_version\":" + jsonString(report.hvdrunVersion);
  out += ",\"clock_limit_us\":" + std::to_string(report.clockLimitUs);
  out += ",\"hosts\":[";
  for (size_t i = 0; i < report.hosts.size(); ++i) {
    out += (i == 0 ? "" : ",") + jsonHost(report.hosts[i]);
  }
  out += "],\"problems\":[";
  for (size_t i = 0; i < report.problems.size(); ++i) {
    const Problem& p = report.problems[i];
    out += i == 0 ? "{" : ",{";
    out += "\"host\":" + jsonString(p.host);
    out += ",\"address\":" + jsonString(p.address);
    out += ",\"kind\":" + jsonString(problemKind(p.kind));
    out += ",\"message\":" + jsonString(p.message) + "}";
  }
  return out + "]}\n";
}

}  // namespace hvd::launcher
