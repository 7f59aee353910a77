// The agent's state as an AgentSnapshot, for each scrape of its metrics. Each part is read
// through its own thread-safe accessor, under its own lock and one after another (never two at
// once), so a scrape can neither deadlock with nor hold up the gRPC handlers and job threads
// for longer than a copy of a few numbers. The figures of different parts may be a moment apart;
// each one is consistent in itself.
#pragma once

#include <string>

#include "agent/jobs/led_jobs.h"
#include "agent/jobs/local_host.h"
#include "agent/ledger/resource_ledger.h"
#include "agent/metrics/agent_snapshot.h"
#include "agent/records/job_history.h"

namespace hvd::agent::metrics {

// The parts read; each must outlive the collection. A null part reads as nothing (zeros).
struct AgentParts {
  std::string version;
  const jobs::LedJobs* led = nullptr;
  const jobs::LocalHost* local = nullptr;
  const ledger::ResourceLedger* ledger = nullptr;
  const records::JobHistory* history = nullptr;
};

AgentSnapshot collectSnapshot(const AgentParts& parts);

}  // namespace hvd::agent::metrics
