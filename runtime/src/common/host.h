// This machine's host name, for log prefixes, error messages and host identity.
#pragma once

#include <unistd.h>

#include <string>

namespace hvd {

inline std::string localHostName() {
  char name[256] = {0};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "?";
  return name;
}

}  // namespace hvd
