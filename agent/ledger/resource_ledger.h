// The ledger of one node: which job holds which slots and which GPUs (docs/architecture.md
// "Resources, queue and restarts"). Every agent keeps one, so that jobs led by different leaders,
// or submitted one after another, never land on the same GPUs unless one asked to share
// (--oversubscribe).
//
// A leader reserves a job's share of every host before any rank starts. A reservation carries a
// lease: if its leader vanishes before launching, the lease runs out and the resources return,
// so a crashed leader cannot hold a node forever and two leaders cannot both win the same GPUs.
// The launch binds the reservation (no expiry from then on) and the agent releases it when the
// job's last rank on this node has been reaped.
//
// A job restarting (a new attempt, its own key) takes over the holdings of its earlier attempts:
// the earlier attempt has ended, and its release may still be on its way.
//
// Pure logic over an injected clock; thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/node/gpu_discovery.h"

namespace hvd::agent::ledger {

using TimePoint = std::chrono::steady_clock::time_point;

// What a leader asks of this node for one attempt of a job.
struct Request {
  std::string key;  // the attempt's launch id ("hvd-3f2a1c", "hvd-3f2a1c.1"): what Launch names
  std::string job;  // the job's id: holdings of the same job under other keys are taken over
  int ranks = 0;    // slots
  int gpusPerRank = 1;
  bool share = false;              // --oversubscribe: GPUs (and slots) may be shared
  std::vector<int> preferredGpus;  // taken when all of them are free (a restart's placement)
  std::chrono::milliseconds lease{30000};
};

enum class Verdict {
  kGranted,
  kBusy,       // held by other jobs now; may fit later
  kNeverFits,  // more than this node has at all
};

struct Grant {
  Verdict verdict = Verdict::kGranted;
  std::vector<int> gpus;  // kGranted: the GPU indices, in the order ranks take them
  std::string reason;     // kBusy / kNeverFits: one line for the user
};

// One job's holding, for `hvdrun status` and the agent's own view.
struct Holding {
  std::string key;
  std::string job;
  int slots = 0;
  std::vector<int> gpus;
  bool shared = false;
  bool bound = false;                 // launched: no lease
  std::optional<TimePoint> leaseEnd;  // while not bound
};

class ResourceLedger {
 public:
  using Clock = std::function<TimePoint()>;

  // `gpus`: the node's GPUs. `slots`: ranks this node runs at once across all jobs; 0 means no
  // limit. `host` names the node in messages.
  ResourceLedger(std::string host, std::vector<node::GpuInfo> gpus, int slots, Clock now);

  // Grants `request` in full or not at all. Asking again with a key already held returns that
  // holding (and renews its lease when not bound).
  Grant reserve(const Request& request);
  // The launch of `key` started: its holding no longer expires. False when nothing is held under
  // `key` (it expired, or was never reserved).
  bool bind(const std::string& key);
  // Returns what `key` holds; unknown keys are ignored.
  void release(const std::string& key);

  // Current holdings, expired leases dropped; in reservation order.
  std::vector<Holding> holdings() const;
  const std::vector<node::GpuInfo>& gpus() const { return gpus_; }
  int slots() const { return slots_; }

  // Called (outside the lock) whenever resources were returned: a release, a takeover or an
  // expired lease. The queue of waiting jobs listens to it.
  void setOnRelease(std::function<void()> onRelease);

 private:
  // Under mutex_. Returns whether anything expired.
  bool dropExpiredLocked(TimePoint now);
  std::string holdersLocked(const std::vector<int>& gpus, bool slotsToo) const;
  void notifyReleased();

  const std::string host_;
  const std::vector<node::GpuInfo> gpus_;
  const int slots_;
  const Clock now_;

  mutable std::mutex mutex_;
  std::vector<Holding> holdings_;
  std::function<void()> onRelease_;
};

}  // namespace hvd::agent::ledger
