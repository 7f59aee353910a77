#include "engine/controller.h"

#include <algorithm>

#include "engine/mismatch.h"
#include "hvd/error.hpp"

namespace hvd::engine {
namespace {

// Flag bytes after the cache slots; then one "joined" byte per rank.
constexpr size_t kUncachedFlag = 0;
constexpr size_t kStopFlag = 1;
constexpr size_t kStallFlag = 2;
constexpr size_t kRetuneFlag = 3;
constexpr size_t kFlagBytes = 4;

}  // namespace

Controller::Controller(int rank, int size, size_t cacheCapacity, std::vector<int> jobRanks,
                       std::string scope)
    : rank_(rank),
      size_(size),
      jobRanks_(std::move(jobRanks)),
      scope_(std::move(scope)),
      cache_(cacheCapacity),
      joined_(size, false) {}

std::vector<uint8_t> Controller::makeBits(const std::vector<size_t>& hitSlots,
                                          const BitFlags& flags) const {
  const size_t slots = cache_.slotCount();
  std::vector<uint8_t> bits(slots + kFlagBytes + size_, 1);
  // Slot bytes: 1 = ready here. A joined rank marks every slot ready (it holds nothing back).
  if (!flags.joined) std::fill(bits.begin(), bits.begin() + slots, 0);
  for (size_t slot : hitSlots) bits.at(slot) = 1;
  // Flags are inverted so that MIN is a logical OR.
  bits[slots + kUncachedFlag] = flags.uncached ? 0 : 1;
  bits[slots + kStopFlag] = flags.stop ? 0 : 1;
  bits[slots + kStallFlag] = flags.stallShutdown ? 0 : 1;
  bits[slots + kRetuneFlag] = flags.retune ? 0 : 1;
  bits[slots + kFlagBytes + rank_] = flags.joined ? 0 : 1;
  return bits;
}

BitFlags Controller::applyBits(const std::vector<uint8_t>& reduced) {
  const size_t slots = cache_.slotCount();
  if (reduced.size() != slots + kFlagBytes + size_) {
    throw InternalError("engine: negotiation bit vector has " + std::to_string(reduced.size()) +
                        " bytes, expected " + std::to_string(slots + kFlagBytes + size_));
  }
  BitFlags any;
  any.uncached = reduced[slots + kUncachedFlag] == 0;
  any.stop = reduced[slots + kStopFlag] == 0;
  any.stallShutdown = reduced[slots + kStallFlag] == 0;
  any.retune = reduced[slots + kRetuneFlag] == 0;
  bool changed = false;
  int newest = -1;
  for (int r = 0; r < size_; ++r) {
    const bool joined = reduced[slots + kFlagBytes + r] == 0;
    if (joined && !joined_[r]) newest = r;  // ascending: ends at the highest new joiner
    changed = changed || joined != joined_[r];
    joined_[r] = joined;
  }
  if (newest >= 0) lastJoined_ = newest;
  any.joined = allJoined();
  if (changed) {
    // Entries waiting only on ranks that joined are ready now: scan in table order.
    std::vector<std::pair<uint64_t, std::string>> order;
    for (const auto& [name, entry] : table_) order.emplace_back(entry.sequence, name);
    std::sort(order.begin(), order.end());
    for (const auto& item : order) markReady(item.second);
  }
  if (!any.joined) {
    for (size_t slot = 0; slot < slots; ++slot) {
      if (reduced[slot] == 1 && cache_.at(slot) != nullptr) readySlots_.push_back(slot);
    }
  }
  return any;
}

void Controller::setCacheCapacity(size_t capacity) {
  cache_ = ResponseCache(capacity);
  readySlots_.clear();
  // Held group members that came from the old cache are recorded into the new one as new.
  for (auto& [group, members] : heldGroups_) {
    for (Response& member : members) member.cacheSlot = -1;
  }
}

void Controller::applyRequests(const std::vector<std::vector<Request>>& batches,
                               Clock::time_point now) {
  for (size_t r = 0; r < batches.size(); ++r) {
    for (const Request& request : batches[r]) {
      // A request for a cached name means its metadata changed on that rank (or the entry was
      // evicted there first: impossible, evictions are replicated). Forget the entry everywhere;
      // ranks waiting on its bit resend their requests next cycle.
      if (cache_.slotOf(request.name)) {
        // Keep a cached op that is ready this very cycle: its response is built from the slot.
        const size_t slot = *cache_.slotOf(request.name);
        const bool readyNow =
            std::find(readySlots_.begin(), readySlots_.end(), slot) != readySlots_.end();
        if (!readyNow) cache_.erase(request.name);
      }
      auto [it, inserted] = table_.try_emplace(request.name);
      Entry& entry = it->second;
      if (inserted) {
        entry.perRank.resize(size_);
        entry.sequence = nextSequence_++;
        entry.firstSeen = now;
      }
      if (entry.perRank[r]) {
        throw InternalError("engine: rank " + std::to_string(r) + " sent '" + request.name +
                            "' twice in negotiation");
      }
      entry.perRank[r] = request;
      markReady(request.name);
    }
  }
}

bool Controller::ready(const Entry& entry) const {
  for (int r = 0; r < size_; ++r) {
    if (!joined_[r] && !entry.perRank[r]) return false;
  }
  return true;
}

void Controller::markReady(const std::string& name) {
  auto it = table_.find(name);
  if (it == table_.end() || !ready(it->second)) return;
  if (std::find(readyNames_.begin(), readyNames_.end(), name) == readyNames_.end()) {
    readyNames_.push_back(name);
  }
}

std::string Controller::joinedError(const Request& request) const {
  std::vector<int> ranks;
  for (int r = 0; r < size_; ++r) {
    if (joined_[r]) ranks.push_back(jobRank(r));
  }
  return std::string(opTypeName(request.type)) + " '" + request.name + "': cannot run while " +
         describeRanks(ranks) + (ranks.size() == 1 ? " has" : " have") +
         " joined (hvd::join): only allreduce takes part with joined ranks";
}

bool Controller::anyJoined() const {
  return std::find(joined_.begin(), joined_.end(), true) != joined_.end();
}

bool Controller::allJoined() const {
  return std::find(joined_.begin(), joined_.end(), false) == joined_.end();
}

void Controller::resetJoin() {
  std::fill(joined_.begin(), joined_.end(), false);
  lastJoined_ = -1;
}

Response Controller::responseFor(const std::string& name, Entry& entry) const {
  Response response;
  std::vector<const Request*> present(size_, nullptr);
  for (int r = 0; r < size_; ++r) {
    if (entry.perRank[r]) present[r] = &*entry.perRank[r];
  }
  const Request* first =
      *std::find_if(present.begin(), present.end(), [](const Request* r) { return r != nullptr; });
  response.request = *first;
  response.error = checkAgreement(present, jobRanks_);
  const OpType type = first->type;
  if (response.error.empty() && anyJoined() && type != OpType::kAllreduce &&
      type != OpType::kBarrier) {
    response.error = joinedError(*first);
  }
  if (!response.error.empty()) {
    response.kind = Response::Kind::kError;
    if (!scope_.empty()) response.error += " (" + scope_ + ")";
    return response;
  }
  if (type == OpType::kAllgather || type == OpType::kAlltoall) {
    for (int r = 0; r < size_; ++r) response.perRank.push_back(*entry.perRank[r]);
  }
  (void)name;
  return response;
}

void Controller::emit(Response response, std::vector<Response>& out) {
  if (response.request.groupSize <= 0) {
    out.push_back(std::move(response));
    return;
  }
  auto& members = heldGroups_[response.request.groupId];
  members.push_back(std::move(response));
  if (static_cast<int32_t>(members.size()) < members.front().request.groupSize) return;
  for (auto& member : members) out.push_back(std::move(member));
  heldGroups_.erase(out.back().request.groupId);
}

std::vector<Response> Controller::takeResponses() {
  std::vector<Response> out;
  for (size_t slot : readySlots_) {
    Response response;
    response.request = *cache_.at(slot);
    response.cacheSlot = static_cast<int64_t>(slot);
    if (anyJoined() && response.request.type != OpType::kAllreduce) {
      response.kind = Response::Kind::kError;
      response.error = joinedError(response.request);
    }
    // A joined rank may also have sent this name as a request this cycle: the op runs now, so
    // that entry is done with.
    const std::string& name = response.request.name;
    if (table_.erase(name) > 0) {
      readyNames_.erase(std::remove(readyNames_.begin(), readyNames_.end(), name),
                        readyNames_.end());
    }
    emit(std::move(response), out);
  }
  readySlots_.clear();
  for (const std::string& name : readyNames_) {
    auto it = table_.find(name);
    if (it == table_.end()) continue;
    Response response = responseFor(name, it->second);
    table_.erase(it);
    emit(std::move(response), out);
  }
  readyNames_.clear();
  return out;
}

void Controller::recordSuccess(const Response& response) {
  if (response.kind != Response::Kind::kRun) return;
  if (response.cacheSlot >= 0) {
    cache_.touch(static_cast<size_t>(response.cacheSlot));
  } else if (cacheable(response.request)) {
    cache_.put(response.request);
  }
}

std::vector<WaitingOp> Controller::waitingOps() const {
  std::vector<std::pair<uint64_t, WaitingOp>> order;
  for (const auto& [name, entry] : table_) {
    WaitingOp op;
    op.name = name;
    op.firstSeen = entry.firstSeen;
    for (int r = 0; r < size_; ++r) {
      if (!joined_[r] && !entry.perRank[r]) op.missingRanks.push_back(jobRank(r));
    }
    if (!op.missingRanks.empty()) order.emplace_back(entry.sequence, std::move(op));
  }
  std::sort(order.begin(), order.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<WaitingOp> out;
  for (auto& item : order) out.push_back(std::move(item.second));
  return out;
}

}  // namespace hvd::engine
