#include "transport/progress.h"

#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "collectives/reduce.h"
#include "common/syscall_error.h"
#include "hvd/error.hpp"

namespace hvd::transport {

void RecvAction::consume(const uint8_t* data, size_t offset, size_t bytes) {
  switch (kind) {
    case Kind::kCopy:
      if (streaming) {
        coll::copyStreaming(dst + offset, data, bytes);
      } else {
        std::memcpy(dst + offset, data, bytes);
      }
      return;
    case Kind::kReduceInto:
    case Kind::kReduceTo: {
      const size_t elem = dataTypeSize(type);
      if (kind == Kind::kReduceInto) {
        coll::reduceInto(op, type, dst + offset, data, bytes / elem);
      } else {
        coll::reduceTo(op, type, dst + offset, src + offset, data, bytes / elem);
      }
      if (averageDivisor > 1) coll::finishAverage(type, dst + offset, bytes / elem, averageDivisor);
      return;
    }
    case Kind::kDiscard:
      return;
  }
}

Schedule::Schedule() : scratch_(std::make_unique<ProgressScratch>()) {}
Schedule::~Schedule() = default;

void Schedule::clear() {
  sends_.clear();
  recvs_.clear();
}

int Schedule::send(int peer, const void* data, size_t bytes, int afterRecv, bool forwards) {
  sends_.push_back(Send{peer, static_cast<const uint8_t*>(data), bytes, afterRecv, 0});
  const int index = static_cast<int>(sends_.size()) - 1;
  if (forwards && afterRecv >= 0) {
    Recv& source = recvs_.at(afterRecv);
    if (source.bytes == bytes && source.action.dst == data &&
        source.action.kind != RecvAction::Kind::kDiscard) {
      source.forwardedBy = index;
    }
  }
  return index;
}

int Schedule::recv(int peer, size_t bytes, size_t align, const RecvAction& action) {
  recvs_.push_back(
      Recv{peer, bytes, align, action, 0, -1, nullptr, 0, false, nullptr, nullptr, nullptr});
  return static_cast<int>(recvs_.size()) - 1;
}

int Schedule::recvFramed(int peer, void* header, size_t headerBytes, size_t bodyBytes, size_t align,
                         const RecvAction& body, const void* expected, uint8_t* matched,
                         uint32_t* matches) {
  recvs_.push_back(Recv{peer, headerBytes + bodyBytes, align, body, 0, -1,
                        static_cast<uint8_t*>(header), static_cast<uint32_t>(headerBytes), false,
                        static_cast<const uint8_t*>(expected), matched, matches});
  return static_cast<int>(recvs_.size()) - 1;
}

namespace {

// Receives a piece and writes its result (a reduction or a copy) into the next rank's ring
// instead of into memory that the forwarding send would read back; stores the result at the
// receive's destination too when it is needed there.
struct ForwardingSink final : RecvSink {
  const RecvAction* action = nullptr;
  uint8_t* tx = nullptr;  // reserved ring space for stream offsets [base, base + granted)
  size_t base = 0;

  void consume(const uint8_t* data, size_t offset, size_t bytes) override {
    const RecvAction& a = *action;
    uint8_t* out = tx + (offset - base);
    const size_t elem = dataTypeSize(a.type);
    switch (a.kind) {
      case RecvAction::Kind::kCopy:
        std::memcpy(out, data, bytes);
        break;
      case RecvAction::Kind::kReduceInto:
        coll::reduceTo(a.op, a.type, out, a.dst + offset, data, bytes / elem);
        break;
      case RecvAction::Kind::kReduceTo:
        coll::reduceTo(a.op, a.type, out, a.src + offset, data, bytes / elem);
        break;
      default:
        throw InternalError("receive kind cannot be forwarded");
    }
    if (a.averageDivisor > 1) coll::finishAverage(a.type, out, bytes / elem, a.averageDivisor);
    if (a.resultNeeded) {
      // Final results (the last reduce-scatter step, allgather copies) are not read again
      // during the collective: large ones bypass the cache.
      if (a.streaming) {
        coll::copyStreaming(a.dst + offset, out, bytes);
      } else {
        std::memcpy(a.dst + offset, out, bytes);
      }
    }
  }
};

// A framed receive's bytes: the header to its buffer, the body (stream offsets from
// headerBytes on) to the receive's action.
struct FramedSink final : RecvSink {
  RecvAction* body = nullptr;
  uint8_t* header = nullptr;
  size_t headerBytes = 0;

