#include "transport/context.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <set>

#include "hvd/error.hpp"
#include "transport/progress.h"

namespace hvd::transport {

uint8_t* Workspace::grow(int slot, size_t bytes) {
  if (static_cast<size_t>(slot) >= buffers_.size()) buffers_.resize(slot + 1);
  Buffer& buffer = buffers_[slot];
  if (buffer.bytes < bytes) {
    // Round up so a slowly growing message size does not reallocate every call.
    size_t grown = 4096;
    while (grown < bytes) grown *= 2;
    void* memory = std::aligned_alloc(64, grown);
    if (memory == nullptr) throw std::bad_alloc();
    std::memset(memory, 0, grown);  // first touch here, once, not inside a timed collective
    buffer.data =
        std::unique_ptr<uint8_t, void (*)(void*)>(static_cast<uint8_t*>(memory), std::free);
    buffer.bytes = grown;
  }
  return buffer.data.get();
}

Context::Context(int rank, int size, std::vector<std::unique_ptr<Link>> links,
                 ContextOptions options, std::unique_ptr<LinkSource> source)
    : rank_(rank),
      size_(size),
      links_(std::move(links)),
      source_(std::move(source)),
      options_(options),
      schedule_(std::make_unique<Schedule>()) {
  if (size_ < 1 || rank_ < 0 || rank_ >= size_) {
    throw InvalidArgumentError("bad communicator: rank " + std::to_string(rank_) + " of size " +
                               std::to_string(size_));
  }
  if (static_cast<int>(links_.size()) != size_) {
    throw InternalError("context needs one link slot per rank");
  }
  tcpPeer_.assign(size_, false);
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_ && links_[peer] == nullptr && source_ == nullptr) {
      throw InternalError("context has no link to rank " + std::to_string(peer));
    }
    if (links_[peer] != nullptr) tcpPeer_[peer] = std::string(links_[peer]->kind()) == "tcp";
    hasTcp_ = hasTcp_ || tcpPeer_[peer];
  }
  if (source_ != nullptr) hasTcp_ = hasTcp_ || source_->kinds().tcp;
}

void Context::openLinks(const std::vector<int>& peers, const char* what) {
  if (source_ == nullptr) throw InternalError(std::string(what) + ": a link is missing");
  source_->open(peers, links_, options_.timeout, what);
  for (int peer : peers) tcpPeer_[peer] = std::string(links_[peer]->kind()) == "tcp";
}

int Context::openLinkCount() const {
  int count = 0;
  for (const auto& link : links_) count += link != nullptr ? 1 : 0;
  return count;
}

Context::~Context() = default;

Link& Context::link(int peer) { return *links_[peer]; }

std::string Context::describeTransports() const {
  std::set<std::string> kinds;
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_ && links_[peer] != nullptr) kinds.insert(links_[peer]->kind());
  }
  if (source_ != nullptr) {
    const LinkKinds later = source_->kinds();
    if (later.shm) kinds.insert("shm");
    if (later.tcp) kinds.insert("tcp");
  }
  if (kinds.empty()) return "self";
  std::string out;
  for (auto it = kinds.rbegin(); it != kinds.rend(); ++it) {
    if (!out.empty()) out += "+";
    out += *it;
  }
  return out;
}

void Context::checkUsable() const {
  if (!brokenReason_.empty()) {
    throw PeerError("hvd cannot run collectives after an earlier failure: " + brokenReason_);
  }
}

void Context::markBroken(const std::string& reason) {
  if (brokenReason_.empty()) brokenReason_ = reason;
  for (auto& link : links_) {
    if (link) link->abort();
  }
}

}  // namespace hvd::transport
