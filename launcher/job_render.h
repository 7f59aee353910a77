// What hvdrun's job commands print (ps, status), as pure functions over v1::JobInfo, apart from
// the calls that fetch it (job_commands.h), so tables and details are unit tested with fixed
// times.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hvd/v1/agent.pb.h"

namespace hvd::launcher {

// "0:00:07", "1:02:03", "2-03:04:05".
std::string formatRuntime(int64_t ms);
// Local time "2026-12-01 20:15:03"; "-" for 0.
std::string formatLocalTime(int64_t unixMs);
// The `hvdrun ps` table; runtimes of running jobs count up to `nowUnixMs`.
std::string formatJobTable(const std::vector<v1::JobInfo>& jobs, int64_t nowUnixMs);
// `hvdrun status JOB`.
std::string formatJobStatus(const v1::JobInfo& job, int64_t nowUnixMs);

}  // namespace hvd::launcher