  void consume(const uint8_t* data, size_t offset, size_t bytes) override {
    if (offset < headerBytes) {
      const size_t part = std::min(bytes, headerBytes - offset);
      std::memcpy(header + offset, data, part);
      data += part;
      offset += part;
      bytes -= part;
      if (bytes == 0) return;
    }
    body->consume(data, offset - headerBytes, bytes);
  }
  uint8_t* directTarget(size_t offset) override {
    return offset < headerBytes ? nullptr : body->directTarget(offset - headerBytes);
  }
};

}  // namespace

namespace {

using Clock = std::chrono::steady_clock;

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

// Per-link cursor into the schedule: the next unfinished send and receive on that link.
struct LinkState {
  int peer = -1;
  Link* link = nullptr;
  std::vector<int> sends;  // indices in schedule order
  std::vector<int> recvs;
  size_t nextSend = 0;
  size_t nextRecv = 0;
  bool sendBlockedOnLink = false;  // the front send has bytes it may send but the link is full
  size_t piece = 0;                // most bytes moved per call on this link
};

// Per-link state of a run, kept by the Schedule between collectives so that a run allocates
// nothing once the vectors have grown to the job's shape.
struct ProgressScratch {
  std::vector<LinkState> states;  // [0, active) are in use by the current run
  size_t active = 0;
  std::vector<int> index;  // peer -> position in states, or -1
  std::vector<pollfd> fds;
  std::vector<LinkState*> polled;
};

namespace {

class Runner {
 public:
  Runner(Context& context, Schedule& schedule, const char* opName)
      : context_(context),
        schedule_(schedule),
        opName_(opName),
        scratch_(schedule.scratch()),
        fds_(scratch_.fds),
        polled_(scratch_.polled) {}

  void run() {
    if (context_.opensOnDemand()) openMissingLinks();
    buildLinkStates();
    // A small collective whose messages have arrived completes in its first pass: then it
    // reads no clock (two reads are a sizeable share of an 8-byte allreduce). The idle time
    // that spin, yield and timeout measure starts after that first pass.
    if (remaining_ == 0 || (pass() && remaining_ == 0)) return;
    const auto& options = context_.options();
    auto lastProgress = Clock::now();
    while (remaining_ > 0) {
      if (pass()) {
        if (remaining_ == 0) break;
        lastProgress = Clock::now();
        continue;
      }
      checkClosedPeers();
      const auto now = Clock::now();
      const auto idle = now - lastProgress;
      if (idle < options.spin) {
        cpuRelax();
        continue;
      }
      if (idle < options.spin + options.yield) {
        ::sched_yield();
        continue;
      }
      if (now - lastProgress >= options.timeout) throwTimeout();
      if (sleepUntilWoken(lastProgress + options.timeout)) lastProgress = Clock::now();
    }
  }

 private:
  // The schedule's peers without a link yet, opened in one batch (link_source.h).
  void openMissingLinks() {
    std::vector<int> missing;
    auto need = [&](int peer) {
      if (peer < 0 || peer >= context_.size() || peer == context_.rank()) return;
      if (context_.linkIfOpen(peer) != nullptr) return;
      if (std::find(missing.begin(), missing.end(), peer) == missing.end()) missing.push_back(peer);
    };
    for (const auto& send : schedule_.sends()) {
      if (send.bytes > 0) need(send.peer);
    }
    for (const auto& recv : schedule_.recvs()) {
      if (recv.bytes > 0) need(recv.peer);
    }
    if (!missing.empty()) context_.openLinks(missing, opName_);
  }

  void buildLinkStates() {
    const int size = context_.size();
    auto& index = scratch_.index;
    // Reset the previous run's entries (index holds -1 everywhere else).
    if (index.size() != static_cast<size_t>(size)) index.assign(size, -1);
    for (size_t i = 0; i < scratch_.active; ++i) index[scratch_.states[i].peer] = -1;
    scratch_.active = 0;
    auto stateFor = [&](int peer) -> LinkState& {
      if (peer < 0 || peer >= size || peer == context_.rank()) {
        throw InternalError(std::string(opName_) + ": schedule names invalid peer " +
                            std::to_string(peer));
      }
      if (index[peer] < 0) {
        Link* link = &context_.link(peer);
        const size_t piece = context_.pieceBytes(peer);
        if (scratch_.active == scratch_.states.size()) scratch_.states.emplace_back();
        LinkState& state = scratch_.states[scratch_.active];
        state.peer = peer;
        state.link = link;
        state.sends.clear();
        state.recvs.clear();
        state.nextSend = 0;
        state.nextRecv = 0;
        state.sendBlockedOnLink = false;
        state.piece = piece;
        index[peer] = static_cast<int>(scratch_.active++);
      }
      return scratch_.states[index[peer]];
    };
    auto& sends = schedule_.sends();
    auto& recvs = schedule_.recvs();
    remaining_ = 0;
    for (size_t i = 0; i < sends.size(); ++i) {
      if (sends[i].bytes == 0) continue;
      stateFor(sends[i].peer).sends.push_back(static_cast<int>(i));
      ++remaining_;
    }
    for (size_t i = 0; i < recvs.size(); ++i) {
      if (recvs[i].bytes == 0) continue;
      stateFor(recvs[i].peer).recvs.push_back(static_cast<int>(i));
      ++remaining_;
    }
    states_ = {scratch_.states.data(), scratch_.active};
  }

