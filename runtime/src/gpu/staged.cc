#include "gpu/staged.h"

#include <cstring>
#include <numeric>

#include "collectives/collectives.h"
#include "hvd/error.hpp"

namespace hvd::gpu {

StagedCollectives::StagedCollectives(CudaApi& cuda, transport::Context& context)
    : cuda_(cuda), context_(context), stream_(cuda) {}

StagedCollectives::~StagedCollectives() {
  for (Pinned& p : pinned_) {
    if (p.data != nullptr) cuda_.freePinnedHost(p.data);
  }
}

bool StagedCollectives::enter(const char* op, std::initializer_list<const void*> ptrs) {
  const int device = buffersDevice(cuda_, op, ptrs, false);
  if (device < 0) return false;
  stream_.enter(device);
  return true;
}

void* StagedCollectives::pinned(int slot, size_t bytes) {
  Pinned& p = pinned_[slot];
  if (p.bytes < bytes) {
    if (p.data != nullptr) cuda_.freePinnedHost(p.data);
    p.data = nullptr;
    p.bytes = 0;
    p.data = cuda_.allocPinnedHost(bytes);
    p.bytes = bytes;
  }
  return p.data;
}

void* StagedCollectives::hostView(const void* user, size_t bytes, int slot, bool copyIn) {
  if (user == nullptr || cuda_.deviceOf(user) < 0) return const_cast<void*>(user);
  void* view = pinned(slot, bytes > 0 ? bytes : 1);
  if (copyIn && bytes > 0) cuda_.copyAsync(view, user, bytes, stream_.stream());
  return view;
}

void StagedCollectives::copyOut(void* user, const void* view, size_t bytes) {
  if (user != view && bytes > 0) cuda_.copyAsync(user, view, bytes, stream_.stream());
}

void StagedCollectives::finish() { cuda_.synchronizeStream(stream_.stream()); }

void StagedCollectives::allreduce(const void* input, void* output, size_t count, DataType type,
                                  const AllreduceOptions& options) {
  if (!enter("allreduce", {input, output})) {
    coll::allreduce(context_, input, output, count, type, options);
    return;
  }
  const size_t bytes = count * dataTypeSize(type);
  void* in = hostView(input, bytes, 0, true);
  // In place on the device: reduce the staged copy in place too.
  void* out = output == input ? in : hostView(output, bytes, 1, false);
  cuda_.synchronizeStream(stream_.stream());
  coll::allreduce(context_, in, out, count, type, options);
  copyOut(output, out, bytes);
  finish();
}

void StagedCollectives::allgather(const void* input, size_t count, void* output,
                                  const std::vector<size_t>& counts, DataType type) {
  if (!enter("allgather", {input, output})) {
    coll::allgather(context_, input, count, output, counts, type);
    return;
  }
  const size_t elem = dataTypeSize(type);
  const size_t total = std::accumulate(counts.begin(), counts.end(), size_t{0});
  void* in = hostView(input, count * elem, 0, true);
  void* out = hostView(output, total * elem, 1, false);
  cuda_.synchronizeStream(stream_.stream());
  coll::allgather(context_, in, count, out, counts, type);
  copyOut(output, out, total * elem);
  finish();
}

void StagedCollectives::broadcast(void* buffer, size_t count, DataType type,
                                  const BroadcastOptions& options) {
  if (!enter("broadcast", {buffer})) {
    coll::broadcast(context_, buffer, count, type, options);
    return;
  }
  const size_t bytes = count * dataTypeSize(type);
  // Only the root's contents matter before the call.
  void* view = hostView(buffer, bytes, 0, context_.rank() == options.root);
  cuda_.synchronizeStream(stream_.stream());
  coll::broadcast(context_, view, count, type, options);
  copyOut(buffer, view, bytes);
  finish();
}

void StagedCollectives::reducescatter(const void* input, void* output, size_t count, DataType type,
                                      const ReducescatterOptions& options) {
  if (!enter("reducescatter", {input, output})) {
    coll::reducescatter(context_, input, output, count, type, options);
    return;
  }
  const size_t elem = dataTypeSize(type);
  const auto counts = coll::reducescatterCounts(count, context_.size(), options.rowElements);
  const size_t mine = counts[context_.rank()];
  void* in = hostView(input, count * elem, 0, true);
  void* out = hostView(output, mine * elem, 1, false);
  cuda_.synchronizeStream(stream_.stream());
  coll::reducescatter(context_, in, out, count, type, options);
  copyOut(output, out, mine * elem);
  finish();
}

void StagedCollectives::alltoall(const void* input, const std::vector<size_t>& sendCounts,
                                 void* output, const std::vector<size_t>& recvCounts,
                                 DataType type) {
  if (!enter("alltoall", {input, output})) {
    coll::alltoall(context_, input, sendCounts, output, recvCounts, type);
    return;
  }
  const size_t elem = dataTypeSize(type);
  const size_t sent = std::accumulate(sendCounts.begin(), sendCounts.end(), size_t{0});
  const size_t received = std::accumulate(recvCounts.begin(), recvCounts.end(), size_t{0});
  void* in = hostView(input, sent * elem, 0, true);
  void* out = hostView(output, received * elem, 1, false);
  cuda_.synchronizeStream(stream_.stream());
  coll::alltoall(context_, in, sendCounts, out, recvCounts, type);
  copyOut(output, out, received * elem);
  finish();
}

}  // namespace hvd::gpu
