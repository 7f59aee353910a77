// Cross-rank agreement of the blocking collectives: which collective, type, op, root, counts
// and algorithm each rank is about to run, checked on every rank before any result is used.
//
// Protocol (every collective of collectives.h, on every rank, 1 < size <= fullMeshRanks; beyond
// that, collectives/gathered.h):
//  * The collective starts with one framed message from every rank to every other rank: a
//    Descriptor whose first field is the number of payload bytes that follow it on that link.
//    The direct (latency) algorithms carry their data as that payload, so the check costs no
//    extra round; the ring and chain algorithms send descriptors alone, check them, and only
//    then move data (a separate round, small next to a large message).
//  * A receiver takes a payload into its destination only when the announced length is the one
//    it planned; any other length is read and discarded (progress.h, recvFramed). So a peer
//    that disagrees never leaves bytes in the stream and never makes anyone wait for bytes that
//    do not come, whatever algorithm each side picked.
//  * After the exchange every rank holds every rank's descriptor and runs the same check on the
//    same inputs: a mismatch is the same InvalidArgumentError on every rank, naming the field
//    and each rank's value, and the context stays usable for the next (matching) collective.
//  * A rank whose own arguments are invalid still takes part, with kInvalid set, so its peers
//    fail with it instead of waiting for it.
//  * Per-rank vectors (allgather's counts, alltoall's send and receive counts) travel as
//    weighted checksums with odd weights: any single differing entry is always detected, several
//    compensating ones only with probability 1 - 2^-64. The alltoall receiver also compares
//    each peer's announced count with its own recvCounts exactly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "hvd/hvd.hpp"
#include "hvd/types.hpp"
#include "transport/context.h"
#include "transport/progress.h"

namespace hvd::coll {

enum class CollectiveKind : uint8_t {
  kAllreduce = 1,
  kAllgather,
  kBroadcast,
  kReducescatter,
  kAlltoall,
  kBarrier,
};

// 56 bytes, no padding: compared and sent as raw bytes (the fields alltoall needs, nothing
// more; a multiple of 8 so the body behind it stays aligned).
struct Descriptor {
  uint64_t payloadBytes = 0;  // first: read by the progress engine (recvFramed)
  uint32_t magic = 0;         // kDescriptorMagic; anything else means the stream is out of step
  uint8_t kind = 0;           // CollectiveKind
  uint8_t type = 0;           // DataType
  uint8_t op = 0;             // ReduceOp (allreduce, reducescatter)
  uint8_t algorithm = 0;      // the algorithm this rank resolved: 1 direct, 2 ring, 3 adasum
  int32_t root = 0;           // broadcast
  uint32_t flags = 0;         // kInvalid
  uint64_t count = 0;         // elements: the call's, or this rank's own (allgather, alltoall)
  uint64_t extra = 0;         // reducescatter rowElements; allgather / alltoall counts checksum
  uint64_t extra2 = 0;        // alltoall recvCounts checksum
  uint64_t linkCount = 0;     // alltoall: elements this message's sender sends its receiver
};
static_assert(sizeof(Descriptor) == 56, "Descriptor is a wire format");

inline constexpr uint32_t kDescriptorMagic = 0x68766431;  // "hvd1"
inline constexpr uint32_t kInvalid = 1;
inline constexpr uint8_t kAlgorithmDirect = 1;
inline constexpr uint8_t kAlgorithmRing = 2;
// Adasum's fold and vector halving (adasum.h): its own algorithm, whatever the size.
inline constexpr uint8_t kAlgorithmAdasum = 3;

// Inline: it is on every collective's path.
inline Descriptor describe(CollectiveKind kind, DataType type, size_t count) {
  Descriptor d;
  d.magic = kDescriptorMagic;
  d.kind = static_cast<uint8_t>(kind);
  d.type = static_cast<uint8_t>(type);
  d.count = count;
  return d;
}

// The weights of the counts checksums: odd, so a single differing entry changes the sum.
uint64_t countWeight(uint64_t from, uint64_t to);
// Sum over p of counts[p] * countWeight(p, 0): allgather's digest of its counts vector.
uint64_t countsChecksum(const std::vector<size_t>& counts);

// Runs `validate`; returns its InvalidArgumentError message, or "" when it passed.
template <typename Validate>
std::string localError(Validate&& validate) {
  try {
    validate();
    return {};
  } catch (const InvalidArgumentError& error) {
    return error.what();
  }
}

// The descriptors of one collective, in the context's workspace: sent[p] is the message to
// peer p (its descriptor, then room for a small payload packed behind it), received[p] the
// descriptor from p, matched[p] set when the progress engine found p's descriptor, in place,
// to be exactly sent[p] (and so did not copy it to received[p]).
class Framing {
 public:
  // Inline, like send, recv and check's common case: they are the whole cost of the check on
  // the direct (latency) path, where a call and its prologue are a visible share.
  // `mine` must outlive the Framing (it is copied into each message by send). Every peer
  // gets exactly one send and one recv (each writes that peer's entries).
  Framing(transport::Context& ctx, const Descriptor& mine)
      : ctx_(ctx), mine_(mine), kind_(mine.kind) {
    const int n = ctx.size();
    // One workspace slot: the messages (each descriptor written by send, with the payload
    // packed right behind it), the received descriptors, the matched flags.
    uint8_t* space = ctx.workspace().get(3, n * (kStride + sizeof(Descriptor) + 1));
    messages_ = space;
    received_ = reinterpret_cast<Descriptor*>(space + n * kStride);
    matched_ = reinterpret_cast<uint8_t*>(received_ + n);
  }

