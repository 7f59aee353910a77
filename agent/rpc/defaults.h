// Defaults shared by hvdagent and hvdrun, so both sides agree without configuration.
#pragma once

#include <cstdlib>
#include <string>

namespace hvd::agent::rpc {

// The port hvdagent listens on and hvdrun contacts when none is given (--listen / --agent-port).
inline constexpr int kDefaultAgentPort = 7475;

// The cluster key file when --key-file is not given: $HVD_KEY_FILE, else ~/.hvd/cluster.key
// (what `hvdrun keygen` writes). Empty when neither HVD_KEY_FILE nor HOME is set.
inline std::string defaultKeyFile() {
  if (const char* path = std::getenv("HVD_KEY_FILE"); path != nullptr && *path != '\0') return path;
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return std::string(home) + "/.hvd/cluster.key";
  }
  return {};
}

}  // namespace hvd::agent::rpc
