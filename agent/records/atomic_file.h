// Writing a small file so that a reader (another thread, a restarted agent, a test polling for
// it) sees either the old contents or the new ones, never a torn mix: a temporary file beside
// it, fsync, rename(2). Used for job records, job-history records and --port-file.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

namespace hvd::agent::records {

// Replaces `path` with `data` (file mode `mode` when created). False, with no temporary file
// left behind and errno set to the failing step's error (ENOSPC for a full disk), when any
// step fails.
bool writeFileAtomically(const std::string& path, std::string_view data, mode_t mode = 0600);

}  // namespace hvd::agent::records
