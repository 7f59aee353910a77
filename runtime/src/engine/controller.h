// Negotiation without a coordinator. Every rank keeps an identical replica of the negotiation
// state — the table of requests that are not ready yet (name -> each rank's request), the
// response cache and the join state — and changes it only with data every rank has: the
// MIN-reduced bit vector and the allgathered batches of new requests, applied in rank order.
// So every rank reaches the same responses, in the same order, with no extra round trip.
//
// A cycle, as the engine drives it:
//   1. makeBits(): one byte per cache slot (1 = "I have a pending op that hits this slot", or
//      "I have joined": a joined rank never holds an op back), then inverted flag bytes whose
//      MIN is a logical OR across ranks: someone has uncached requests, someone asks to shut
//      down, rank 0 asks for a stall shutdown, and one byte per rank: "rank r has joined".
//   2. applyBits(MIN over ranks): the joined set, the cached ops that are ready everywhere.
//   3. if someone had uncached requests: applyRequests(every rank's batch).
//   4. takeResponses(): cached-ready ops in slot order, then ops that became ready in the
//      table, in the order they became ready. Members of a grouped allreduce are held back
//      until the whole group is ready and then come out together.
//   5. after running a response: recordSuccess() (the response cache learns it).
// Flags are also how autotune's decision travels: rank 0 raises `retune`, and in that cycle the
// engine broadcasts the new parameters, which every rank applies at the cycle's end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/request.h"
#include "engine/response_cache.h"
#include "engine/stall.h"

namespace hvd::engine {

struct Response {
  enum class Kind { kRun, kError };
  Kind kind = Kind::kRun;
  // The agreed metadata (for allgather/alltoall: the first participating rank's request).
  Request request;
  // allgather/alltoall: every rank's request, indexed by rank (per-rank dimension 0 / splits).
  std::vector<Request> perRank;
  std::string error;       // kError: the message every rank's handle gets
  int64_t cacheSlot = -1;  // >= 0: ran from the response cache
};

struct BitFlags {
  bool uncached = false;       // this rank has requests to send
  bool stop = false;           // this rank's engine is shutting down
  bool stallShutdown = false;  // rank 0: a stall passed the shutdown time
  bool retune = false;         // rank 0: autotune broadcasts new parameters in this cycle
  bool joined = false;         // this rank has joined
};

class Controller {
 public:
  // `jobRanks`: for a process set, the job rank of each of its ranks, so that every message
  // names job ranks; `scope` ("process set 1 (ranks 0,1)") ends each error message. Empty: the
  // job itself.
  Controller(int rank, int size, size_t cacheCapacity, std::vector<int> jobRanks = {},
             std::string scope = "");

  int rank() const { return rank_; }
  int size() const { return size_; }
  const ResponseCache& cache() const { return cache_; }

  // Step 1. `hitSlots`: cache slots this rank's pending ops hit.
  std::vector<uint8_t> makeBits(const std::vector<size_t>& hitSlots, const BitFlags& flags) const;

  // Step 2. `reduced`: the MIN over ranks of makeBits(). Returns the OR of every rank's flags
  // (`joined`: every rank has joined).
  BitFlags applyBits(const std::vector<uint8_t>& reduced);

  // Step 3. batches[r]: the new requests rank r sent this cycle. `now` stamps new table entries.
  // Throws hvd::InternalError on a protocol violation (a rank sending a name twice).
  void applyRequests(const std::vector<std::vector<Request>>& batches, Clock::time_point now);

  // Step 4.
  std::vector<Response> takeResponses();

  // Step 5: `response` ran successfully on every rank (the caller calls it in response order).
  void recordSuccess(const Response& response);

  // Autotune turning the response cache on (capacity > 0) or off (0), on every rank after the
  // same cycle: the cache starts empty, so pending ops are sent as requests again. Between
  // cycles only.
  void setCacheCapacity(size_t capacity);

  // Join state, as of the last applyBits().
  const std::vector<bool>& joined() const { return joined_; }
  bool anyJoined() const;
  bool allJoined() const;
  // The rank that joined last (the highest of those that joined in the same cycle); -1 if none.
  int lastJoined() const { return lastJoined_; }
  // Every rank has joined and join() returned: a new epoch starts.
  void resetJoin();

  // Entries some ranks submitted and others did not, in table order (for stall checks), with
  // the missing ranks named by job rank.
  std::vector<WaitingOp> waitingOps() const;

 private:
  struct Entry {
    std::vector<std::optional<Request>> perRank;
    uint64_t sequence = 0;
    Clock::time_point firstSeen;
  };

  bool ready(const Entry& entry) const;
  void markReady(const std::string& name);
  Response responseFor(const std::string& name, Entry& entry) const;
  std::string joinedError(const Request& request) const;
  void emit(Response response, std::vector<Response>& out);

  int jobRank(int r) const { return jobRanks_.empty() ? r : jobRanks_[r]; }

  int rank_;
  int size_;
  std::vector<int> jobRanks_;
  std::string scope_;
  ResponseCache cache_;
  std::map<std::string, Entry> table_;
  uint64_t nextSequence_ = 0;
  std::vector<std::string> readyNames_;  // table entries ready, in the order they became ready
  std::vector<size_t> readySlots_;       // cache slots ready this cycle, ascending
  std::map<uint64_t, std::vector<Response>> heldGroups_;  // group id -> members ready so far
  std::vector<bool> joined_;
  int lastJoined_ = -1;
};

}  // namespace hvd::engine