  // One sweep over every link: move at most one piece per direction. Returns whether any byte
  // moved.
  bool pass() {
    bool progress = false;
    auto& sends = schedule_.sends();
    auto& recvs = schedule_.recvs();
    for (auto& state : states_) {
      const size_t piece = state.piece;
      // Receive first: it may unblock a send of this very pass (ring forwarding).
      while (state.nextRecv < state.recvs.size()) {
        auto& op = recvs[state.recvs[state.nextRecv]];
        if (op.header != nullptr) {
          if (!receiveFramed(state, op, piece)) break;
          progress = true;
          if (op.done < op.bytes) break;
        } else {
          const size_t want = std::min(op.bytes - op.done, piece);
          size_t got = 0;
          if (!tryForwarding(state, op, want, &got)) {
            got = state.link->tryRecv(want, op.align, op.done, op.action);
          }
          if (got == 0) break;
          op.done += got;
          progress = true;
          if (op.done < op.bytes) break;
        }
        ++state.nextRecv;
        --remaining_;
      }
      state.sendBlockedOnLink = false;
      while (state.nextSend < state.sends.size()) {
        auto& op = sends[state.sends[state.nextSend]];
        size_t allowed = op.bytes;
        if (op.afterRecv >= 0) {
          const auto& dependency = recvs[op.afterRecv];
          if (dependency.done < dependency.bytes) allowed = std::min(allowed, dependency.done);
        }
        if (allowed <= op.done) break;
        const size_t put =
            state.link->trySend(op.data + op.done, std::min(allowed - op.done, piece));
        if (put == 0) {
          state.sendBlockedOnLink = true;
          break;
        }
        op.done += put;
        progress = true;
        if (op.done < op.bytes) break;
        ++state.nextSend;
        --remaining_;
      }
    }
    return progress;
  }

  // Reduce-and-forward: when the send that forwards this receive's result has caught up with
  // it (all earlier bytes sent, nothing else queued before it on its link) and the next link
  // can lend ring space, the received piece is reduced or copied straight into that space and
  // published. Saves writing the result and reading it back; for a ring's intermediate steps
  // the result is never written to memory at all. Returns false when it did not apply (the
  // caller then receives normally); *got is the number of bytes moved.
  bool tryForwarding(LinkState& state, Schedule::Recv& op, size_t want, size_t* got) {
    if (op.forwardedBy < 0) return false;
    auto& sendOp = schedule_.sends()[op.forwardedBy];
    if (sendOp.done != op.done) return false;
    LinkState& out = scratch_.states[scratch_.index[sendOp.peer]];
    if (out.nextSend >= out.sends.size() || out.sends[out.nextSend] != op.forwardedBy) return false;
    size_t granted = 0;
    uint8_t* tx = out.link->reserveSend(want, &granted);
    granted &= ~(op.align - 1);
    // The reduction writes typed elements into the ring: only when they are aligned there.
    if (granted == 0 || reinterpret_cast<uintptr_t>(tx) % op.align != 0) return false;
    forwarding_.action = &op.action;
    forwarding_.tx = tx;
    forwarding_.base = op.done;
    const size_t moved = state.link->tryRecv(granted, op.align, op.done, forwarding_);
    out.link->commitSend(moved);
    sendOp.done += moved;
    if (moved > 0 && sendOp.done == sendOp.bytes) {
      ++out.nextSend;
      --remaining_;
    }
    *got = moved;
    return true;
  }

