#include "engine/executor.h"

#include <algorithm>
#include <cstring>

#include "collectives/collectives.h"
#include "common/element.h"
#include "common/half.h"
#include "engine/timeline.h"
#include "hvd/error.hpp"

namespace hvd::engine {
namespace {

bool isFloat(DataType t) {
  return t == DataType::kFloat16 || t == DataType::kBFloat16 || t == DataType::kFloat32 ||
         t == DataType::kFloat64;
}

// The type an allreduce travels in: float16 for compressed float32/float64.
DataType wireType(const Request& r) {
  if (r.fp16 && (r.dtype == DataType::kFloat32 || r.dtype == DataType::kFloat64)) {
    return DataType::kFloat16;
  }
  return r.dtype;
}

bool fusable(const Request& a, const Request& b) {
  return a.dtype == b.dtype && a.reduceOp == b.reduceOp && a.prescale == b.prescale &&
         a.postscale == b.postscale && a.fp16 == b.fp16 && a.device == b.device;
}

}  // namespace

void convertScaled(DataType srcType, const void* src, DataType dstType, void* dst, size_t count,
                   double factor, int divisor) {
  if (srcType == dstType && factor == 1.0 && divisor <= 1) {
    if (src != dst) std::memcpy(dst, src, count * dataTypeSize(srcType));
    return;
  }
  // Integers go through float64 too and are truncated toward zero on the way back, as
  // Horovod scales them.
  // Fast paths for the common float32 cases (the compiler vectorises them).
  if (srcType == DataType::kFloat32 && dstType == DataType::kFloat32 && divisor <= 1) {
    const float f = static_cast<float>(factor);
    const float* in = static_cast<const float*>(src);
    float* out = static_cast<float*>(dst);
    if (static_cast<double>(f) == factor) {
      for (size_t i = 0; i < count; ++i) out[i] = in[i] * f;
      return;
    }
  }
  for (size_t i = 0; i < count; ++i) {
    double v = loadElement(srcType, src, i);
    if (divisor > 1) v /= divisor;
    if (factor != 1.0) v *= factor;
    storeElement(dstType, dst, i, v);
  }
}

std::vector<std::pair<size_t, size_t>> planBatches(const std::vector<Response>& responses,
                                                   size_t fusionThreshold) {
  std::vector<std::pair<size_t, size_t>> batches;
  size_t i = 0;
  while (i < responses.size()) {
    const Response& head = responses[i];
    // A unit: one response, or the consecutive members of one group.
    auto unitEnd = [&](size_t at) {
      size_t j = at + 1;
      const Request& r = responses[at].request;
      if (responses[at].kind == Response::Kind::kRun && r.groupSize > 0) {
        while (j < responses.size() && responses[j].kind == Response::Kind::kRun &&
               responses[j].request.groupId == r.groupId && fusable(responses[j].request, r)) {
          ++j;
        }
      }
      return j;
    };
    if (head.kind != Response::Kind::kRun || head.request.type != OpType::kAllreduce) {
      batches.emplace_back(i, i + 1);
      ++i;
      continue;
    }
    auto unitBytes = [&](size_t from, size_t to) {
      size_t bytes = 0;
      for (size_t k = from; k < to; ++k) {
        bytes += static_cast<size_t>(responses[k].request.elements()) *
                 dataTypeSize(wireType(responses[k].request));
      }
      return bytes;
    };
    size_t end = unitEnd(i);
    size_t bytes = unitBytes(i, end);
    while (fusionThreshold > 0 && end < responses.size()) {
      const Response& next = responses[end];
      if (next.kind != Response::Kind::kRun || next.request.type != OpType::kAllreduce ||
          !fusable(next.request, head.request)) {
        break;
      }
      const size_t nextEnd = unitEnd(end);
      const size_t nextBytes = unitBytes(end, nextEnd);
      if (bytes + nextBytes > fusionThreshold) break;
      bytes += nextBytes;
      end = nextEnd;
    }
    batches.emplace_back(i, end);
    i = end;
  }
  return batches;
}

Executor::Executor(transport::Context& context, size_t fusionThreshold, EngineCounters& counters,
                   Timeline* timeline, gpu::DeviceBackend* devices,
                   coll::HostCollectives* collectives)
    : context_(context),
      ring_(std::make_unique<coll::RingCollectives>(context)),
      host_(collectives != nullptr ? *collectives : *ring_),
      fusionThreshold_(fusionThreshold),
      counters_(counters),
      timeline_(timeline),
      devices_(devices) {}

gpu::DeviceBackend& Executor::devices(const Request& request) {
  if (devices_ == nullptr) {
    throw InternalError("engine: " + std::string(opTypeName(request.type)) + " '" + request.name +
                        "' is on GPU " + std::to_string(request.device) +
                        " but the engine has no device backend");
  }
  return *devices_;
}

uint8_t* Executor::dataOf(std::vector<uint8_t>& v) { return v.empty() ? &emptyByte_ : v.data(); }

const void* Executor::inputOf(const LocalOp* op) {
  if (op->input == nullptr) return &emptyByte_;
  if (op->request.device < 0) return op->input;
  const size_t bytes = op->request.bytes();
  inputShadow_.resize(bytes);
  gpu::DeviceBackend& dev = devices(op->request);
  dev.copy(op->request.device, dataOf(inputShadow_), op->input, bytes);
  dev.synchronize(op->request.device);
  return dataOf(inputShadow_);
}

void* Executor::outputOf(LocalOp* op) { return op->output != nullptr ? op->output : &emptyByte_; }

uint8_t* Executor::fusionBuffer(size_t bytes) {
  if (fusion_.size() < bytes) fusion_.resize(bytes);
  return fusion_.data();
}

void Executor::phaseBegin(const LocalOp* local, const char* activity) {
  if (timeline_ != nullptr && local != nullptr) timeline_->begin(local->request.name, activity);
}

void Executor::phaseEnd(const LocalOp* local) {
  if (timeline_ != nullptr && local != nullptr) timeline_->end(local->request.name);
}

void Executor::run(const std::vector<Response>& responses, size_t begin, size_t end,
                   const std::vector<LocalOp*>& locals) {
  const Response& head = responses[begin];
  const OpType type = head.request.type;
  for (LocalOp* local : locals) phaseBegin(local, opTypeUpper(type).c_str());
  switch (type) {
    case OpType::kAllreduce: {
      std::vector<const Response*> batch;
      for (size_t i = begin; i < end; ++i) batch.push_back(&responses[i]);
      allreduceBatch(batch, locals);
      break;
    }
    case OpType::kAllgather:
      allgather(head, locals[0]);
      break;
    case OpType::kBroadcast:
      broadcast(head, locals[0]);
      break;
    case OpType::kReducescatter:
      reducescatter(head, locals[0]);
      break;
    case OpType::kAlltoall:
      alltoall(head, locals[0]);
      break;
    case OpType::kBarrier:
    case OpType::kJoin:
      // Negotiation itself synchronised the ranks: every rank submitted it.
      break;
  }
  for (LocalOp* local : locals) phaseEnd(local);
}

coll::HostCollectives& Executor::hostFor(ReduceOp op) {
  // MPI has no Adasum: it runs over the engine's own transports whatever HVD_CPU_BACKEND says.
  return op == ReduceOp::kAdasum ? *ring_ : host_;
}

void Executor::allreduceBatch(const std::vector<const Response*>& batch,
                              const std::vector<LocalOp*>& locals) {
  ++counters_.collectives;
  if (batch.size() > 1) counters_.fusedTensors += batch.size();
  // Counted as sent: a compressed batch travels as float16 on every path (device batches that
  // need the cast take the host path with the same wire type).
  size_t elements = 0;
  for (const Response* r : batch) elements += static_cast<size_t>(r->request.elements());
  counters_.bytes += elements * dataTypeSize(wireType(batch.front()->request));
  if (batch.front()->request.device >= 0) {
    deviceAllreduceBatch(batch, locals);
  } else {
    hostAllreduceBatch(batch, locals);
  }
}

void Executor::deviceAllreduceBatch(const std::vector<const Response*>& batch,
                                    const std::vector<LocalOp*>& locals) {
  const Request& meta = batch.front()->request;
  const int device = meta.device;
  gpu::DeviceBackend& dev = devices(meta);
  const size_t elem = dataTypeSize(meta.dtype);
  auto count = [&](size_t i) { return static_cast<size_t>(batch[i]->request.elements()); };

  if (meta.prescale != 1.0 || meta.postscale != 1.0 || wireType(meta) != meta.dtype ||
      meta.reduceOp == ReduceOp::kAdasum) {
    // Scaling and casting need kernels hvd does not have, and NCCL has no Adasum: host copies
    // take the CPU path.
    std::vector<std::vector<uint8_t>> shadows(batch.size());
    std::vector<LocalOp> hostOps(batch.size());
    std::vector<LocalOp*> hostLocals(batch.size(), nullptr);
    for (size_t i = 0; i < batch.size(); ++i) {
      if (locals[i] == nullptr) continue;
      shadows[i].resize(count(i) * elem);
      dev.copy(device, dataOf(shadows[i]), locals[i]->input, shadows[i].size());
      hostOps[i].request = locals[i]->request;
      hostOps[i].request.device = -1;
      hostOps[i].input = dataOf(shadows[i]);
      hostOps[i].output = dataOf(shadows[i]);
      hostLocals[i] = &hostOps[i];
    }
    dev.synchronize(device);
    hostAllreduceBatch(batch, hostLocals);
    for (size_t i = 0; i < batch.size(); ++i) {
      if (locals[i] != nullptr)
        dev.copy(device, locals[i]->output, shadows[i].data(), shadows[i].size());
    }
    dev.synchronize(device);
    return;
  }

  AllreduceOptions options;
  options.op = meta.reduceOp;
  if (batch.size() == 1 && locals[0] != nullptr) {
    LocalOp* local = locals[0];
    phaseBegin(local, "HVD_ALLREDUCE");
    dev.route({local->input, local->output})
        ->allreduce(local->input, local->output, count(0), meta.dtype, options);
    phaseEnd(local);
    return;
  }
  size_t total = 0;
  size_t largestMissing = 0;  // a joined rank contributes zeros for the ops it lacks
  for (size_t i = 0; i < batch.size(); ++i) {
    total += count(i);
    if (locals[i] == nullptr) largestMissing = std::max(largestMissing, count(i) * elem);
  }
  // Zeros come from host memory (hvd has no device memset); one buffer serves every member and
  // stays valid until the synchronize at the end.
  uint8_t* zeros = largestMissing > 0 ? fusionBuffer(largestMissing) : nullptr;
  if (zeros != nullptr) std::memset(zeros, 0, largestMissing);
  auto* buffer = static_cast<uint8_t*>(dev.scratch(device, total * elem));
  size_t offset = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    const size_t bytes = count(i) * elem;
    if (locals[i] != nullptr) {
      phaseBegin(locals[i], "MEMCPY_IN_FUSION_BUFFER");
      dev.copy(device, buffer + offset, locals[i]->input, bytes);
      phaseEnd(locals[i]);
    } else {
      dev.copy(device, buffer + offset, zeros, bytes);
    }
    offset += bytes;
  }
  for (LocalOp* local : locals) phaseBegin(local, "HVD_ALLREDUCE");
  dev.route({buffer})->allreduce(buffer, buffer, total, meta.dtype, options);
  for (LocalOp* local : locals) phaseEnd(local);
  offset = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    const size_t bytes = count(i) * elem;
    if (locals[i] != nullptr) {
      phaseBegin(locals[i], "MEMCPY_OUT_FUSION_BUFFER");
      dev.copy(device, locals[i]->output, buffer + offset, bytes);
      phaseEnd(locals[i]);
    }
    offset += bytes;
  }
  dev.synchronize(device);
}

