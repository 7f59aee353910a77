// What `hvdrun doctor` prints (doctor_report.h's report): a table a person reads at a glance,
// then one line per problem; or, with --json, one JSON object for scripts. Pure functions, so
// both are unit tested byte for byte.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "agent/coordinator/node_agent.h"
#include "launcher/doctor_report.h"

namespace hvd::launcher {

// One row per host (HOST, ADDRESS, STATUS, VERSION, CLOCK (ms), CPUS, GPUS; "-" where the agent
// did not say), a blank line, then either "all N agent(s) OK (hvdrun V)" or a count of the
// problems followed by each problem's line, indented.
std::string formatDoctorTable(const DoctorReport& report);

// {"ok":..., "hvdrun_version":..., "clock_limit_us":..., "hosts":[...], "problems":[...]} and a
// newline. Every host has every field; what its agent did not say is null.
std::string formatDoctorJson(const DoctorReport& report);

// "2x NVIDIA H100 80GB HBM3 (80 GiB); GPU 0,1 held by hvd-3f2a1c": identical neighbours counted
// together, then the ledger's holders by job; "none" for no GPU.
std::string gpuSummary(const std::vector<agent::node::GpuInfo>& gpus,
                       const std::vector<agent::coordinator::GpuHolder>& holders);

// `text` as a JSON string, quotes included: '"' and '\\' escaped, control characters as \n, \t,
// ... or \u00XX, and bytes that are not UTF-8 (a host name is whatever the user typed) as
// U+FFFD, so that the output always parses.
std::string jsonString(std::string_view text);

}  // namespace hvd::launcher
