#include "collectives/host_collectives.h"

#include "collectives/validate.h"

namespace hvd::coll {

std::vector<size_t> HostCollectives::allgatherCounts(size_t count) {
  const int n = size();
  std::vector<uint64_t> all(n);
  const uint64_t mine = count;
  allgather(&mine, 1, all.data(), std::vector<size_t>(n, 1), DataType::kInt64, Algorithm::kDirect);
  return std::vector<size_t>(all.begin(), all.end());
}

std::vector<size_t> HostCollectives::alltoallCounts(const std::vector<size_t>& sendCounts) {
  const int n = size();
  validateCountsPerRank("alltoall", "sendCounts", sendCounts, n);
  std::vector<uint64_t> send(sendCounts.begin(), sendCounts.end());
  std::vector<uint64_t> recv(n);
  const std::vector<size_t> ones(n, 1);
  alltoall(send.data(), ones, recv.data(), ones, DataType::kInt64);
  return std::vector<size_t>(recv.begin(), recv.end());
}

void RingCollectives::allreduce(const void* input, void* output, size_t count, DataType type,
                                const AllreduceOptions& options) {
  coll::allreduce(context_, input, output, count, type, options);
}

void RingCollectives::allreduceSegments(const std::vector<AllreduceSegment>& segments,
                                        DataType type, const AllreduceOptions& options) {
  coll::allreduceSegments(context_, segments, type, options);
}

void RingCollectives::allgather(const void* input, size_t count, void* output,
                                const std::vector<size_t>& counts, DataType type,
                                Algorithm algorithm) {
  coll::allgather(context_, input, count, output, counts, type, algorithm);
}

void RingCollectives::broadcast(void* buffer, size_t count, DataType type,
                                const BroadcastOptions& options) {
  coll::broadcast(context_, buffer, count, type, options);
}

void RingCollectives::reducescatter(const void* input, void* output, size_t count, DataType type,
                                    const ReducescatterOptions& options) {
  coll::reducescatter(context_, input, output, count, type, options);
}

void RingCollectives::alltoall(const void* input, const std::vector<size_t>& sendCounts,
                               void* output, const std::vector<size_t>& recvCounts, DataType type) {
  coll::alltoall(context_, input, sendCounts, output, recvCounts, type);
}

void RingCollectives::barrier() { coll::barrier(context_); }

std::vector<size_t> RingCollectives::allgatherCounts(size_t count) {
  return coll::allgatherCounts(context_, count);
}

std::vector<size_t> RingCollectives::alltoallCounts(const std::vector<size_t>& sendCounts) {
  return coll::alltoallCounts(context_, sendCounts);
}

std::string RingCollectives::describe() const { return context_.describeTransports(); }

}  // namespace hvd::coll
