// The progress engine: every collective describes its communication as a Schedule of send and
// receive operations and hands it to run(), the one place that waits.
//
//  * Operations on the same link and direction run in the order they were added (a link is a
//    byte stream); operations on different links run concurrently, so a ring rank sends to its
//    next peer while it receives from its previous one and no cycle of full buffers deadlocks.
//  * A send may depend on a receive: it may then only send as many bytes as that receive has
//    consumed so far. This pipelines a ring across its steps at piece granularity: the chunk a
//    rank forwards at step g+1 is the chunk it is still receiving and reducing at step g.
//  * Waiting: poll the links for `spin`, then prepare to sleep, re-check, and block in poll(2)
//    on the links' descriptors. No progress for `timeout` is a TimeoutError naming the peers
//    waited on; a peer whose end closed while we still need it is a PeerError naming it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "hvd/types.hpp"
#include "transport/context.h"
#include "transport/link.h"

namespace hvd::transport {

// What a receive does with its bytes: copy them to dst, reduce them into dst (dst op= bytes),
// reduce them with src into dst (dst = src op bytes), or discard them. Optionally divides the
// result by `averageDivisor` (the final step of an average).
struct RecvAction final : RecvSink {
  enum class Kind { kCopy, kReduceInto, kReduceTo, kDiscard };
  Kind kind = Kind::kCopy;
  uint8_t* dst = nullptr;
  const uint8_t* src = nullptr;
  ReduceOp op = ReduceOp::kSum;
  DataType type = DataType::kUInt8;
  int averageDivisor = 0;
  // False when the result at dst is only needed to be forwarded (a ring's intermediate partial
  // sums): if the progress engine forwards a piece straight from the reduction, dst is skipped.
  bool resultNeeded = true;
  // The result is final and not read again during the collective: store it with streaming
  // (non-temporal) stores, skipping the read-for-ownership of each destination line. For
  // results larger than the caches only.
  bool streaming = false;

  void consume(const uint8_t* data, size_t offset, size_t bytes) override;
  uint8_t* directTarget(size_t offset) override {
    return kind == Kind::kCopy && !streaming ? dst + offset : nullptr;
  }
};

struct ProgressScratch;

class Schedule {
 public:
  Schedule();
  ~Schedule();

  struct Send {
    int peer;
    const uint8_t* data;
    size_t bytes;
    int afterRecv;  // index of the receive this send is limited by, or -1
    size_t done;
  };
  struct Recv {
    int peer;
    size_t bytes;
    size_t align;
    RecvAction action;
    size_t done;
    int forwardedBy;  // the send that forwards exactly this receive's result, or -1
    // recvFramed: `bytes` covers the header and the planned body until the header arrived;
    // then it is the header and the announced body (whose bytes are discarded when that is not
    // the planned length). Both travel in the one operation.
    uint8_t* header;       // where the header goes, or null for a plain receive
    uint32_t headerBytes;  // a multiple of 8; its first 8 bytes are the body's length
    bool headerSeen;       // the announced length has been read and `bytes` set from it
    // recvFramed with an expected header: compared where the link lets us read it in place;
    // when it is byte for byte `expected`, *matched is set to 1, *matches counts it, and
    // `header` is not written.
    const uint8_t* expected;
    uint8_t* matched;
    uint32_t* matches;
  };

  void clear();
  // `forwards`: the send transmits exactly the bytes receive `afterRecv` leaves at its
  // destination (same region, same size), so the engine may fuse the two (see progress.cc).
  int send(int peer, const void* data, size_t bytes, int afterRecv = -1, bool forwards = false);
  int recv(int peer, size_t bytes, size_t align, const RecvAction& action);
  // A framed message, one receive operation: a header of `headerBytes` (a multiple of 8) copied
  // to `header`, whose first 8 bytes are the length of the body the sender sends right after
  // it. When that length is `bodyBytes` the body runs `body`; any other length is received and
  // discarded, so a peer that disagrees about the size leaves nothing in the stream and is
  // never waited for beyond what it sent. Where the link can peek (shared memory), the engine
  // reads the length in place: a small message that has fully arrived is read where it lies
  // and consumed with commitRecv, any other takes header and body with one tryRecv. The
  // caller checks the header afterwards. With `expected` (headerBytes bytes, read when the
  // operation runs), a header that equals it and is read in place sets *matched to 1 and adds
  // 1 to *matches instead of being copied to `header` (the caller's common case, checked
  // without a copy; the count lets it test all its receives at once); otherwise both are left
  // alone and the header is at `header`. Returns the receive's index.
  int recvFramed(int peer, void* header, size_t headerBytes, size_t bodyBytes, size_t align,
                 const RecvAction& body, const void* expected = nullptr, uint8_t* matched = nullptr,
                 uint32_t* matches = nullptr);

  std::vector<Send>& sends() { return sends_; }
  std::vector<Recv>& recvs() { return recvs_; }
  ProgressScratch& scratch() { return *scratch_; }

 private:
  std::vector<Send> sends_;
  std::vector<Recv> recvs_;
  std::unique_ptr<ProgressScratch> scratch_;  // the progress engine's reusable state
};

// Runs every operation of `schedule` to completion. `opName` ("allreduce") is used in errors.
// On any error the context is marked broken (all links aborted) before the error propagates.
void run(Context& context, Schedule& schedule, const char* opName);

}  // namespace hvd::transport
