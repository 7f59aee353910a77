#include "agent/ledger/resource_ledger.h"

#include <algorithm>
#include <set>
#include <utility>

namespace hvd::agent::ledger {
namespace {

std::string count(int n, const char* what) {
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

bool expired(const Holding& h, TimePoint now) {
  return !h.bound && h.leaseEnd && *h.leaseEnd <= now;
}

}  // namespace

ResourceLedger::ResourceLedger(std::string host, std::vector<node::GpuInfo> gpus, int slots,
                               Clock now)
    : host_(std::move(host)),
      gpus_(std::move(gpus)),
      slots_(std::max(0, slots)),
      now_(std::move(now)) {}

void ResourceLedger::setOnRelease(std::function<void()> onRelease) {
  std::lock_guard<std::mutex> lock(mutex_);
  onRelease_ = std::move(onRelease);
}

void ResourceLedger::notifyReleased() {
  std::function<void()> callback;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    callback = onRelease_;
  }
  if (callback) callback();
}

bool ResourceLedger::dropExpiredLocked(TimePoint now) {
  const size_t before = holdings_.size();
  holdings_.erase(std::remove_if(holdings_.begin(), holdings_.end(),
                                 [&](const Holding& h) { return expired(h, now); }),
                  holdings_.end());
  return holdings_.size() != before;
}

std::string ResourceLedger::holdersLocked(const std::vector<int>& gpus, bool slotsToo) const {
  std::vector<std::string> jobs;
  for (const Holding& h : holdings_) {
    bool holds = slotsToo && h.slots > 0;
    for (int g : h.gpus) holds = holds || std::find(gpus.begin(), gpus.end(), g) != gpus.end();
    if (holds && std::find(jobs.begin(), jobs.end(), h.job) == jobs.end()) jobs.push_back(h.job);
  }
  std::string out;
  for (const std::string& j : jobs) out += (out.empty() ? "" : ", ") + j;
  return out;
}

Grant ResourceLedger::reserve(const Request& request) {
  Grant grant;
  bool released = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const TimePoint now = now_();
    released = dropExpiredLocked(now);
    if (request.key.empty() || request.ranks < 1 || request.gpusPerRank < 1) {
      grant.verdict = Verdict::kNeverFits;
      grant.reason = "a reservation on " + host_ + " needs a key, at least one rank and at " +
                     "least one GPU per rank";
      return grant;
    }
    for (Holding& h : holdings_) {
      if (h.key != request.key) continue;
      if (!h.bound) h.leaseEnd = now + request.lease;
      grant.gpus = h.gpus;
      return grant;
    }
    // A new attempt of a job takes over what its earlier attempts still hold.
    const size_t before = holdings_.size();
    holdings_.erase(std::remove_if(holdings_.begin(), holdings_.end(),
                                   [&](const Holding& h) { return h.job == request.job; }),
                    holdings_.end());
    released = released || holdings_.size() != before;

    std::set<int> exclusive;
    std::set<int> used;
    int usedSlots = 0;
    for (const Holding& h : holdings_) {
      usedSlots += h.slots;
      for (int g : h.gpus) {
        used.insert(g);
        if (!h.shared) exclusive.insert(g);
      }
    }
    std::vector<int> all;
    for (const node::GpuInfo& g : gpus_) all.push_back(g.index);
    const int total = static_cast<int>(all.size());

    if (request.share) {
      // Oversubscribed: every GPU no other job holds exclusively, shared round-robin.
      for (int g : all) {
        if (exclusive.count(g) == 0) grant.gpus.push_back(g);
      }
      if (total > 0 && grant.gpus.empty()) {
        grant.verdict = Verdict::kBusy;
        grant.reason = "waiting for a GPU on " + host_ +
                       " that no job holds exclusively; held by " + holdersLocked(all, false);
        return grant;
      }
    } else {
      const long needed = total == 0 ? 0 : static_cast<long>(request.ranks) * request.gpusPerRank;
      if (needed > total) {
        grant.verdict = Verdict::kNeverFits;
        grant.reason = host_ + " has " + count(total, "GPU") + " but the job asks for " +
                       count(static_cast<int>(needed), "GPU") + " there";
        return grant;
      }
      if (slots_ > 0 && request.ranks > slots_) {
        grant.verdict = Verdict::kNeverFits;
        grant.reason = host_ + " runs at most " + count(slots_, "rank") +
                       " at once (hvdagent --slots) but the job asks for " +
                       std::to_string(request.ranks) + " there";
        return grant;
      }
      if (slots_ > 0 && usedSlots + request.ranks > slots_) {
        grant.verdict = Verdict::kBusy;
        grant.reason = "waiting for " + count(request.ranks, "slot") + " on " + host_ + " (" +
                       std::to_string(slots_ - usedSlots) + " of " + std::to_string(slots_) +
                       " free); held by " + holdersLocked({}, true);
        return grant;
      }
      std::vector<int> freeGpus;
      for (int g : all) {
        if (used.count(g) == 0) freeGpus.push_back(g);
      }
      if (static_cast<long>(freeGpus.size()) < needed) {
        grant.verdict = Verdict::kBusy;
        grant.reason = "waiting for " + count(static_cast<int>(needed), "GPU") + " on " + host_ +
                       " (" + std::to_string(freeGpus.size()) + " free); held by " +
                       holdersLocked(all, false);
        return grant;
      }
      const std::vector<int>& preferred = request.preferredGpus;
      const bool preferredFree =
          static_cast<long>(preferred.size()) == needed &&
          std::all_of(preferred.begin(), preferred.end(), [&](int g) {
            return std::find(freeGpus.begin(), freeGpus.end(), g) != freeGpus.end();
          });
      if (preferredFree) {
        grant.gpus = preferred;
      } else {
        grant.gpus.assign(freeGpus.begin(), freeGpus.begin() + needed);
      }
    }
    Holding h;
    h.key = request.key;
    h.job = request.job;
    h.slots = request.ranks;
    h.gpus = grant.gpus;
    h.shared = request.share;
    h.leaseEnd = now + request.lease;
    holdings_.push_back(std::move(h));
  }
  if (released) notifyReleased();
  return grant;
}

bool ResourceLedger::bind(const std::string& key) {
  bool released = false;
  bool found = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    released = dropExpiredLocked(now_());
    for (Holding& h : holdings_) {
      if (h.key != key) continue;
      h.bound = true;
      h.leaseEnd.reset();
      found = true;
    }
  }
  if (released) notifyReleased();
  return found;
}

void ResourceLedger::release(const std::string& key) {
  bool released = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const size_t before = holdings_.size();
    holdings_.erase(std::remove_if(holdings_.begin(), holdings_.end(),
                                   [&](const Holding& h) { return h.key == key; }),
                    holdings_.end());
    released = dropExpiredLocked(now_()) || holdings_.size() != before;
  }
  if (released) notifyReleased();
}

std::vector<Holding> ResourceLedger::holdings() const {
  std::lock_guard<std::mutex> lock(mutex_);
  const TimePoint now = now_();
  std::vector<Holding> out;
  for (const Holding& h : holdings_) {
    if (!expired(h, now)) out.push_back(h);
  }
  return out;
}

}  // namespace hvd::agent::ledger