  // Adds the framed message to `peer`: its descriptor, then `bytes` of `payload`.
  void send(transport::Schedule& schedule, int peer, const void* payload, size_t bytes,
            uint64_t linkCount = 0) {
    Descriptor& header = sentTo(peer);
    header = mine_;
    header.payloadBytes = bytes;
    header.linkCount = linkCount;
    if (bytes == 0 || bytes > kPackBytes) {
      sendUnpacked(schedule, peer, payload, bytes);
      return;
    }
    // Descriptor and payload in one message (one link operation); the direct algorithms send
    // the same message to every peer, so the payload is copied once.
    if (packedMessage_ == nullptr || packedFor_ != payload || packedBytes_ != bytes ||
        packedLinkCount_ != linkCount) {
      auto* message = reinterpret_cast<uint8_t*>(&header);
      copySmall(message + sizeof(Descriptor), payload, bytes);
      packedFor_ = static_cast<const uint8_t*>(payload);
      packedBytes_ = bytes;
      packedLinkCount_ = linkCount;
      packedMessage_ = message;
    }
    schedule.send(peer, packedMessage_, sizeof(Descriptor) + bytes);
  }
  // Adds the framed receive from `peer`: `body` runs on its payload when that is `bytes`.
  // Where every rank sends every peer the same descriptor, the engine compares the peer's in
  // place with the one sent to it (allAsSent's test, without copying it).
  void recv(transport::Schedule& schedule, int peer, size_t bytes, size_t align,
            const transport::RecvAction& body) {
    const bool expectSent = !perRankCounts(kind_);
    matched_[peer] = 0;
    ++expected_;
    schedule.recvFramed(peer, &received_[peer], sizeof(Descriptor), bytes, align, body,
                        expectSent ? &sentTo(peer) : nullptr,
                        expectSent ? &matched_[peer] : nullptr, &matches_);
  }
  // Sends and receives descriptors alone (to and from every peer).
  void addDescriptorsOnly(transport::Schedule& schedule);
  // The copy of the last payload packed behind a descriptor (`bytes` of `payload`, valid
  // until the next Framing of this context), or null: lets the direct algorithms use it as
  // this rank's own contribution instead of copying the input once more.
  const uint8_t* packedCopy(const void* payload, size_t bytes) const {
    return packedMessage_ != nullptr && packedFor_ == payload && packedBytes_ == bytes
               ? packedMessage_ + sizeof(Descriptor)
               : nullptr;
  }

  // Throws InvalidArgumentError on every rank alike when the descriptors disagree (`mine` is
  // this rank's local validation error, rethrown here after the exchange). For alltoall,
  // `recvCounts` are this rank's, compared with what each peer announced.
  void check(const char* opName, const std::string& mine,
             const std::vector<size_t>* recvCounts = nullptr) const {
    if (mine.empty() && allAsSent()) return;
    checkSlow(opName, mine, recvCounts);
  }
  // The same, for a rank whose own arguments were valid.
  void check(const char* opName) const {
    if (allAsSent()) return;
    checkSlow(opName, std::string(), nullptr);
  }