void Executor::hostAllreduceBatch(const std::vector<const Response*>& batch,
                                  const std::vector<LocalOp*>& locals) {
  const Request& meta = batch.front()->request;
  const DataType type = meta.dtype;
  const DataType wire = wireType(meta);
  const bool compressed = wire != type;
  const int n = context_.size();
  // An average that must not be rounded before the postscale: summed, then divided by n in
  // float64 with the postscale (compressed data is summed in float16 and divided after the
  // cast back; integers are rounded once, after both, as Horovod's float64 scaling does).
  const bool divideLate = meta.reduceOp == ReduceOp::kAverage &&
                          (compressed || (!isFloat(type) && meta.postscale != 1.0));
  const ReduceOp op = divideLate ? ReduceOp::kSum : meta.reduceOp;
  const int divisor = divideLate ? n : 1;

  // Nothing to convert on the way in: one segmented allreduce straight from the members'
  // inputs to their outputs (no fusion buffer copies; a rank that has joined reduces zeros),
  // then the postscale per member.
  if (meta.prescale == 1.0 && !compressed) {
    const size_t elem = dataTypeSize(type);
    size_t missing = 0;
    for (size_t i = 0; i < batch.size(); ++i) {
      if (locals[i] == nullptr) missing += static_cast<size_t>(batch[i]->request.elements());
    }
    uint8_t* zeros = missing > 0 ? fusionBuffer(missing * elem) : nullptr;
    if (zeros != nullptr) std::memset(zeros, 0, missing * elem);
    std::vector<coll::AllreduceSegment> segments;
    segments.reserve(batch.size());
    for (size_t i = 0; i < batch.size(); ++i) {
      const size_t count = static_cast<size_t>(batch[i]->request.elements());
      if (locals[i] != nullptr) {
        segments.push_back({inputOf(locals[i]), outputOf(locals[i]), count});
      } else {
        segments.push_back({zeros, zeros, count});
        zeros += count * elem;
      }
    }
    for (LocalOp* local : locals) phaseBegin(local, "HVD_ALLREDUCE");
    hostFor(op).allreduceSegments(segments, type, {op});
    for (LocalOp* local : locals) phaseEnd(local);
    if (meta.postscale != 1.0) {
      for (const auto& s : segments) {
        convertScaled(type, s.output, type, s.output, s.count, meta.postscale, divisor);
      }
    }
    return;
  }

  const size_t wireSize = dataTypeSize(wire);
  size_t total = 0;
  for (const Response* r : batch) total += static_cast<size_t>(r->request.elements());
  uint8_t* buffer = fusionBuffer(total * wireSize);
  size_t offset = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    const size_t count = static_cast<size_t>(batch[i]->request.elements());
    uint8_t* at = buffer + offset * wireSize;
    if (locals[i] != nullptr) {
      phaseBegin(locals[i], "MEMCPY_IN_FUSION_BUFFER");
      convertScaled(type, locals[i]->input, wire, at, count, meta.prescale, 1);
      phaseEnd(locals[i]);
    } else {
      std::memset(at, 0, count * wireSize);  // a joined rank contributes zeros
    }
    offset += count;
  }
  for (LocalOp* local : locals) phaseBegin(local, "HVD_ALLREDUCE");
  if (op == ReduceOp::kAdasum) {
    // Each member stays its own vector inside the fusion buffer.
    std::vector<coll::AllreduceSegment> members;
    offset = 0;
    for (const Response* r : batch) {
      const size_t count = static_cast<size_t>(r->request.elements());
      members.push_back({buffer + offset * wireSize, buffer + offset * wireSize, count});
      offset += count;
    }
    hostFor(op).allreduceSegments(members, wire, {op});
  } else {
    host_.allreduce(buffer, buffer, total, wire, {op});
  }
  for (LocalOp* local : locals) phaseEnd(local);
  offset = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    const size_t count = static_cast<size_t>(batch[i]->request.elements());
    if (locals[i] != nullptr) {
      phaseBegin(locals[i], "MEMCPY_OUT_FUSION_BUFFER");
      convertScaled(wire, buffer + offset * wireSize, type, locals[i]->output, count,
                    meta.postscale, divisor);
      phaseEnd(locals[i]);
    }
    offset += count;
  }
}