  // Moves what it can of a framed receive; returns whether anything moved. Until the length is
  // known only the header may be taken (the bytes after a shorter body belong to the next
  // message), unless the link lets us read the length in place.
  bool receiveFramed(LinkState& state, Schedule::Recv& op, size_t piece) {
    const size_t header = op.headerBytes;
    if (!op.headerSeen && op.done == 0) {
      // The whole planned message in place (a small message that has arrived): when it
      // announces the planned length it is taken with no sink and, when the header is the
      // expected one, without copying the header. As cheap as a plain receive.
      if (op.bytes <= piece) {
        if (const uint8_t* next = state.link->peekRecv(op.bytes)) {
          if (announcedBody(next) == op.bytes - header) {
            takePeeked(state, op, next);
            return true;
          }
          frame(op, next);
        }
      }
      if (!op.headerSeen) {
        if (const uint8_t* next = state.link->peekRecv(header)) frame(op, next);
      }
    }
    framed_.body = &op.action;
    framed_.header = op.header;
    framed_.headerBytes = header;
    bool moved = false;
    while (op.done < op.bytes) {
      const size_t limit = op.headerSeen ? op.bytes : header;
      size_t want = std::min(limit - op.done, piece);
      if (op.done < header) want = std::max(want, header - op.done);
      const size_t got = state.link->tryRecv(want, op.align, op.done, framed_);
      if (got == 0) break;
      moved = true;
      op.done += got;
      // The header came on its own: the body may be waiting right behind it.
      if (op.headerSeen || op.done != header) break;
      frame(op, op.header);
    }
    return moved;
  }

  static uint64_t announcedBody(const uint8_t* header) {
    uint64_t announced;
    std::memcpy(&announced, header, sizeof(announced));
    return announced;
  }

  // a == b over `bytes` (a multiple of 8); the 56-byte collective descriptor unrolled.
  static bool sameHeader(const uint8_t* a, const uint8_t* b, size_t bytes) {
    if (bytes != 56) return std::memcmp(a, b, bytes) == 0;
    auto word = [](const uint8_t* p, int i) {
      uint64_t w;
      std::memcpy(&w, p + 8 * i, 8);
      return w;
    };
    // Written out: the compiler keeps a 7-iteration loop a loop.
    return ((word(a, 0) ^ word(b, 0)) | (word(a, 1) ^ word(b, 1)) | (word(a, 2) ^ word(b, 2)) |
            (word(a, 3) ^ word(b, 3)) | (word(a, 4) ^ word(b, 4)) | (word(a, 5) ^ word(b, 5)) |
            (word(a, 6) ^ word(b, 6))) == 0;
  }

  // The complete framed message at `message` (in place in the link, announcing the planned
  // body): header compared or copied, body handed to the action, all of it consumed.
  static void takePeeked(LinkState& state, Schedule::Recv& op, const uint8_t* message) {
    const size_t header = op.headerBytes;
    if (op.expected != nullptr && sameHeader(message, op.expected, header)) {
      *op.matched = 1;
      ++*op.matches;
    } else if (header == 56) {
      std::memcpy(op.header, message, 56);  // the descriptor: a fixed-size copy, no call
    } else {
      std::memcpy(op.header, message, header);
    }
    op.headerSeen = true;
    const size_t body = op.bytes - header;
    const RecvAction& action = op.action;
    if (body >= 8 && body <= 16 && action.kind == RecvAction::Kind::kCopy && !action.streaming) {
      // The latency case (an 8-byte allreduce's payload): two word copies, no call.
      uint64_t head, tail;
      std::memcpy(&head, message + header, 8);
      std::memcpy(&tail, message + header + body - 8, 8);
      std::memcpy(action.dst, &head, 8);
      std::memcpy(action.dst + body - 8, &tail, 8);
    } else if (body > 0) {
      op.action.consume(message + header, 0, body);
    }
    state.link->commitRecv(op.bytes);
    op.done = op.bytes;
  }

  // The framed receive's header (at `header`) announces its body: that many bytes follow it.
  static void frame(Schedule::Recv& op, const uint8_t* header) {
    const uint64_t announced = announcedBody(header);
    op.headerSeen = true;
    if (announced == op.bytes - op.headerBytes) return;
    op.bytes = op.headerBytes + announced;
    op.align = 1;
    op.action.kind = RecvAction::Kind::kDiscard;
  }

  bool pendingRecv(const LinkState& s) const { return s.nextRecv < s.recvs.size(); }
  bool pendingSend(const LinkState& s) const { return s.nextSend < s.sends.size(); }

