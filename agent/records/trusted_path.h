// The state directory is the agent's memory and its to-do list: a queued job found there at
// start-up runs as the agent's user, and a process-group record there is a group the agent
// kills. So nothing in it that another local user could have written is used: the directories
// and every file read from them must belong to the agent's (effective) user and be writable by
// no one else, and a file must be a plain file of a sane size. A symbolic link is judged as
// itself, never followed.
#pragma once

#include <cstdint>
#include <string>

namespace hvd::agent::records {

// "" when `path` is a directory owned by this process's effective user that its group and
// others cannot write; otherwise why not, naming the path, its owner and mode, and the fix.
std::string untrustedDirectory(const std::string& path);

// The same for a plain file about to be read, which must also hold at most `maxBytes`.
std::string untrustedFile(const std::string& path, uint64_t maxBytes);

}  // namespace hvd::agent::records
