#include "agent/records/state_space.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <limits>
#include <utility>

namespace hvd::agent::records {
namespace {

constexpr uint64_t kUnknown = std::numeric_limits<uint64_t>::max();

uint64_t statvfsFreeBytes(const std::string& dir) {
  struct statvfs fs {};
  if (::statvfs(dir.c_str(), &fs) != 0) return kUnknown;
  return static_cast<uint64_t>(fs.f_bavail) * static_cast<uint64_t>(fs.f_frsize);
}

std::string kib(uint64_t bytes) { return std::to_string(bytes >> 10) + " KiB"; }

}  // namespace

bool isNoSpace(int error) { return error == ENOSPC || error == EDQUOT; }

StateSpace::StateSpace(std::string dir, StateSpaceOptions options)
    : dir_(std::move(dir)), options_(std::move(options)) {
  std::lock_guard<std::mutex> lock(mutex_);
  reserved_ = makeReserve();
}

uint64_t StateSpace::freeBytes() const {
  return options_.freeBytes ? options_.freeBytes(dir_) : statvfsFreeBytes(dir_);
}

bool StateSpace::makeReserve() {
  if (options_.reserveBytes == 0) return false;
  const std::string path = dir_ + "/" + kReserveFile;
  // O_NOFOLLOW: a link planted in its place is not followed (the directory is the agent's own,
  // trusted_path.h, but the file is written before anything else reads it).
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  // Real blocks, not a sparse file: giving the reserve up must free space.
  const int error = ::posix_fallocate(fd, 0, static_cast<off_t>(options_.reserveBytes));
  ::close(fd);
  if (error != 0) {
    ::unlink(path.c_str());
    return false;
  }
  return true;
}

bool StateSpace::logMayWrite(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (bytes <= room_) {
    room_ -= bytes;
    return true;
  }
  const uint64_t free = freeBytes();
  const uint64_t spare = free == kUnknown              ? kUnknown
                         : free > options_.logHeadroom ? free - options_.logHeadroom
                                                       : 0;
  // Several jobs' logs share this count, so together they overrun the headroom by at most one
  // checkEvery between two looks at the file system.
  room_ = std::min(spare, std::max(options_.checkEvery, bytes));
  if (bytes > room_) {
    room_ = 0;
    return false;
  }
  room_ -= bytes;
  return true;
}

bool StateSpace::writeUsingReserve(const std::function<bool()>& write) {
  if (write()) return true;
  int error = errno;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!isNoSpace(error) || !reserved_) {
      errno = error;
      return false;
    }
    ::unlink((dir_ + "/" + kReserveFile).c_str());
    reserved_ = false;
    room_ = 0;  // what was freed is for records: logs look again
  }
  return write();
}

void StateSpace::restoreReserve() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (reserved_) return;
  const uint64_t free = freeBytes();
  if (free == kUnknown || free < options_.reserveBytes + options_.logHeadroom) return;
  reserved_ = makeReserve();
}

bool StateSpace::hasReserve() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return reserved_;
}

std::string StateSpace::describe() const {
  const uint64_t free = freeBytes();
  return (free == kUnknown ? std::string("unknown space") : kib(free)) + " free in " + dir_;
}

}  // namespace hvd::agent::records