void Executor::allgather(const Response& response, LocalOp* local) {
  const Request& meta = response.request;
  const size_t elem = dataTypeSize(meta.dtype);
  const int64_t rowElements = meta.rowElements();
  std::vector<size_t> counts;
  int64_t rows = 0;
  for (const Request& r : response.perRank) {
    counts.push_back(static_cast<size_t>(r.shape[0] * rowElements));
    rows += r.shape[0];
  }
  const int me = context_.rank();
  auto& out = local->state->mutableOutput();
  out.resize(static_cast<size_t>(rows * rowElements) * elem);
  ++counters_.collectives;
  counters_.bytes += out.size();
  host_.allgather(inputOf(local), counts[me], dataOf(out), counts, meta.dtype);
  Shape shape = local->request.shape;
  shape[0] = rows;
  local->state->mutableOutputShape() = shape;
}

void Executor::broadcast(const Response& response, LocalOp* local) {
  const Request& meta = response.request;
  ++counters_.collectives;
  counters_.bytes += meta.bytes();
  if (meta.device >= 0) {
    devices(meta)
        .route({local->output})
        ->broadcast(local->output, static_cast<size_t>(meta.elements()), meta.dtype, {meta.root});
    return;
  }
  host_.broadcast(local->output, static_cast<size_t>(meta.elements()), meta.dtype, {meta.root});
}

