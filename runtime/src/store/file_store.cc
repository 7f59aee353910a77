#include "store/file_store.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "common/syscall_error.h"
#include "hvd/error.hpp"

namespace hvd::store {
namespace {

// Polling cadence of get/wait: the first retries are quick so that a rendezvous whose keys are
// a moment late costs little, and the cap keeps a long wait from hammering a shared
// filesystem's metadata server.
constexpr std::chrono::milliseconds kFirstPoll{1};
constexpr std::chrono::milliseconds kMaxPoll{50};

// NAME_MAX is 255 on every filesystem we target; stay below it.
constexpr size_t kMaxFileName = 250;

constexpr const char* kLockFileName = ".lock";

// Holds an exclusive flock(2) on the directory's lock file for its lifetime. flock locks
// belong to the open file description, so two threads of one process that each open the file
// exclude each other just as two processes do.
class DirectoryLock {
 public:
  explicit DirectoryLock(const std::string& path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throwSyscall("cannot open the file store lock " + path);
    while (::flock(fd_, LOCK_EX) != 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd_);
      throwSyscall("cannot lock the file store lock " + path, err);
    }
  }
  ~DirectoryLock() { ::close(fd_); }  // closing the last descriptor releases the lock
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

 private:
  int fd_ = -1;
};

void writeAll(int fd, const char* data, size_t size, const std::string& path) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      throwSyscall("cannot write " + path);
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
}

// Sleeps `pause` (never past `deadline`) and doubles it up to kMaxPoll.
void sleepBeforeNextPoll(std::chrono::milliseconds& pause,
                         std::chrono::steady_clock::time_point deadline) {
  const auto left = deadline - std::chrono::steady_clock::now();
  if (left > std::chrono::steady_clock::duration::zero()) {
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(pause, left));
  }
  pause = std::min(pause * 2, kMaxPoll);
}

}  // namespace

FileStore::FileStore(std::string directory) : directory_(std::move(directory)) {
  struct stat st {};
  if (::stat(directory_.c_str(), &st) != 0) {
    throwSyscall("file store directory " + directory_ + " is not usable");
  }
  if (!S_ISDIR(st.st_mode)) {
    throw InvalidArgumentError("file store path " + directory_ + " is not a directory");
  }
}

std::string FileStore::encodeKey(const std::string& key) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  // The leading 'k' keeps every key file apart from the lock and temporary files (which start
  // with '.') and gives the empty key a name.
  std::string name = "k";
  for (unsigned char c : key) {
    const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '_';
    if (safe) {
      name.push_back(static_cast<char>(c));
    } else {
      name.push_back('%');
      name.push_back(kHex[c >> 4]);
      name.push_back(kHex[c & 0xF]);
    }
  }
  if (name.size() > kMaxFileName) {
    throw InvalidArgumentError("store key '" + key.substr(0, 64) + "...' is too long for a " +
                               "file store (" + std::to_string(name.size()) +
                               " bytes once encoded, limit " + std::to_string(kMaxFileName) + ")");
  }
  return name;
}

std::string FileStore::pathOf(const std::string& key) const {
  return directory_ + "/" + encodeKey(key);
}

bool FileStore::readValue(const std::string& key, Bytes* value) const {
  const std::string path = pathOf(key);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return false;
    throwSyscall("cannot open " + path);
  }
  value->clear();
  char buffer[64 * 1024];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      throwSyscall("cannot read " + path, err);
    }
    if (n == 0) break;
    value->append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return true;
}

void FileStore::writeValue(const std::string& key, const Bytes& value) {
  const std::string path = pathOf(key);
  std::string temp = directory_ + "/.tmp.XXXXXX";
  const int fd = ::mkstemp(temp.data());
  if (fd < 0) throwSyscall("cannot create a temporary file in " + directory_);
  try {
    writeAll(fd, value.data(), value.size(), temp);
  } catch (...) {
    ::close(fd);
    ::unlink(temp.c_str());
    throw;
  }
  // mkstemp creates 0600; other users' ranks of the same job may need to read the value.
  ::fchmod(fd, 0644);
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    throwSyscall("cannot write " + temp, err);
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    throwSyscall("cannot rename " + temp + " to " + path, err);
  }
}

void FileStore::set(const std::string& key, const Bytes& value) {
  DirectoryLock lock(directory_ + "/" + kLockFileName);
  writeValue(key, value);
}

Bytes FileStore::get(const std::string& key, Timeout timeout) {
  const auto deadline = deadlineAfter(timeout);
  auto pause = kFirstPoll;
  Bytes value;
  while (!readValue(key, &value)) {
    if (std::chrono::steady_clock::now() >= deadline) {
      throw TimeoutError(timeoutMessage({key}, {key}, timeout));
    }
    sleepBeforeNextPoll(pause, deadline);
  }
  return value;
}

int64_t FileStore::add(const std::string& key, int64_t delta) {
  DirectoryLock lock(directory_ + "/" + kLockFileName);
  Bytes current;
  const bool present = readValue(key, &current);
  const int64_t result = addToCounter(key, present ? &current : nullptr, delta);
  writeValue(key, std::to_string(result));
  return result;
}

Bytes FileStore::compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) {
  DirectoryLock lock(directory_ + "/" + kLockFileName);
  Bytes current;
  const bool present = readValue(key, &current);
  if (!present) {
    if (!expected.empty()) return Bytes();
  } else if (current != expected) {
    return current;
  }
  writeValue(key, desired);
  return desired;
}

void FileStore::wait(const std::vector<std::string>& keys, Timeout timeout) {
  const auto deadline = deadlineAfter(timeout);
  auto pause = kFirstPoll;
  while (true) {
    const std::vector<std::string> missing = missingKeys(keys);
    if (missing.empty()) return;
    if (std::chrono::steady_clock::now() >= deadline) {
      throw TimeoutError(timeoutMessage(keys, missing, timeout));
    }
    sleepBeforeNextPoll(pause, deadline);
  }
}

bool FileStore::check(const std::vector<std::string>& keys) { return missingKeys(keys).empty(); }

void FileStore::erase(const std::string& key) {
  DirectoryLock lock(directory_ + "/" + kLockFileName);
  const std::string path = pathOf(key);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) throwSyscall("cannot remove " + path);
}

std::vector<std::string> FileStore::missingKeys(const std::vector<std::string>& keys) const {
  std::vector<std::string> missing;
  for (const auto& key : keys) {
    const std::string path = pathOf(key);
    if (::access(path.c_str(), F_OK) != 0) {
      if (errno != ENOENT) throwSyscall("cannot check " + path);
      missing.push_back(key);
    }
  }
  return missing;
}

}  // namespace hvd::store
