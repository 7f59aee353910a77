// hvd_process_sets.h over the C++ API (hvd/process_sets.hpp).
#include <algorithm>
#include <vector>

#include "core/c_api_support.h"
#include "hvd/hvd.hpp"
#include "hvd/hvd_process_sets.h"
#include "hvd/process_sets.hpp"

using hvd::capi::guarded;

namespace {

void checkOut(const void* out) {
  if (out == nullptr) throw hvd::InvalidArgumentError("the output pointer is null");
}

// Writes at most `capacity` values and the full count, like hvd_handle_output_shape.
void copyOut(const std::vector<int>& values, int* out, int capacity, int* count) {
  checkOut(count);
  if (capacity < 0) throw hvd::InvalidArgumentError("capacity is negative");
  if (capacity > 0 && out == nullptr) throw hvd::InvalidArgumentError("the array is null");
  std::copy_n(values.begin(), std::min<size_t>(values.size(), capacity), out);
  *count = static_cast<int>(values.size());
}

std::vector<int> ranksOf(const int* ranks, int nranks) {
  if (nranks < 0) throw hvd::InvalidArgumentError("the number of ranks is negative");
  if (nranks > 0 && ranks == nullptr) throw hvd::InvalidArgumentError("ranks is null");
  return std::vector<int>(ranks, ranks + nranks);
}

// count sets, set i being sizes[i] ranks taken in turn from ranks.
std::vector<std::vector<int>> setsOf(const int* ranks, const int* sizes, int count) {
  if (count < 0) throw hvd::InvalidArgumentError("the number of process sets is negative");
  if (count > 0 && sizes == nullptr) throw hvd::InvalidArgumentError("sizes is null");
  std::vector<std::vector<int>> sets;
  size_t at = 0;
  for (int i = 0; i < count; ++i) {
    if (sizes[i] < 0) throw hvd::InvalidArgumentError("process set size is negative");
    sets.push_back(ranksOf(ranks == nullptr ? nullptr : ranks + at, sizes[i]));
    at += sizes[i];
  }
  return sets;
}

}  // namespace

extern "C" {

hvd_status hvd_init_process_sets(const int* ranks, const int* sizes, int count, int dynamic) {
  return guarded([&] { hvd::init(setsOf(ranks, sizes, count), dynamic != 0); });
}

hvd_status hvd_init_members(const int* members, int nmembers, const int* ranks, const int* sizes,
                            int count, int dynamic) {
  return guarded([&] {
    hvd::initMembers(ranksOf(members, nmembers), setsOf(ranks, sizes, count), dynamic != 0);
  });
}

hvd_status hvd_add_process_set(const int* ranks, int nranks, int* id) {
  return guarded([&] {
    checkOut(id);
    *id = hvd::addProcessSet(ranksOf(ranks, nranks));
  });
}

hvd_status hvd_remove_process_set(int id, int* removed) {
  return guarded([&] {
    checkOut(removed);
    *removed = hvd::removeProcessSet(id) ? 1 : 0;
  });
}

hvd_status hvd_process_set_ids(int* ids, int capacity, int* count) {
  return guarded([&] { copyOut(hvd::processSetIds(), ids, capacity, count); });
}

hvd_status hvd_process_set_ranks(int id, int* ranks, int capacity, int* count) {
  return guarded([&] { copyOut(hvd::processSetRanks(id), ranks, capacity, count); });
}

hvd_status hvd_process_set_size(int id, int* out) {
  return guarded([&] {
    checkOut(out);
    *out = hvd::processSetSize(id);
  });
}

hvd_status hvd_process_set_rank(int id, int* out) {
  return guarded([&] {
    checkOut(out);
    *out = hvd::processSetRank(id);
  });
}

hvd_status hvd_process_set_included(int id, int* out) {
  return guarded([&] {
    checkOut(out);
    *out = hvd::processSetIncluded(id) ? 1 : 0;
  });
}

}  // extern "C"
