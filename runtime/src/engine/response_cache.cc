#include "engine/response_cache.h"

namespace hvd::engine {

std::optional<size_t> ResponseCache::lookup(const Request& request) const {
  auto it = bySlotName_.find(request.name);
  if (it == bySlotName_.end()) return std::nullopt;
  if (!sameMetadata(slots_[it->second].request, request)) return std::nullopt;
  return it->second;
}

std::optional<size_t> ResponseCache::slotOf(const std::string& name) const {
  auto it = bySlotName_.find(name);
  if (it == bySlotName_.end()) return std::nullopt;
  return it->second;
}

const Request* ResponseCache::at(size_t slot) const {
  if (slot >= slots_.size() || !slots_[slot].used) return nullptr;
  return &slots_[slot].request;
}

void ResponseCache::put(const Request& request) {
  if (capacity_ == 0) return;
  if (auto it = bySlotName_.find(request.name); it != bySlotName_.end()) {
    Slot& slot = slots_[it->second];
    slot.request = request;
    slot.lastUse = ++clock_;
    return;
  }
  size_t index = slots_.size();
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (!slots_[i].used) {
      index = i;
      break;
    }
  }
  if (index == slots_.size()) {
    if (slots_.size() < capacity_) {
      slots_.emplace_back();
    } else {
      // Full: evict the least recently used entry (ties cannot happen: every use ticks).
      index = 0;
      for (size_t i = 1; i < slots_.size(); ++i) {
        if (slots_[i].lastUse < slots_[index].lastUse) index = i;
      }
      bySlotName_.erase(slots_[index].request.name);
    }
  }
  Slot& slot = slots_[index];
  slot.used = true;
  slot.request = request;
  slot.lastUse = ++clock_;
  bySlotName_[request.name] = index;
}

void ResponseCache::touch(size_t slot) {
  if (slot < slots_.size() && slots_[slot].used) slots_[slot].lastUse = ++clock_;
}

void ResponseCache::erase(const std::string& name) {
  auto it = bySlotName_.find(name);
  if (it == bySlotName_.end()) return;
  slots_[it->second].used = false;
  slots_[it->second].request = Request{};
  bySlotName_.erase(it);
}

}  // namespace hvd::engine