  void checkClosedPeers() {
    for (auto& state : states_) {
      if ((pendingRecv(state) || pendingSend(state)) && state.link->peerClosed()) {
        throw PeerError(std::string(opName_) + ": lost the connection to " +
                        state.link->describe() +
                        " (the peer exited, crashed, was killed or failed)");
      }
    }
  }

  // Blocks until a link may have progressed. Returns true when woken by an event.
  bool sleepUntilWoken(Clock::time_point deadline) {
    fds_.clear();
    polled_.clear();
    for (auto& state : states_) {
      const bool wantRecv = pendingRecv(state);
      const bool wantSend = state.sendBlockedOnLink;
      if (!wantRecv && !wantSend) continue;
      state.link->prepareSleep();
      fds_.push_back(pollfd{state.link->waitFd(), state.link->pollEvents(wantSend, wantRecv), 0});
      polled_.push_back(&state);
    }
    // Re-check after announcing sleep: a peer that published just before the announcement
    // did not see our flag and will not wake us.
    if (pass()) {
      for (auto* state : polled_) state->link->afterSleep(0);
      return true;
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    const int waitMs = static_cast<int>(std::clamp<int64_t>(left.count() + 1, 1, 1000));
    const int r = fds_.empty() ? 0 : ::poll(fds_.data(), fds_.size(), waitMs);
    if (r < 0 && errno != EINTR) throwSyscall(std::string(opName_) + ": poll");
    for (size_t i = 0; i < polled_.size(); ++i) {
      polled_[i]->link->afterSleep(r > 0 ? fds_[i].revents : 0);
    }
    if (fds_.empty()) {
      // Only sends waiting on receives of other links can be here, which cannot happen
      // without a pending receive; guard against a malformed schedule spinning forever.
      throw InternalError(std::string(opName_) + ": schedule cannot make progress");
    }
    return r > 0;
  }

  [[noreturn]] void throwTimeout() {
    std::string waiting;
    for (auto& state : states_) {
      if (!pendingRecv(state) && !state.sendBlockedOnLink) continue;
      if (!waiting.empty()) waiting += ", ";
      waiting += (pendingRecv(state) ? "data from " : "buffer space at ") + state.link->describe();
    }
    char seconds[32];
    std::snprintf(seconds, sizeof(seconds), "%.3g",
                  std::chrono::duration<double>(context_.options().timeout).count());
    throw TimeoutError(std::string(opName_) + ": no progress for " + seconds +
                       " s (HVD_TIMEOUT) waiting for " + waiting +
                       "; the peer may be stopped, hung or overloaded");
  }

  Context& context_;
  Schedule& schedule_;
  const char* opName_;
  ProgressScratch& scratch_;
  // The links of this run: a view of the first scratch_.active states.
  struct States {
    LinkState* first = nullptr;
    size_t count = 0;
    LinkState* begin() const { return first; }
    LinkState* end() const { return first + count; }
  } states_;
  std::vector<pollfd>& fds_;
  std::vector<LinkState*>& polled_;
  ForwardingSink forwarding_;
  FramedSink framed_;
  size_t remaining_ = 0;
};

}  // namespace

namespace {

// A lost connection may only be the echo of another rank's failure: report the root cause
// that rank published, with its kind (a stopped peer is a timeout everywhere).
[[noreturn]] void rethrowWithRootCause(Context& context, const Error& error) {
  FailureBoard* board = context.failureBoard();
  ErrorKind kind;
  std::string message;
  if (error.kind() == ErrorKind::kPeer && board != nullptr && board->lookup(&kind, &message)) {
    const std::string text =
        message + " [seen by rank " + std::to_string(context.rank()) + " as: " + error.what() + "]";
    context.markBroken(text);
    throwError(kind, text);
  }
  if (board != nullptr) {
    board->publish(error.kind(), "rank " + std::to_string(context.rank()) + ": " + error.what());
  }
  context.markBroken(error.what());
  throw;
}

}  // namespace

void run(Context& context, Schedule& schedule, const char* opName) {
  context.checkUsable();
  try {
    Runner(context, schedule, opName).run();
    coll::streamingFence();  // results written with streaming stores are complete
  } catch (const Error& error) {
    rethrowWithRootCause(context, error);
  } catch (const std::exception& error) {
    const BackendError wrapped(std::string(opName) + ": " + error.what());
    if (context.failureBoard() != nullptr) {
      context.failureBoard()->publish(wrapped.kind(), wrapped.what());
    }
    context.markBroken(wrapped.what());
    throw wrapped;
  }
}

}  // namespace hvd::transport
