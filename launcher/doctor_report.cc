#include "launcher/doctor_report.h"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>

namespace hvd::launcher {
namespace {

// "+2.500 s", "-0.013 s": milliseconds are what matters against a limit of seconds.
std::string signedSeconds(int64_t us) {
  char text[48];
  const int64_t ms = std::llabs(us) / 1000;
  std::snprintf(text, sizeof(text), "%c%" PRId64 ".%03" PRId64 " s", us < 0 ? '-' : '+', ms / 1000,
                ms % 1000);
  return text;
}

std::string where(const HostRow& row) { return row.host + " (" + row.address + ")"; }

void addProblem(DoctorReport* report, const HostRow& row, HostStatus kind, std::string message) {
  report->problems.push_back({row.host, row.address, kind, where(row) + ": " + message});
}

}  // namespace

ClockOffset clockOffset(int64_t sentUnixUs, int64_t answeredUnixUs, int64_t agentUnixUs) {
  const int64_t roundTrip = answeredUnixUs - sentUnixUs;
  // Our clock may step between the two readings: a negative round trip means nothing is known
  // about the error but its size.
  const int64_t midpoint = sentUnixUs + roundTrip / 2;
  return {agentUnixUs - midpoint, std::llabs(roundTrip) / 2 + std::llabs(roundTrip) % 2};
}

bool clockOff(const ClockOffset& offset, int64_t limitUs) {
  return std::llabs(offset.offsetUs) > limitUs;
}

const char* statusName(HostStatus status) {
  switch (status) {
    case HostStatus::kOk:
      return "OK";
    case HostStatus::kUnreachable:
      return "UNREACHABLE";
    case HostStatus::kAuthFailed:
      return "AUTH FAILED";
    case HostStatus::kVersionMismatch:
      return "VERSION MISMATCH";
    case HostStatus::kClock:
      return "CLOCK";
  }
  return "?";
}

DoctorReport buildDoctorReport(const std::vector<AgentProbe>& probes,
                               const std::string& hvdrunVersion, int64_t clockLimitUs) {
  DoctorReport report;
  report.hvdrunVersion = hvdrunVersion;
  report.clockLimitUs = clockLimitUs;
  for (const AgentProbe& probe : probes) {
    HostRow row;
    row.host = probe.host;
    row.address = probe.address;
    const agent::coordinator::DescribeResult& result = probe.result;
    if (!result.ok()) {
      row.error = result.error.reason;
      if (result.error.authenticationFailed) {
        row.status = HostStatus::kAuthFailed;
        addProblem(&report, row, row.status,
                   "the agent refused hvdrun's call: " + row.error +
                       "; give --key-file the cluster key the agents use (the file of their "
                       "--key-file), and keep this host's clock within the agents' signature "
                       "window (30 s)");
      } else {
        row.status = HostStatus::kUnreachable;
        addProblem(&report, row, row.status,
                   "agent unreachable: " + row.error +
                       "; start hvdagent there, listening on an address this host reaches "
                       "(hvdagent --listen), or correct the host name or --agent-port");
      }
      report.hosts.push_back(std::move(row));
      continue;
    }
    row.node = result.description;
    row.gpuHolders = result.gpuHolders;
    std::vector<HostStatus> found;
    if (row.node->version != hvdrunVersion) {
      found.push_back(HostStatus::kVersionMismatch);
      const std::string agentVersion =
          row.node->version.empty() ? "(no version given)" : row.node->version;
      addProblem(&report, row, HostStatus::kVersionMismatch,
                 "hvdagent " + agentVersion + " but hvdrun " + hvdrunVersion +
                     ": a job needs one hvd build on every host; install hvdrun's build there "
                     "and restart the agent (`hvdagent --version` says which it runs)");
    }
    if (result.agentUnixTimeUs != 0) {
      row.clock = clockOffset(probe.sentUnixUs, probe.answeredUnixUs, result.agentUnixTimeUs);
      if (clockOff(*row.clock, clockLimitUs)) {
        found.push_back(HostStatus::kClock);
        addProblem(&report, row, HostStatus::kClock,
                   "clock " + signedSeconds(row.clock->offsetUs) + " (±" +
                       signedSeconds(row.clock->uncertaintyUs).substr(1) +
                       ") from this host's, beyond the limit of " +
                       signedSeconds(clockLimitUs).substr(1) +
                       ": log lines and job records of different hosts will not line up; "
                       "synchronise its clock (NTP: chrony or systemd-timesyncd)");
      }
    }
    row.status = found.empty() ? HostStatus::kOk : found.front();
    report.hosts.push_back(std::move(row));
  }
  return report;
}

}  // namespace hvd::launcher
