// Wall-clock time as the records, logs and messages of the agent and hvdrun keep it.
#pragma once

#include <chrono>
#include <cstdint>

namespace hvd {

// Milliseconds since the Unix epoch, now.
inline int64_t nowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace hvd