 private:
  // allgather and alltoall: each rank announces its own counts, so a peer's descriptor is not
  // the one this rank sent it even when every rank agrees.
  static bool perRankCounts(uint8_t kind) {
    return kind == static_cast<uint8_t>(CollectiveKind::kAllgather) ||
           kind == static_cast<uint8_t>(CollectiveKind::kAlltoall);
  }
  // The common case, inline: every peer sent exactly the descriptor this rank sent it (the
  // collectives without per-rank counts, where header and descriptor are the whole call).
  bool allAsSent() const {
    if (perRankCounts(kind_)) return false;
    // Every receive found its peer's descriptor in place, equal to the one sent to it.
    if (matches_ == expected_) return true;
    const int n = ctx_.size();
    const int r = ctx_.rank();
    for (int p = 0; p < n; ++p) {
      if (p != r && !matched_[p] && !sameBytes(received_[p], sentTo(p))) return false;
    }
    return true;
  }
  // a == b bytewise (a Descriptor is seven 64-bit words, no padding), unrolled.
  static bool sameBytes(const Descriptor& a, const Descriptor& b) {
    static_assert(sizeof(Descriptor) == 7 * sizeof(uint64_t), "compared as seven words");
    auto word = [](const Descriptor& d, int i) {
      uint64_t w;
      std::memcpy(&w, reinterpret_cast<const uint8_t*>(&d) + 8 * i, 8);
      return w;
    };
    // Written out: the compiler keeps a 7-iteration loop a loop.
    return ((word(a, 0) ^ word(b, 0)) | (word(a, 1) ^ word(b, 1)) | (word(a, 2) ^ word(b, 2)) |
            (word(a, 3) ^ word(b, 3)) | (word(a, 4) ^ word(b, 4)) | (word(a, 5) ^ word(b, 5)) |
            (word(a, 6) ^ word(b, 6))) == 0;
  }
  void checkSlow(const char* opName, const std::string& mine,
                 const std::vector<size_t>* recvCounts) const;
  // The descriptor alone (bytes == 0), or a payload too large to pack sent behind it.
  void sendUnpacked(transport::Schedule& schedule, int peer, const void* payload, size_t bytes);

  // memcpy for the small payloads packed behind a descriptor, without a library call for the
  // common 8 to 16 bytes.
  static void copySmall(uint8_t* dst, const void* src, size_t bytes) {
    if (bytes >= 8 && bytes <= 16) {
      uint64_t head, tail;
      std::memcpy(&head, src, 8);
      std::memcpy(&tail, static_cast<const uint8_t*>(src) + bytes - 8, 8);
      std::memcpy(dst, &head, 8);
      std::memcpy(dst + bytes - 8, &tail, 8);
    } else {
      std::memcpy(dst, src, bytes);
    }
  }

  // Payloads up to this size are copied behind their descriptor and sent as one message (one
  // link operation instead of two); larger ones are sent from the caller's buffer.
  static constexpr size_t kPackBytes = 1024;
  static constexpr size_t kStride = sizeof(Descriptor) + kPackBytes;

  Descriptor& sentTo(int peer) const {
    return *reinterpret_cast<Descriptor*>(messages_ + peer * kStride);
  }

  transport::Context& ctx_;
  const Descriptor& mine_;
  uint32_t expected_ = 0;  // receives added
  uint32_t matches_ = 0;   // of those, the ones whose descriptor matched in place
  uint8_t* messages_;      // the message to p at messages_ + p * kStride, its descriptor first
  Descriptor* received_;
  uint8_t* matched_;
  uint8_t kind_;
  // The last packed message: a peer sent the same payload with the same header reuses it.
  const uint8_t* packedFor_ = nullptr;
  size_t packedBytes_ = 0;
  uint64_t packedLinkCount_ = 0;
  const uint8_t* packedMessage_ = nullptr;
};

// The descriptor-only round of the ring and chain algorithms (and barrier, which is nothing
// else): every rank learns every rank's descriptor, then checks it.
void agree(transport::Context& ctx, const char* opName, const Descriptor& mine,
           const std::string& localError);

// Every rank's descriptor, one per rank (as an MPI allgather returns them), checked as
// Framing::check checks: throws the same messages.
void checkDescriptors(const char* opName, const std::vector<Descriptor>& all, int rank,
                      const std::string& localError);

}  // namespace hvd::coll
