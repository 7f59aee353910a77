#include "gpu/comm_cache.h"

#include <utility>

#include "hvd/error.hpp"

namespace hvd::gpu {

CommCache::CommCache(Factory factory) : factory_(std::move(factory)) {}

CommCache::~CommCache() = default;

void CommCache::throwAborted(const std::string& name) const {
  throw BackendError("NCCL communicator '" + name +
                     "' is unavailable: the job's NCCL communicators were aborted" +
                     (reason_.empty() ? "" : " (" + reason_ + ")") +
                     "; they are not re-created within the same job");
}

NcclCommunicator& CommCache::get(const std::string& name) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (cancel_.load()) throwAborted(name);
  auto [it, inserted] = entries_.try_emplace(name);
  Entry& entry = it->second;  // std::map: stays where it is while others are added
  if (!inserted) {
    changed_.wait(lock, [&] { return entry.done || cancel_.load(); });
    if (cancel_.load()) throwAborted(name);
    if (entry.error) std::rethrow_exception(entry.error);
    return *entry.comm;
  }

  // First to ask: create without holding the lock; later askers wait on `changed_`.
  lock.unlock();
  std::unique_ptr<NcclCommunicator> comm;
  std::exception_ptr error;
  try {
    comm = factory_(name, cancel_);
    if (comm == nullptr) {
      throw InternalError("NCCL communicator factory returned nothing for '" + name + "'");
    }
  } catch (...) {
    error = std::current_exception();
  }
  lock.lock();
  // abortAll() may have run meanwhile and could not see this one yet.
  if (comm != nullptr && cancel_.load()) comm->abort();
  entry.comm = std::move(comm);
  entry.error = error;
  entry.done = true;
  changed_.notify_all();
  if (cancel_.load()) throwAborted(name);
  if (entry.error) std::rethrow_exception(entry.error);
  return *entry.comm;
}

std::vector<std::string> CommCache::created() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> names;
  for (const auto& [name, entry] : entries_) {
    if (entry.done && entry.comm != nullptr) names.push_back(name);
  }
  return names;
}

void CommCache::abortAll(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!cancel_.load()) reason_ = reason;
  cancel_.store(true);
  // NcclCommunicator::abort is idempotent, so a second abortAll aborts nothing twice.
  for (auto& [name, entry] : entries_) {
    if (entry.comm != nullptr) entry.comm->abort();
  }
  changed_.notify_all();
}

}  // namespace hvd::gpu
