// What hvdagent's metrics say, read at one moment: a plain value that the scrape renders
// (exposition.h), made from the agent's parts by collect.h. Apart from both so that the renderer
// is a pure function of it, unit-tested with hand-made snapshots.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hvd::agent::metrics {

struct AgentSnapshot {
  std::string version;  // hvdagent's version
  // Records of the jobs this agent leads, per state as `hvdrun ps` names it in lower case
  // ("queued", "running", "completed", ...), in the order they are rendered. Every state is
  // listed, with 0 where no job is in it, so that a query never sees a series vanish.
  std::vector<std::pair<std::string, uint64_t>> jobsByState;
  uint64_t queueLength = 0;       // jobs in this agent's queue
  std::optional<uint64_t> slots;  // ranks this node runs at once (--slots); nullopt: no limit
  uint64_t slotsHeld = 0;         // reserved or running, every job together
  uint64_t gpus = 0;              // the node's GPUs, as discovered at start-up
  uint64_t gpusHeld = 0;          // distinct GPUs some job holds (a shared one counts once)
  uint64_t restarts = 0;          // since the agent started (a counter)
  uint64_t elasticRounds = 0;     // since the agent started (a counter)
  // Ranks running on this node by job id, whichever agent leads the job; jobs without a running
  // rank are absent.
  std::map<std::string, uint64_t> ranksByJob;
};

}  // namespace hvd::agent::metrics
