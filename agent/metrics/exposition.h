// Prometheus' text exposition format (version 0.0.4) of an AgentSnapshot: what GET /metrics
// answers. A pure function, so the exact lines are pinned down by unit tests
// (tests/unit/agent_metrics_test.cc) without a server.
//
// Every family has its HELP and TYPE lines, names follow Prometheus' conventions (prefix
// hvd_agent_, counters end in _total, gauges do not), and label values are escaped as the format
// says. A job's id goes in `job_id`, not `job`: Prometheus gives every scraped series the scrape
// job's name as `job` and would rename ours to exported_job. Labels carry states, job ids and the
// version only: never a token, key, command line or environment value.
#pragma once

#include <string>
#include <string_view>

#include "agent/metrics/agent_snapshot.h"

namespace hvd::agent::metrics {

// The Content-Type of renderMetrics()'s text.
inline constexpr const char* kExpositionContentType = "text/plain; version=0.0.4; charset=utf-8";

// Every metric of `snapshot`, one family after another, ending in a newline.
std::string renderMetrics(const AgentSnapshot& snapshot);

// A label value as it goes between the quotes: backslash, double quote and line feed escaped
// (\\, \", \n); everything else as is.
std::string escapeLabelValue(std::string_view value);

}  // namespace hvd::agent::metrics
