// Converts failing system calls into hvd::BackendError with context, where they are returned.
#pragma once

#include <cerrno>
#include <cstring>
#include <string>

#include "hvd/error.hpp"

namespace hvd {

inline std::string errnoText(int err) { return std::string(std::strerror(err)); }

[[noreturn]] inline void throwSyscall(const std::string& what, int err = errno) {
  throw BackendError(what + ": " + errnoText(err));
}

}  // namespace hvd
