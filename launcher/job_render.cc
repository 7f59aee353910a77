#include "launcher/job_render.h"

#include <cstdio>
#include <ctime>

#include "agent/rpc/convert.h"

namespace hvd::launcher {
namespace {

using agent::rpc::jobStateName;

std::string pad(std::string text, size_t width) {
  if (text.size() < width) text.append(width - text.size(), ' ');
  return text;
}

std::string joined(const google::protobuf::RepeatedPtrField<std::string>& items,
                   const std::string& separator, size_t maxChars = 0) {
  std::string out;
  for (const std::string& item : items) {
    if (!out.empty()) out += separator;
    out += item;
  }
  if (maxChars > 3 && out.size() > maxChars) out = out.substr(0, maxChars - 3) + "...";
  return out;
}

std::string exitText(const v1::JobInfo& job) {
  if (!job.has_end()) return "-";
  return std::to_string(job.end().exit_code());
}

int64_t runtimeMs(const v1::JobInfo& job, int64_t now) {
  if (job.started_unix_ms() == 0) return 0;
  const int64_t end = job.ended_unix_ms() != 0 ? job.ended_unix_ms() : now;
  return end > job.started_unix_ms() ? end - job.started_unix_ms() : 0;
}

}  // namespace

std::string formatRuntime(int64_t ms) {
  int64_t s = ms / 1000;
  const int64_t days = s / 86400;
  s %= 86400;
  char text[64];
  if (days > 0) {
    std::snprintf(text, sizeof(text), "%lld-%02lld:%02lld:%02lld", static_cast<long long>(days),
                  static_cast<long long>(s / 3600), static_cast<long long>(s / 60 % 60),
                  static_cast<long long>(s % 60));
  } else {
    std::snprintf(text, sizeof(text), "%lld:%02lld:%02lld", static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
  }
  return text;
}

std::string formatLocalTime(int64_t unixMs) {
  if (unixMs == 0) return "-";
  const std::time_t t = static_cast<std::time_t>(unixMs / 1000);
  std::tm tm{};
  ::localtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S", &tm);
  return text;
}

std::string formatJobTable(const std::vector<v1::JobInfo>& jobs, int64_t nowUnixMs) {
  std::string out = pad("JOB ID", 12) + pad("STATE", 11) + pad("NP", 5) + pad("HOSTS", 24) +
                    pad("SUBMITTED", 21) + pad("RUNTIME", 11) + pad("EXIT", 6) + "COMMAND\n";
  for (const v1::JobInfo& job : jobs) {
    out += pad(job.job_id(), 12) + pad(jobStateName(job.state()), 11) +
           pad(std::to_string(job.np()), 5) + pad(joined(job.hosts(), ",", 22), 24) +
           pad(formatLocalTime(job.submitted_unix_ms()), 21) +
           pad(formatRuntime(runtimeMs(job, nowUnixMs)), 11) + pad(exitText(job), 6) +
           joined(job.argv(), " ", 60) + "\n";
  }
  return out;
}

std::string formatJobStatus(const v1::JobInfo& job, int64_t nowUnixMs) {
  std::string out = "job " + job.job_id() + ": " + jobStateName(job.state()) + "\n";
  const auto field = [&](const std::string& name, const std::string& value) {
    out += "  " + pad(name, 12) + value + "\n";
  };
  field("command", joined(job.argv(), " "));
  field("cwd", job.cwd());
  field("np", std::to_string(job.np()) + " on " + joined(job.hosts(), ", "));
  field("submitted", formatLocalTime(job.submitted_unix_ms()) +
                         (job.detached() ? " (hvdrun submit)" : " (attached run)"));
  field("started", formatLocalTime(job.started_unix_ms()));
  field("ended", formatLocalTime(job.ended_unix_ms()));
  field("runtime", formatRuntime(runtimeMs(job, nowUnixMs)));
  if (job.time_limit_ms() > 0) field("time limit", formatRuntime(job.time_limit_ms()));
  if (job.state() == v1::JOB_QUEUED && !job.queue_reason().empty()) {
    field("waiting", job.queue_reason());
  }
  for (const v1::HostResources& r : job.resources()) {
    std::string held = std::to_string(r.slots()) + (r.slots() == 1 ? " slot" : " slots");
    if (r.gpus_size() > 0) {
      std::vector<std::string> gpus;
      for (int i = 0; i < r.gpus_size(); ++i) {
        gpus.push_back(std::to_string(r.gpus(i)) +
                       (i < r.gpu_uuids_size() ? " (" + r.gpu_uuids(i) + ")" : ""));
      }
      std::string list;
      for (const std::string& g : gpus) list += (list.empty() ? "" : ", ") + g;
      held += ", GPUs " + list;
    }
    field("holds", r.host() + ": " + held);
  }
  if (job.max_restarts() > 0) {
    field("restarts", std::to_string(job.restart_count()) + " of at most " +
                          std::to_string(job.max_restarts()));
  }
  if (job.attempts_size() > 1 || job.max_restarts() > 0) {
    for (const v1::AttemptInfo& a : job.attempts()) {
      std::string line = joined(a.hosts(), ",") + ", " + formatLocalTime(a.started_unix_ms()) +
                         " to " + formatLocalTime(a.ended_unix_ms());
      if (a.has_end()) {
        const std::string& summary = a.end().summary();
        line += ": " + (summary.rfind("hvdrun: ", 0) == 0 ? summary.substr(8) : summary);
      }
      field("attempt " + std::to_string(a.attempt()), line);
    }
  }
  // An elastic job's rounds: who trained at what size, from when to when, and why each began.
  for (const v1::RoundInfo& r : job.rounds()) {
    field("round " + std::to_string(r.round()),
          "size " + std::to_string(r.size()) + " on " + joined(r.hosts(), ", ") + ", " +
              formatLocalTime(r.started_unix_ms()) + " to " + formatLocalTime(r.ended_unix_ms()) +
              ": " + r.cause());
  }
  if (job.has_end()) {
    field("exit code", std::to_string(job.end().exit_code()));
    if (job.end().exit_code() != 0 || !job.end().reason().empty()) {
      field("cause", job.end().summary().rfind("hvdrun: ", 0) == 0 ? job.end().summary().substr(8)
                                                                   : job.end().summary());
    }
    if (!job.end().stderr_tail().empty()) {
      out += "  last stderr lines of rank " + std::to_string(job.end().rank()) + ":\n";
      for (const std::string& line : job.end().stderr_tail()) out += "    " + line + "\n";
    }
  }
  if (job.log_lines_dropped() > 0) {
    field("log", std::to_string(job.log_lines_dropped()) + " line(s) not logged (" +
                     (job.log_drop_reason().empty() ? std::string("the agent's --max-log-mb")
                                                    : job.log_drop_reason()) +
                     ")");
  }
  if (job.ranks_size() > 0) {
    out += "  " + pad("RANK", 6) + pad("HOST", 24) + pad("PID", 9) + pad("STATE", 9) + "EXIT\n";
    for (const v1::RankInfo& r : job.ranks()) {
      std::string state = r.state() == v1::RANK_RUNNING  ? "RUNNING"
                          : r.state() == v1::RANK_EXITED ? "EXITED"
                          : r.state() == v1::RANK_LOST   ? "LOST"
                                                         : "PENDING";
      std::string exit = "-";
      if (r.state() == v1::RANK_EXITED) {
        exit = r.signal() != 0 ? "signal " + std::to_string(r.signal())
                               : std::to_string(r.exit_code());
      }
      out += "  " + pad(std::to_string(r.rank()), 6) + pad(r.host(), 24) +
             pad(r.pid() > 0 ? std::to_string(r.pid()) : "-", 9) + pad(state, 9) + exit + "\n";
    }
  }
  return out;
}

}  // namespace hvd::launcher
