// Where a context gets the links it does not have yet. A context beyond
// ContextOptions::fullMeshRanks starts with a few links (its ring neighbours) and opens the
// others on first use: before each run of a schedule (progress.h), the peers it names without
// a link are opened in one batch.
//
// Why that cannot deadlock: a schedule's sends and receives are symmetric (a rank that sends to
// p in a run receives from p, or p sends to it, in p's run of the same collective step), so
// every peer of a batch opens its side in a batch of its own that contains this rank. A rank
// waiting in a batch waits only for ranks that will reach the same step; every earlier step can
// finish without it, because it has finished its own part of each (its sends are in the links'
// buffers). A connection for a later step that arrives meanwhile is accepted and kept.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "transport/link.h"

namespace hvd::transport {

// The kinds of link a source opens: known at init, before the links are (every rank of a job
// reaches the same answer, since the collectives pick thresholds by it).
struct LinkKinds {
  bool shm = false;
  bool tcp = false;
};

class LinkSource {
 public:
  virtual ~LinkSource() = default;
  virtual LinkKinds kinds() const = 0;
  // Opens the links to `peers` (distinct, none of them open) into links[peer]. Throws
  // TimeoutError naming the peers it could not reach within `timeout`; `what` starts the
  // message ("allreduce").
  virtual void open(const std::vector<int>& peers, std::vector<std::unique_ptr<Link>>& links,
                    std::chrono::milliseconds timeout, const char* what) = 0;
};

}  // namespace hvd::transport
