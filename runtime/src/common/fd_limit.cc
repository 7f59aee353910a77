#include "hvd_support/fd_limit.h"

#include <sys/resource.h>

namespace hvd {

FileLimit raiseOpenFileLimit() noexcept {
  FileLimit result;
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return result;
  result.before = result.now = static_cast<uint64_t>(limit.rlim_cur);
  result.hard = static_cast<uint64_t>(limit.rlim_max);
  if (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= limit.rlim_max) return result;
  rlimit raised = limit;
  raised.rlim_cur = limit.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) result.now = static_cast<uint64_t>(raised.rlim_cur);
  return result;
}

}  // namespace hvd
