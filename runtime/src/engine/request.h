// What one rank asks the engine to run: the metadata of one named op, as negotiated across
// ranks. Requests travel between ranks in a compact, length-checked binary form (every length is
// checked against the bytes that remain before anything is allocated), and the response cache
// compares them field by field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "hvd/engine.hpp"
#include "hvd/types.hpp"

namespace hvd::engine {

enum class OpType : uint8_t {
  kAllreduce = 0,
  kAllgather = 1,
  kBroadcast = 2,
  kReducescatter = 3,
  kAlltoall = 4,
  kBarrier = 5,
  kJoin = 6,
};
constexpr int kNumOpTypes = 7;

// "allreduce", "allgather", ...
const char* opTypeName(OpType type);
// "ALLREDUCE", ... (timeline activity names).
std::string opTypeUpper(OpType type);

struct Request {
  std::string name;
  OpType type = OpType::kAllreduce;
  DataType dtype = DataType::kFloat32;
  Shape shape;
  ReduceOp reduceOp = ReduceOp::kSum;
  int32_t root = 0;
  double prescale = 1.0;
  double postscale = 1.0;
  bool fp16 = false;
  int32_t device = -1;
  // Members of one groupedAllreduceAsync share a groupId (a hash of the member names, so it is
  // the same on every rank) and know the group's size; 0 / 0 outside a group.
  uint64_t groupId = 0;
  int32_t groupSize = 0;
  // alltoall: rows sent to each rank (explicit; an equal split is expanded at submit).
  std::vector<int64_t> splits;

  int64_t elements() const;  // product of the shape (1 for a scalar)
  // Elements per row of dimension 0 (product of shape[1:]; 1 for a scalar or a 1-d shape).
  int64_t rowElements() const;
  size_t bytes() const;  // elements() * dataTypeSize(dtype)
};

// Every field equal (name included). Used by the response cache: a cached entry is reused only
// for a request identical to the one that created it.
bool sameMetadata(const Request& a, const Request& b);

// May this op use the response cache? Only ops whose metadata is the same on every rank and that
// are not grouped: allreduce, broadcast and reducescatter (allgather and alltoall carry per-rank
// sizes, barriers have one-time names).
bool cacheable(const Request& request);

// "[17,18]" ("[]" for a scalar).
std::string formatShape(const Shape& shape);

// A batch of requests <-> bytes. Throws hvd::InternalError naming what is wrong on a malformed
// or truncated buffer (it comes from a peer running the same code, so that is a bug).
std::string serializeRequests(const std::vector<Request>& requests);
std::vector<Request> parseRequests(const uint8_t* data, size_t size);

// Group id of a grouped allreduce: FNV-1a over the member names (never 0).
uint64_t groupIdOf(const std::vector<std::string>& names);

}  // namespace hvd::engine