void Executor::reducescatter(const Response& response, LocalOp* local) {
  const Request& meta = response.request;
  const size_t elem = dataTypeSize(meta.dtype);
  const size_t count = static_cast<size_t>(meta.elements());
  const size_t rowElements = static_cast<size_t>(meta.rowElements());
  const auto counts = coll::reducescatterCounts(count, context_.size(), rowElements);
  const size_t mine = counts[context_.rank()];
  const void* input = inputOf(local);
  if (meta.prescale != 1.0) {
    uint8_t* scaled = fusionBuffer(count * elem);
    convertScaled(meta.dtype, input, meta.dtype, scaled, count, meta.prescale, 1);
    input = scaled;
  }
  auto& out = local->state->mutableOutput();
  out.resize(mine * elem);
  ++counters_.collectives;
  counters_.bytes += count * elem;
  // As in hostAllreduceBatch: an integer average with a postscale is rounded once, at the end.
  const bool divideLate =
      meta.reduceOp == ReduceOp::kAverage && !isFloat(meta.dtype) && meta.postscale != 1.0;
  ReducescatterOptions options;
  options.op = divideLate ? ReduceOp::kSum : meta.reduceOp;
  options.rowElements = rowElements;
  host_.reducescatter(input, dataOf(out), count, meta.dtype, options);
  if (meta.postscale != 1.0) {
    convertScaled(meta.dtype, out.data(), meta.dtype, out.data(), mine, meta.postscale,
                  divideLate ? context_.size() : 1);
  }
  Shape shape = meta.shape;
  shape[0] = static_cast<int64_t>(mine / rowElements);
  local->state->mutableOutputShape() = shape;
}

