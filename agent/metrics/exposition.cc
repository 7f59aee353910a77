#include "agent/metrics/exposition.h"

#include <cstdint>
#include <optional>

namespace hvd::agent::metrics {
namespace {

// The family's HELP and TYPE lines. HELP texts are this file's own constants, free of the
// characters the format would need escaped there (backslash, line feed).
void family(std::string* out, const char* name, const char* type, const char* help) {
  *out += "# HELP ";
  *out += name;
  *out += ' ';
  *out += help;
  *out += "\n# TYPE ";
  *out += name;
  *out += ' ';
  *out += type;
  *out += '\n';
}

// A sample's value: a count, or +Inf for a quantity without a limit (the format's spelling).
std::string value(std::optional<uint64_t> v) { return v ? std::to_string(*v) : "+Inf"; }

void sample(std::string* out, const char* name, std::optional<uint64_t> v) {
  *out += name;
  *out += ' ';
  *out += value(v);
  *out += '\n';
}

void labelled(std::string* out, const char* name, const char* label, std::string_view labelValue,
              std::optional<uint64_t> v) {
  *out += name;
  *out += '{';
  *out += label;
  *out += "=\"";
  *out += escapeLabelValue(labelValue);
  *out += "\"} ";
  *out += value(v);
  *out += '\n';
}

void gauge(std::string* out, const char* name, const char* help, std::optional<uint64_t> v) {
  family(out, name, "gauge", help);
  sample(out, name, v);
}

void counter(std::string* out, const char* name, const char* help, uint64_t v) {
  family(out, name, "counter", help);
  sample(out, name, v);
}

// What is left of `total` beside `held` (never below 0: shared slots may count more than it).
std::optional<uint64_t> freeOf(std::optional<uint64_t> total, uint64_t held) {
  if (!total) return std::nullopt;
  return *total > held ? *total - held : 0;
}

}  // namespace

std::string escapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string renderMetrics(const AgentSnapshot& s) {
  std::string out;
  family(&out, "hvd_agent_info", "gauge", "hvdagent's version, as a label; the value is always 1.");
  labelled(&out, "hvd_agent_info", "version", s.version, 1);

  family(&out, "hvd_agent_jobs", "gauge",
         "Jobs this agent leads, by state, as hvdrun ps lists them (finished ones until "
         "--keep-jobs prunes them).");
  for (const auto& [state, count] : s.jobsByState) {
    labelled(&out, "hvd_agent_jobs", "state", state, count);
  }
  gauge(&out, "hvd_agent_queue_length", "Jobs in this agent's queue, waiting to start.",
        s.queueLength);

  gauge(&out, "hvd_agent_slots",
        "Ranks this node runs at once across all jobs (--slots); +Inf without a limit.", s.slots);
  gauge(&out, "hvd_agent_slots_held", "Slots that jobs hold on this node (reserved or running).",
        s.slotsHeld);
  gauge(&out, "hvd_agent_slots_free", "Slots no job holds on this node; +Inf without a limit.",
        freeOf(s.slots, s.slotsHeld));
  gauge(&out, "hvd_agent_gpus", "GPUs of this node, as discovered at start-up.", s.gpus);
  gauge(&out, "hvd_agent_gpus_held",
        "GPUs that jobs hold on this node (a GPU shared by several jobs counts once).", s.gpusHeld);
  gauge(&out, "hvd_agent_gpus_free", "GPUs no job holds on this node.", freeOf(s.gpus, s.gpusHeld));

  uint64_t ranks = 0;
  for (const auto& [job, count] : s.ranksByJob) ranks += count;
  gauge(&out, "hvd_agent_ranks_running",
        "Ranks running on this node, whichever agent leads their job.", ranks);
  family(&out, "hvd_agent_job_ranks_running", "gauge",
         "Ranks running on this node, per job (jobs with a running rank only).");
  for (const auto& [job, count] : s.ranksByJob) {
    labelled(&out, "hvd_agent_job_ranks_running", "job_id", job, count);
  }

  counter(&out, "hvd_agent_restarts_total",
          "Attempts of jobs this agent leads started again after a failure, since it started.",
          s.restarts);
  counter(&out, "hvd_agent_elastic_rounds_total",
          "Rounds that elastic jobs this agent leads began (each job's first included), since it "
          "started.",
          s.elasticRounds);
  return out;
}

}  // namespace hvd::agent::metrics
