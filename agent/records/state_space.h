// The room on the file system of the agent's state directory, which the jobs' logs and the
// agent's records share. Logs are the bulk and can lose lines (they say so); records cannot: a
// finished job whose final record is not written reads LOST after a restart, and a queued job
// whose request is not written does not survive one. So:
//
//   * a log leaves `logHeadroom` bytes free on the file system: a line that would eat into it is
//     dropped and counted instead of written, so records still fit when the jobs' output has
//     filled the disk;
//   * the agent keeps a reserve file of `reserveBytes` in the state directory. When a record of a
//     known job cannot be written for want of space (something else filled the file system), the
//     reserve is given up and the write tried once more; it is made again once there is room.
//     New submits never use it: a submit that cannot be recorded is refused (StateWriteError).
//
// How much is free is asked of statvfs(2) at most once per `checkEvery` bytes of log written
// while there is plenty, and before every line once there is little.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "hvd/error.hpp"

namespace hvd::agent::records {

// A state file (record, request, log) that could not be written; the message names the file
// and the system's reason. Its errno says which (ENOSPC and EDQUOT: the file system is full).
class StateWriteError : public BackendError {
 public:
  StateWriteError(const std::string& message, int error) : BackendError(message), errno_(error) {}
  int error() const { return errno_; }

 private:
  int errno_;
};

// Whether `error` (an errno) means the file system has no room: ENOSPC or EDQUOT.
bool isNoSpace(int error);

struct StateSpaceOptions {
  uint64_t logHeadroom = uint64_t{1} << 20;
  uint64_t reserveBytes = uint64_t{256} << 10;
  uint64_t checkEvery = uint64_t{64} << 10;
  // Bytes free for an unprivileged writer on the file system of `dir` (statvfs f_bavail); a fake
  // in tests. Returning UINT64_MAX means "unknown": logs are not held back.
  std::function<uint64_t(const std::string& dir)> freeBytes;
};

class StateSpace {
 public:
  static constexpr const char* kReserveFile = "space-reserve";

  // `dir` exists (the agent made and checked it). Makes the reserve file when there is room.
  explicit StateSpace(std::string dir, StateSpaceOptions options = {});
  StateSpace(const StateSpace&) = delete;
  StateSpace& operator=(const StateSpace&) = delete;

  // Whether a log may write `bytes` now without eating into the headroom. Thread-safe.
  bool logMayWrite(uint64_t bytes);
  // Runs `write`, which returns false with errno set when it fails; when it failed for want of
  // space and the reserve is there, gives the reserve up and runs it once more. errno is the
  // last attempt's. Thread-safe.
  bool writeUsingReserve(const std::function<bool()>& write);
  // Makes the reserve again if it was given up and the file system has room for it and the
  // headroom. Thread-safe.
  void restoreReserve();
  bool hasReserve() const;
  // "<free> free in <dir>" for messages.
  std::string describe() const;

 private:
  uint64_t freeBytes() const;
  bool makeReserve();  // under mutex_

  const std::string dir_;
  const StateSpaceOptions options_;
  mutable std::mutex mutex_;
  bool reserved_ = false;
  uint64_t room_ = 0;  // log bytes that may be written before asking statvfs again
};

}  // namespace hvd::agent::records
