#include "collectives/agreement.h"

#include <cstring>
#include <functional>

#include "collectives/gathered.h"
#include "collectives/validate.h"

namespace hvd::coll {
namespace {

using transport::RecvAction;
using transport::Schedule;

const char* kindName(uint8_t kind) {
  switch (static_cast<CollectiveKind>(kind)) {
    case CollectiveKind::kAllreduce:
      return "allreduce";
    case CollectiveKind::kAllgather:
      return "allgather";
    case CollectiveKind::kBroadcast:
      return "broadcast";
    case CollectiveKind::kReducescatter:
      return "reducescatter";
    case CollectiveKind::kAlltoall:
      return "alltoall";
    case CollectiveKind::kBarrier:
      return "barrier";
  }
  return "unknown collective";
}

std::string typeName(uint8_t type) {
  if (type >= kNumDataTypes) return "type " + std::to_string(type);
  return dataTypeName(static_cast<DataType>(type));
}

std::string opName(uint8_t op) {
  if (op >= kNumReduceOps) return "op " + std::to_string(op);
  return reduceOpName(static_cast<ReduceOp>(op));
}

std::string algorithmName(uint8_t algorithm) {
  switch (algorithm) {
    case kAlgorithmDirect:
      return "direct";
    case kAlgorithmRing:
      return "ring";
    case kAlgorithmAdasum:
      return "adasum";
  }
  return "none";
}

// "0", "0,2-3": the ranks of one value.
std::string rankList(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(ranks[i]);
    if (j > i) out += (j == i + 1 ? "," : "-") + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

// "17 on rank 0, 18 on ranks 1-3": each value once, in the order it first appears.
std::string byValue(const std::vector<std::string>& values) {
  std::vector<std::string> distinct;
  std::vector<std::vector<int>> ranks;
  for (size_t r = 0; r < values.size(); ++r) {
    size_t k = 0;
    while (k < distinct.size() && distinct[k] != values[r]) ++k;
    if (k == distinct.size()) {
      distinct.push_back(values[r]);
      ranks.emplace_back();
    }
    ranks[k].push_back(static_cast<int>(r));
  }
  std::string out;
  for (size_t k = 0; k < distinct.size(); ++k) {
    if (k == 8) return out + ", and " + std::to_string(distinct.size() - k) + " more values";
    if (!out.empty()) out += ", ";
    out += distinct[k] + (ranks[k].size() == 1 ? " on rank " : " on ranks ") + rankList(ranks[k]);
  }
  return out;
}

using Lookup = std::function<const Descriptor&(int)>;

// Throws "<op>: <field> differs across ranks: ..." unless value(p) is the same for every rank.
void requireSame(const char* op, const char* field, int n, const Lookup& at,
                 const std::function<std::string(const Descriptor&)>& value) {
  const std::string first = value(at(0));
  for (int p = 1; p < n; ++p) {
    if (value(at(p)) == first) continue;
    std::vector<std::string> values(n);
    for (int q = 0; q < n; ++q) values[q] = value(at(q));
    throw InvalidArgumentError(std::string(op) + ": " + field +
                               " differs across ranks: " + byValue(values));
  }
}

// The checks every rank runs on the same n descriptors, so every rank throws the same error.
// `pairCheck` (alltoall over hvd's links) compares what each peer announced exactly.
void checkAll(const char* op, int n, int rank, const Lookup& at, const std::string& mine,
              const std::function<void()>& pairCheck) {
  if (!mine.empty()) throw InvalidArgumentError(mine);
  // The common case first, without building any text: every rank runs the same call.
  const Descriptor& own = at(rank);
  const bool perRankCounts = own.kind == static_cast<uint8_t>(CollectiveKind::kAllgather) ||
                             own.kind == static_cast<uint8_t>(CollectiveKind::kAlltoall);
  bool same = true;
  for (int p = 0; p < n && same; ++p) {
    const Descriptor& d = at(p);
    same = d.flags == 0 && d.kind == own.kind && d.type == own.type && d.op == own.op &&
           d.algorithm == own.algorithm && d.root == own.root &&
           (perRankCounts || (d.count == own.count && d.extra == own.extra));
  }
  if (same && !perRankCounts) return;
  for (int p = 0; p < n; ++p) {
    if (at(p).flags & kInvalid) {
      throw InvalidArgumentError(std::string(op) + ": rank " + std::to_string(p) +
                                 " passed invalid arguments to " + kindName(at(p).kind) +
                                 " (its own error says which)");
    }
  }
  auto number = [](uint64_t v) { return std::to_string(v); };
  requireSame(op, "collective", n, at, [](const Descriptor& d) { return kindName(d.kind); });
  const auto kind = static_cast<CollectiveKind>(at(rank).kind);
  if (kind == CollectiveKind::kBarrier) return;
  requireSame(op, "type", n, at, [](const Descriptor& d) { return typeName(d.type); });
  if (kind == CollectiveKind::kAllreduce || kind == CollectiveKind::kReducescatter) {
    requireSame(op, "op", n, at, [](const Descriptor& d) { return opName(d.op); });
  }
  if (kind == CollectiveKind::kBroadcast) {
    requireSame(op, "root", n, at, [](const Descriptor& d) { return std::to_string(d.root); });
  }
  if (kind != CollectiveKind::kAllgather && kind != CollectiveKind::kAlltoall) {
    requireSame(op, "count", n, at, [&](const Descriptor& d) { return number(d.count); });
  }
  if (kind == CollectiveKind::kReducescatter) {
    requireSame(op, "rowElements", n, at, [&](const Descriptor& d) { return number(d.extra); });
  }
  if (kind == CollectiveKind::kAllgather) {
    // Each rank's counts[] must be the vector of the ranks' own counts.
    std::vector<size_t> actual(n);
    std::vector<std::string> values(n);
    for (int p = 0; p < n; ++p) {
      actual[p] = at(p).count;
      values[p] = number(at(p).count);
    }
    const uint64_t expected = countsChecksum(actual);
    std::vector<int> wrong;
    for (int p = 0; p < n; ++p) {
      if (at(p).extra != expected) wrong.push_back(p);
    }
    if (!wrong.empty()) {
      throw InvalidArgumentError(
          std::string(op) + ": counts differ from the counts the ranks contribute (" +
          byValue(values) + ") on rank" + (wrong.size() > 1 ? "s " : " ") + rankList(wrong));
    }
  }
  if (kind == CollectiveKind::kAlltoall) {
    // Sum of sendCounts[r][q] * w(r, q) over all ranks equals that of recvCounts[q][r] exactly
    // when (up to compensating differences) every rank expects what its peers send it.
    if (pairCheck) pairCheck();
    uint64_t sent = 0, expected = 0;
    for (int p = 0; p < n; ++p) {
      sent += at(p).extra;
      expected += at(p).extra2;
    }
    if (sent != expected) {
      throw InvalidArgumentError(std::string(op) +
                                 ": recvCounts differ across ranks from the sendCounts of the "
                                 "ranks that send them (the checksums of all sendCounts and all "
                                 "recvCounts differ)");
    }
  }
  if (kind != CollectiveKind::kAlltoall) {
    requireSame(op, "algorithm", n, at,
                [](const Descriptor& d) { return algorithmName(d.algorithm); });
  }
}

}  // namespace

uint64_t countWeight(uint64_t from, uint64_t to) {
  // splitmix64 of the pair: fixed, identical on every rank, and odd.
  uint64_t z = (from << 32 ^ to) + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return (z ^ (z >> 31)) | 1;
}

uint64_t countsChecksum(const std::vector<size_t>& counts) {
  uint64_t sum = 0;
  for (size_t p = 0; p < counts.size(); ++p) sum += counts[p] * countWeight(p, 0);
  return sum;
}

void Framing::sendUnpacked(Schedule& schedule, int peer, const void* payload, size_t bytes) {
  schedule.send(peer, &sentTo(peer), sizeof(Descriptor));
  if (bytes > 0) schedule.send(peer, payload, bytes);
}

void Framing::addDescriptorsOnly(Schedule& schedule) {
  const int n = ctx_.size();
  const int r = ctx_.rank();
  RecvAction none;
  none.kind = RecvAction::Kind::kDiscard;
  for (int k = 1; k < n; ++k) send(schedule, (r + k) % n, nullptr, 0);
  for (int k = 1; k < n; ++k) recv(schedule, (r - k + n) % n, 0, 1, none);
}

void Framing::checkSlow(const char* opName, const std::string& mine,
                        const std::vector<size_t>* recvCounts) const {
  const int n = ctx_.size();
  const int r = ctx_.rank();
  // The descriptors the fast path did not need: this rank's own and those found in place to
  // be what was sent.
  received_[r] = mine_;
  for (int p = 0; p < n; ++p) {
    if (p != r && matched_[p]) received_[p] = sentTo(p);
  }
  for (int p = 0; p < n; ++p) {
    if (received_[p].magic != kDescriptorMagic) {
      // Not a descriptor: the stream from p is not at a message boundary, nothing after this
      // can be trusted.
      const std::string reason = std::string(opName) + ": the stream from rank " +
                                 std::to_string(p) + " is out of step (no collective descriptor)";
      ctx_.markBroken(reason);
      throw InternalError(reason);
    }
  }
  auto pairCheck = [&] {
    for (int p = 0; p < n; ++p) {
      if (p == r || received_[p].linkCount == (*recvCounts)[p]) continue;
      throw InvalidArgumentError(std::string(opName) + ": rank " + std::to_string(p) + " sends " +
                                 std::to_string(received_[p].linkCount) + " elements to rank " +
                                 std::to_string(r) + " but rank " + std::to_string(r) +
                                 " expects " + std::to_string((*recvCounts)[p]) +
                                 " (its recvCounts[" + std::to_string(p) + "])");
    }
  };
  checkAll(
      opName, n, r, [this](int p) -> const Descriptor& { return received_[p]; }, mine,
      recvCounts != nullptr ? std::function<void()>(pairCheck) : std::function<void()>());
}

void agree(transport::Context& ctx, const char* opName, const Descriptor& mine,
           const std::string& localError) {
  if (!ctx.fullMesh()) {
    agreeGathered(ctx, opName, mine, localError);
    return;
  }
  Framing framing(ctx, mine);
  Schedule& schedule = scheduleOf(ctx);
  framing.addDescriptorsOnly(schedule);
  transport::run(ctx, schedule, opName);
  framing.check(opName, localError);
}

void checkDescriptors(const char* opName, const std::vector<Descriptor>& all, int rank,
                      const std::string& localError) {
  checkAll(opName, static_cast<int>(all.size()), rank,
           [&all](int p) -> const Descriptor& { return all[p]; }, localError, {});
}

}  // namespace hvd::coll