void Executor::alltoall(const Response& response, LocalOp* local) {
  const Request& meta = response.request;
  const int me = context_.rank();
  const size_t elem = dataTypeSize(meta.dtype);
  const size_t rowElements = static_cast<size_t>(meta.rowElements());
  std::vector<size_t> sendCounts;
  for (int64_t rows : local->request.splits) sendCounts.push_back(rows * rowElements);
  std::vector<size_t> recvCounts;
  std::vector<int64_t> received;
  int64_t rows = 0;
  for (const Request& r : response.perRank) {
    received.push_back(r.splits[me]);
    recvCounts.push_back(static_cast<size_t>(r.splits[me]) * rowElements);
    rows += r.splits[me];
  }
  auto& out = local->state->mutableOutput();
  out.resize(static_cast<size_t>(rows) * rowElements * elem);
  ++counters_.collectives;
  size_t sent = 0;
  for (size_t c : sendCounts) sent += c;
  counters_.bytes += sent * elem;
  host_.alltoall(inputOf(local), sendCounts, dataOf(out), recvCounts, meta.dtype);
  Shape shape = local->request.shape;
  shape[0] = rows;
  local->state->mutableOutputShape() = shape;
  local->state->mutableSplits() = std::move(received);
}

}  // namespace hvd::engine
