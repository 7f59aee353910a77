// The open-file limit of this process. A job's store serves one connection per rank, an agent
// one per local worker and stream, a rank one socket per peer it talks to: the common default
// soft limit of 1024 is reached at a few hundred ranks, long before the hard limit (often
// 524288 or more) that the process may raise it to without privilege.
#pragma once

#include <cstdint>

namespace hvd {

struct FileLimit {
  uint64_t before = 0;  // the soft limit found
  uint64_t now = 0;     // the soft limit after the call (the hard limit when it could be raised)
  uint64_t hard = 0;
};

// Raises the soft RLIMIT_NOFILE to the hard limit (never lowers it). Never throws: a process
// that cannot read or raise its limit keeps the one it has.
FileLimit raiseOpenFileLimit() noexcept;

}  // namespace hvd
