#include "agent/records/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace hvd::agent::records {

bool writeFileAtomically(const std::string& path, std::string_view data, mode_t mode) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return false;  // errno says why
  bool ok = true;
  for (size_t done = 0; ok && done < data.size();) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      if (n == 0) errno = ENOSPC;  // a write that takes nothing: the file system is full
      ok = false;
    }
  }
  ok = ok && ::fsync(fd) == 0;
  int error = ok ? 0 : errno;
  ::close(fd);
  if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    error = errno;
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    errno = error;  // the failing step's, not the clean-up's
  }
  return ok;
}

}  // namespace hvd::agent::records
