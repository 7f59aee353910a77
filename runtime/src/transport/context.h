// A Context is one rank's view of a communicator: its rank and size, a Link to every peer, the
// tuning knobs every collective reads, and reusable scratch memory (so no collective allocates
// or first-touches memory on the hot path once buffers have grown to the working size).
//
// After a collective fails (peer error, timeout) the context is "broken": every link has been
// aborted so peers fail fast too, and further collectives throw the original error's message.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hvd/error.hpp"
#include "transport/link.h"
#include "transport/link_source.h"

namespace hvd::transport {

class Schedule;

// Where a rank that abandons a collective leaves the reason, so that ranks which only see the
// connection drop can report the root cause (a stopped peer is a timeout everywhere, not a
// "connection lost" on all but one rank). The runtime backs it with the job's store.
class FailureBoard {
 public:
  virtual ~FailureBoard() = default;
  // Records the first failure of the job (later ones are ignored). Must not throw.
  virtual void publish(ErrorKind kind, const std::string& message) noexcept = 0;
  // Returns true and fills the outputs when some rank has published a failure.
  virtual bool lookup(ErrorKind* kind, std::string* message) noexcept = 0;
};

struct ContextOptions {
  // A collective that makes no progress for this long fails with TimeoutError.
  std::chrono::milliseconds timeout{60000};
  // Waiting has three phases. First a rank polls its links for `spin` (a peer on another core
  // answers within microseconds). Then, until `yield` has passed, it calls sched_yield(2)
  // between polls: with more ranks than cores (np 4 on 2 cores) the peer it waits for is often
  // runnable on this very core, and yielding hands it the CPU at once instead of after a
  // sleep and a wake-up. Finally it blocks in poll(2), so a long wait costs no CPU.
  std::chrono::microseconds spin{50};
  std::chrono::microseconds yield{2000};
  // Messages up to this many bytes use the latency-optimised (direct) algorithms: one round
  // instead of 2(n-1). Over TCP a round costs ~10 us of loopback or network latency, so the
  // crossover sits much higher than over shared memory (measured with hvd-bench, np 2 and 4).
  size_t smallMessageBytes = 8 << 10;
  size_t smallMessageBytesTcp = 128 << 10;
  // Largest piece moved per link per progress pass: keeps the pipeline stages in cache and
  // interleaves sending to the next rank with receiving from the previous one.
  size_t pieceBytes = 256 << 10;
  // TCP pieces are larger: each costs a system call, and 1 MiB writes carry about twice the
  // loopback bandwidth of 128 KiB ones.
  size_t pieceBytesTcp = 1 << 20;
  // Up to this many ranks every rank talks to every other: the mesh connects all pairs at init
  // and each collective starts with a descriptor from every rank to every rank (the direct
  // algorithms carry their data in it). Beyond it, links open on first use and the collectives
  // agree, and move small messages, in ceil(log2 n) rounds through 2 ceil(log2 n) peers
  // (collectives/gathered.h), so set-up and a barrier grow with n log n instead of n^2. Must be
  // the same on every rank.
  int fullMeshRanks = 64;
};

// Grow-only, 64-byte aligned scratch buffers, indexed by slot.
class Workspace {
 public:
  // Inline fast path: a slot that is already large enough costs a bounds check and a load.
  uint8_t* get(int slot, size_t bytes) {
    if (static_cast<size_t>(slot) < buffers_.size() && buffers_[slot].bytes >= bytes) {
      return buffers_[slot].data.get();
    }
    return grow(slot, bytes);
  }

 private:
  uint8_t* grow(int slot, size_t bytes);

  struct Buffer {
    std::unique_ptr<uint8_t, void (*)(void*)> data{nullptr, nullptr};
    size_t bytes = 0;
  };
  std::vector<Buffer> buffers_;
};

class Context {
 public:
  // links[peer] must be set for every peer != rank (links[rank] is null), unless `source` is
  // given: then missing links open on first use (openLinks).
  Context(int rank, int size, std::vector<std::unique_ptr<Link>> links, ContextOptions options,
          std::unique_ptr<LinkSource> source = nullptr);
  ~Context();

  int rank() const { return rank_; }
  int size() const { return size_; }
  const ContextOptions& options() const { return options_; }
  ContextOptions& mutableOptions() { return options_; }

  Link& link(int peer);
  // Null while the link to `peer` is not open yet (only with a LinkSource).
  Link* linkIfOpen(int peer) { return links_[peer].get(); }
  bool opensOnDemand() const { return source_ != nullptr; }
  // Opens the links to `peers` (distinct, not open) through the source; `what` names the
  // collective in a timeout's message.
  void openLinks(const std::vector<int>& peers, const char* what);
  // How many links are open now (for tests and logs).
  int openLinkCount() const;
  Workspace& workspace() { return workspace_; }
  // The schedule collectives fill and run; kept so its capacity is reused call after call.
  Schedule& schedule() { return *schedule_; }

  // Whether every rank talks to every other (ContextOptions::fullMeshRanks).
  bool fullMesh() const { return size_ <= options_.fullMeshRanks; }

  // The direct/ring crossover for this context: the TCP one if any link is TCP.
  size_t smallMessageThreshold() const {
    return hasTcp_ ? options_.smallMessageBytesTcp : options_.smallMessageBytes;
  }
  // Largest piece moved per progress pass on the link to `peer` (by its transport).
  size_t pieceBytes(int peer) const {
    return tcpPeer_[peer] ? options_.pieceBytesTcp : options_.pieceBytes;
  }

  // "shm+tcp", "tcp", "shm" or "self": the kinds of the links to every peer (open or not).
  std::string describeTransports() const;

  // Throws if a previous collective broke the context.
  void checkUsable() const;
  // Records the failure and aborts every link so that peers fail promptly as well.
  void markBroken(const std::string& reason);
  bool broken() const { return !brokenReason_.empty(); }

  // Optional; not owned. Set by the runtime before the first collective.
  void setFailureBoard(FailureBoard* board) { failureBoard_ = board; }
  FailureBoard* failureBoard() const { return failureBoard_; }

 private:
  int rank_;
  int size_;
  std::vector<std::unique_ptr<Link>> links_;
  std::unique_ptr<LinkSource> source_;
  ContextOptions options_;
  Workspace workspace_;
  std::unique_ptr<Schedule> schedule_;

  std::string brokenReason_;
  FailureBoard* failureBoard_ = nullptr;
  std::vector<bool> tcpPeer_;  // per peer: is its link TCP (set as it opens)
  bool hasTcp_ = false;
};

}  // namespace hvd::transport
