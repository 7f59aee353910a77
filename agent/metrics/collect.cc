#include "agent/metrics/collect.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <vector>

#include "agent/rpc/convert.h"

namespace hvd::agent::metrics {
namespace {

// Every state a record can be in, in the order of a job's life, so each is rendered (0 when
// empty) and in the same order at every scrape.
constexpr v1::JobState kStates[] = {v1::JOB_PENDING,   v1::JOB_QUEUED, v1::JOB_RUNNING,
                                    v1::JOB_COMPLETED, v1::JOB_FAILED, v1::JOB_CANCELLED,
                                    v1::JOB_TIMEOUT,   v1::JOB_LOST};

// "TIMEOUT" -> "timeout": `hvdrun ps`'s name, in the lower case of Prometheus label values.
std::string labelOf(v1::JobState state) {
  std::string name = rpc::jobStateName(state);
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return name;
}

}  // namespace

AgentSnapshot collectSnapshot(const AgentParts& parts) {
  AgentSnapshot s;
  s.version = parts.version;

  std::map<v1::JobState, size_t> counts;
  if (parts.history != nullptr) counts = parts.history->stateCounts();
  for (v1::JobState state : kStates) {
    const auto it = counts.find(state);
    s.jobsByState.emplace_back(labelOf(state), it == counts.end() ? 0 : it->second);
  }

  if (parts.led != nullptr) {
    const jobs::LedJobs::Counts led = parts.led->counts();
    s.queueLength = led.queued;
    s.restarts = led.restarts;
    s.elasticRounds = led.elasticRounds;
  }

  if (parts.ledger != nullptr) {
    if (parts.ledger->slots() > 0) s.slots = static_cast<uint64_t>(parts.ledger->slots());
    s.gpus = parts.ledger->gpus().size();
    std::set<int> held;
    for (const ledger::Holding& h : parts.ledger->holdings()) {
      s.slotsHeld += static_cast<uint64_t>(std::max(0, h.slots));
      held.insert(h.gpus.begin(), h.gpus.end());
    }
    s.gpusHeld = held.size();
  }

  if (parts.local != nullptr) {
    for (const auto& [job, ranks] : parts.local->runningRanksByJob()) {
      s.ranksByJob[job] = static_cast<uint64_t>(ranks);
    }
  }
  return s;
}

}  // namespace hvd::agent::metrics
