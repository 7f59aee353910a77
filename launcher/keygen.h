// `hvdrun keygen`: creates the cluster key file every hvdagent and hvdrun of a cluster shares
// (agent/auth/cluster_key.h). The key itself is never printed; its fingerprint identifies it, so
// a user can check that two hosts hold the same key.
#pragma once

#include <cstdio>
#include <string>

namespace hvd::launcher {

// Creates `path` with 32 random bytes, mode 0600. A missing parent directory is created with mode
// 0700 (the default ~/.hvd); an existing file is never overwritten. Prints what it did to `out`,
// errors to `err`. Returns hvdrun's exit code: 0, 2 when the file exists or the path is unusable,
// 1 when a system call failed.
int runKeygen(const std::string& path, std::FILE* out, std::FILE* err);

}  // namespace hvd::launcher
