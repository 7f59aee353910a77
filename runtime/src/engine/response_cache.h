// The response cache (Horovod's ResponseCache): ops that ran before with the same name and
// metadata get a slot, and from then on a rank announces such an op with one byte in the
// negotiation's bit vector instead of sending its request. Every change to the cache is driven
// by the replicated negotiation (the same responses and requests, in the same order, on every
// rank), so slot numbers are identical on every rank without any exchange.
//
// Slots are reused lowest-free-first; when full, the least recently used entry is evicted.
// Capacity 0 disables the cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/request.h"

namespace hvd::engine {

class ResponseCache {
 public:
  explicit ResponseCache(size_t capacity) : capacity_(capacity) {}

  size_t capacity() const { return capacity_; }
  // Slot indices in use so far (occupied or freed): the length of the bit vector. Never exceeds
  // capacity(); identical on every rank.
  size_t slotCount() const { return slots_.size(); }
  size_t size() const { return bySlotName_.size(); }

  // The slot holding `request`'s name with identical metadata, if any.
  std::optional<size_t> lookup(const Request& request) const;
  // The slot holding `name` (whatever its metadata), if any.
  std::optional<size_t> slotOf(const std::string& name) const;
  // The entry in `slot`, or null for a free slot.
  const Request* at(size_t slot) const;

  // Records that `request` ran: refreshes its entry (same name: replaced) or inserts it,
  // evicting the least recently used entry when full. No-op at capacity 0.
  void put(const Request& request);
  // Marks a slot as just used (a cached op ran).
  void touch(size_t slot);
  // Removes the entry of `name` (its metadata changed on some rank).
  void erase(const std::string& name);

 private:
  struct Slot {
    bool used = false;
    Request request;
    uint64_t lastUse = 0;
  };
  size_t capacity_;
  uint64_t clock_ = 0;
  std::vector<Slot> slots_;
  std::map<std::string, size_t> bySlotName_;
};

}  // namespace hvd::engine
