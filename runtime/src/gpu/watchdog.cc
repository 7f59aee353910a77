// The NCCL watchdog (see watchdog.h).
#include "gpu/watchdog.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "hvd/error.hpp"
#include "hvd_support/logging.h"

namespace hvd::gpu {
namespace {

using Clock = std::chrono::steady_clock;

// "300 s", "0.2 s", "1.25 s".
std::string seconds(std::chrono::milliseconds d) {
  const long long ms = d.count();
  std::string text = std::to_string(ms / 1000);
  if (ms % 1000 != 0) {
    std::string fraction = std::to_string(1000 + ms % 1000).substr(1);
    while (fraction.back() == '0') fraction.pop_back();
    text += "." + fraction;
  }
  return text + " s";
}

std::string where(const std::string& name, int rank, const std::string& host) {
  return "communicator '" + name + "' on rank " + std::to_string(rank) + " (host " + host + ")";
}

WatchdogOptions withDefaults(WatchdogOptions options) {
  if (!options.die) {
    options.die = [](const std::string& message) {
      const auto log = logging::get("gpu");
      log->critical("{}", message);
      log->flush();
      std::_Exit(kWatchdogExitCode);
    };
  }
  return options;
}

}  // namespace

Watchdog::Watchdog(NcclApi& nccl, WatchdogOptions options)
    : nccl_(nccl), options_(withDefaults(std::move(options))), thread_([this] { run(); }) {}

Watchdog::~Watchdog() {
  {
    Lock lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  // The watchdog thread returns from a failure only once the aborts are done.
  if (aborter_.joinable()) aborter_.join();
}

void Watchdog::watch(NcclComm comm, const std::string& name, int rank, const std::string& host) {
  Lock lock(mutex_);
  auto it = std::find_if(watched_.begin(), watched_.end(),
                         [&](const Watched& w) { return w.comm == comm; });
  if (it == watched_.end()) it = watched_.insert(watched_.end(), Watched{comm, "", 0, ""});
  it->name = name;
  it->rank = rank;
  it->host = host;
}

void Watchdog::unwatch(NcclComm comm) {
  Lock lock(mutex_);
  watched_.erase(std::remove_if(watched_.begin(), watched_.end(),
                                [&](const Watched& w) { return w.comm == comm; }),
                 watched_.end());
  for (auto it = inFlight_.begin(); it != inFlight_.end();) {
    it = it->second.comm == comm ? inFlight_.erase(it) : std::next(it);
  }
  // A poll in progress may hold comm in its snapshot; the owner may destroy comm once we return.
  if (std::this_thread::get_id() != thread_.get_id()) {
    changed_.wait(lock, [&] { return !polling_; });
  }
}

Watchdog::OpToken Watchdog::opStarted(NcclComm comm, const std::string& opName) {
  Lock lock(mutex_);
  if (find(comm) == nullptr) {
    throw InternalError("the NCCL watchdog does not watch the communicator of " + opName);
  }
  const OpToken token = nextToken_++;
  inFlight_.emplace(token, InFlight{comm, opName, Clock::now()});
  return token;
}

void Watchdog::opFinished(OpToken token) {
  Lock lock(mutex_);
  inFlight_.erase(token);
}

void Watchdog::requestStop(const std::string& reason) {
  {
    Lock lock(mutex_);
    if (failed_ || !stopReason_.empty()) return;
    stopReason_ = reason.empty() ? "the job was stopped" : reason;
  }
  wake_.notify_all();
}

bool Watchdog::failed() const {
  Lock lock(mutex_);
  return failed_;
}

std::string Watchdog::failureMessage() const {
  Lock lock(mutex_);
  return failureMessage_;
}

const Watchdog::Watched* Watchdog::find(NcclComm comm) const {
  for (const Watched& w : watched_) {
    if (w.comm == comm) return &w;
  }
  return nullptr;
}

void Watchdog::run() {
  Lock lock(mutex_);
  while (true) {
    wake_.wait_for(lock, options_.pollInterval, [&] { return stopping_ || !stopReason_.empty(); });
    // A stop requested just before the destructor still aborts: the caller asked for it.
    if (stopping_ && stopReason_.empty()) break;
    const std::string cause = poll(lock);
    if (!cause.empty()) {
      // After a failure there is nothing left to watch: every communicator is aborted.
      fail(lock, cause);
      break;
    }
  }
}

std::string Watchdog::poll(Lock& lock) {
  // An error NCCL reports is the root cause even when a stop was requested in the meantime.
  std::string cause = checkAsyncErrors(lock);
  if (cause.empty()) cause = stopReason_;
  if (cause.empty()) cause = checkOpAges();
  return cause;
}

std::string Watchdog::checkAsyncErrors(Lock& lock) {
  // NCCL is called outside the mutex, so that ops can start and finish meanwhile; polling_
  // keeps unwatch from returning while a communicator it removes is still being asked.
  const std::vector<Watched> comms = watched_;
  polling_ = true;
  lock.unlock();
  std::string cause;
  for (const Watched& w : comms) {
    NcclResult asyncError = NcclResult::kSuccess;
    const NcclResult called = nccl_.commGetAsyncError(w.comm, &asyncError);
    const NcclResult result = called != NcclResult::kSuccess ? called : asyncError;
    if (result == NcclResult::kSuccess || result == NcclResult::kInProgress) continue;
    const std::string last = nccl_.lastError(w.comm);
    cause =
        "NCCL " + where(w.name, w.rank, w.host) +
        (called != NcclResult::kSuccess ? " failed ncclCommGetAsyncError with " : " reported ") +
        ncclResultName(result) + ": " + nccl_.errorString(result) +
        (last.empty() ? "" : " (" + last + ")");
    break;
  }
  lock.lock();
  polling_ = false;
  changed_.notify_all();
  return cause;
}

std::string Watchdog::checkOpAges() const {
  if (options_.opTimeout.count() <= 0 || inFlight_.empty()) return "";
  const InFlight* oldest = nullptr;
  for (const auto& [token, op] : inFlight_) {
    if (oldest == nullptr || op.started < oldest->started) oldest = &op;
  }
  if (Clock::now() - oldest->started < options_.opTimeout) return "";
  const Watched* w = find(oldest->comm);  // unwatch drops a communicator's ops, so never null
  return oldest->opName + " on communicator '" + w->name + "' has not finished after " +
         seconds(options_.opTimeout) + " on rank " + std::to_string(w->rank) + " (host " + w->host +
         ")";
}

void Watchdog::fail(Lock& lock, const std::string& cause) {
  failed_ = true;
  const std::vector<Watched> comms = watched_;
  // The runtime reports the failure (onFailure); this line dates the abort in the log.
  logging::get("gpu")->info("aborting {} NCCL communicator(s): {}", comms.size(), cause);
  aborting_ = 0;
  abortStarted_ = Clock::now();
  abortsDone_ = false;
  aborter_ = std::thread([this, comms] { abortAll(comms); });

  // Each abort gets abortTimeout; the first that overruns it ends the process.
  bool died = false;
  while (!abortsDone_) {
    if (died) {
      changed_.wait(lock, [&] { return abortsDone_; });
      break;
    }
    const size_t current = aborting_;
    const bool moved = changed_.wait_until(lock, abortStarted_ + options_.abortTimeout,
                                           [&] { return abortsDone_ || aborting_ != current; });
    if (moved) continue;
    died = true;
    const std::string what = options_.abortAll || current >= comms.size()
                                 ? std::string("aborting the NCCL communicators")
                                 : "ncclCommAbort of communicator '" + comms[current].name + "'";
    const std::string message = cause + "; " + what + " did not return within " +
                                seconds(options_.abortTimeout) +
                                "; ending the process so the GPU is released";
    lock.unlock();
    options_.die(message);
    lock.lock();
  }

  std::string message = cause + "; ";
  if (options_.abortAll) {
    message += "aborted the job's NCCL communicators";
  } else if (comms.empty()) {
    message += "there were no NCCL communicators to abort";
  } else if (comms.size() == 1) {
    message += "aborted communicator '" + comms[0].name + "'";
  } else {
    message += "aborted all " + std::to_string(comms.size()) + " communicators";
  }
  if (!abortErrors_.empty()) {
    message += " (ncclCommAbort failed for ";
    for (size_t i = 0; i < abortErrors_.size(); ++i) {
      message += (i > 0 ? ", " : "") + abortErrors_[i];
    }
    message += ")";
  }
  failureMessage_ = message;
  lock.unlock();
  if (options_.onFailure) options_.onFailure(message);
  lock.lock();
}

void Watchdog::abortAll(const std::vector<Watched>& comms) {
  if (options_.abortAll) options_.abortAll();
  for (size_t i = 0; i < comms.size() && !options_.abortAll; ++i) {
    {
      Lock lock(mutex_);
      aborting_ = i;
      abortStarted_ = Clock::now();
    }
    changed_.notify_all();
    const NcclResult result = nccl_.commAbort(comms[i].comm);
    if (result != NcclResult::kSuccess) {
      Lock lock(mutex_);
      abortErrors_.push_back("'" + comms[i].name + "': " + ncclResultName(result));
    }
  }
  {
    Lock lock(mutex_);
    abortsDone_ = true;
  }
  changed_.notify_all();
}

}  // namespace hvd::gpu
