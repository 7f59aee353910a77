// This machine's host name, for log prefixes, error messages, the agent's node and host
// identity: one spelling for the runtime, the agent and hvdrun.
#pragma once

#include <unistd.h>

#include <string>

namespace hvd {

// gethostname(2); "localhost" in the (never seen) case that it fails.
inline std::string localHostName() {
  char name[256] = {0};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

}  // namespace hvd
