#include "launcher/keygen.h"

#include <sys/stat.h>

#include <filesystem>
#include <system_error>

#include "agent/auth/cluster_key.h"
#include "hvd/error.hpp"

namespace hvd::launcher {

int runKeygen(const std::string& path, std::FILE* out, std::FILE* err) {
  const std::filesystem::path file(path);
  const std::filesystem::path parent = file.parent_path();
  std::error_code ec;
  if (!parent.empty() && !std::filesystem::exists(parent, ec)) {
    std::filesystem::create_directories(parent, ec);
    // Only the directory we name is tightened; directories above it keep what they were given.
    if (!ec && ::chmod(parent.c_str(), 0700) != 0)
      ec = std::error_code(errno, std::generic_category());
    if (ec) {
      std::fprintf(err, "hvdrun keygen: cannot create %s: %s\n", parent.c_str(),
                   ec.message().c_str());
      return 2;
    }
  }
  try {
    const agent::auth::ClusterKey key = agent::auth::ClusterKey::generate(path);
    std::fprintf(out,
                 "hvdrun keygen: wrote a new cluster key to %s (mode 0600, fingerprint %s)\n"
                 "Copy it to every host (same path, mode 0600, owned by the user that runs "
                 "hvdagent).\n",
                 path.c_str(), key.fingerprint().c_str());
    return 0;
  } catch (const InvalidArgumentError& e) {
    std::fprintf(err, "hvdrun keygen: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(err, "hvdrun keygen: %s\n", e.what());
    return 1;
  }
}

}  // namespace hvd::launcher
