// `hvdrun doctor`'s verdict on a cluster's agents, as a pure function of what each agent
// answered (or why it did not), when hvdrun asked and hvdrun's own version: no gRPC, no clock,
// so every rule is unit tested with fixed inputs. Asking the agents is doctor.h; printing the
// report is doctor_render.h.
//
// The rules, per host, in the order its status reports them:
//   UNREACHABLE       no answer (refused, no route, no answer within --start-timeout);
//   AUTH FAILED       the agent answered but refused hvdrun's key (or its timestamp);
//   VERSION MISMATCH  the agent's version is not hvdrun's: the job protocol is one build's;
//   CLOCK             the agent's wall clock is more than kClockLimitUs from hvdrun's host's.
// A host may have several problems (a wrong version and a wrong clock): its status is the first,
// and each is a line of its own in `problems`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agent/coordinator/node_agent.h"

namespace hvd::launcher {

// How far an agent's clock may be from hvdrun's host's: 1 s. Job logs, records and the ranks'
// timestamped output are compared across hosts by wall-clock time, and the agents' timeouts and
// leases are seconds long: beyond a second, "which host failed first" and a log read side by side
// stop being true. (The agents' signature window, ±30 s, refuses calls long before an hour's skew
// could; NTP keeps healthy hosts within milliseconds.)
constexpr int64_t kClockLimitUs = 1000000;

// One agent as doctor asked it: its Describe result and hvdrun's wall clock (microseconds since
// the Unix epoch) just before the call went out and when its answer came back.
struct AgentProbe {
  std::string host;     // as the user named it (-H, --hostfile)
  std::string address;  // "host:port" asked
  agent::coordinator::DescribeResult result;
  int64_t sentUnixUs = 0;
  int64_t answeredUnixUs = 0;
};

// The agent's clock minus hvdrun's, and how far off that estimate may be.
struct ClockOffset {
  int64_t offsetUs = 0;
  int64_t uncertaintyUs = 0;
};

// The agent read its clock somewhere between the call leaving and its answer arriving: the
// midpoint is the best guess of hvdrun's clock at that moment, wrong by at most half the round
// trip (Cristian's algorithm).
ClockOffset clockOffset(int64_t sentUnixUs, int64_t answeredUnixUs, int64_t agentUnixUs);

// Whether `offset` breaks the rule: |offset| > limitUs (exactly the limit is still fine). The
// estimate, not its worst case: a slow answer must not turn a good clock into a finding.
bool clockOff(const ClockOffset& offset, int64_t limitUs);

enum class HostStatus { kOk, kUnreachable, kAuthFailed, kVersionMismatch, kClock };

// "OK", "UNREACHABLE", "AUTH FAILED", "VERSION MISMATCH", "CLOCK".
const char* statusName(HostStatus status);

// One host's row: what is known of it.
struct HostRow {
  std::string host;
  std::string address;
  HostStatus status = HostStatus::kOk;
  std::string error;  // UNREACHABLE / AUTH FAILED: the reason the call gave
  std::optional<agent::node::NodeDescription> node;  // when it answered
  std::optional<ClockOffset> clock;                  // when it answered with its time
  std::vector<agent::coordinator::GpuHolder> gpuHolders;
};

// One problem: which host, what kind (a status other than kOk), and one line that says what is
// wrong and what to do about it.
struct Problem {
  std::string host;
  std::string address;
  HostStatus kind = HostStatus::kUnreachable;
  std::string message;
};

struct DoctorReport {
  std::string hvdrunVersion;
  int64_t clockLimitUs = kClockLimitUs;
  std::vector<HostRow> hosts;     // in the order asked
  std::vector<Problem> problems;  // by host, then in the order of the rules above

  bool ok() const { return problems.empty(); }
};

DoctorReport buildDoctorReport(const std::vector<AgentProbe>& probes,
                               const std::string& hvdrunVersion,
                               int64_t clockLimitUs = kClockLimitUs);

}  // namespace hvd::launcher
