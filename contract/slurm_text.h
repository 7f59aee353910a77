// What Slurm's two text forms share (the hostlist, contract/slurm_hosts.h; tasks per node,
// contract/slurm_tasks.h): the bound on how many nodes one expands to, the digit check and the
// error each reports. Header only, as slurm_tasks.cc is compiled into libhvd.
#pragma once

#include <cstddef>
#include <string>

#include "hvd/error.hpp"

namespace hvd::contract::slurm_text {

// Far above any allocation; stops "[1-999999999]" and "1(x999999999)".
inline constexpr size_t kMaxNodes = 1 << 20;

inline bool allDigits(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

// "<what>: '<token>': <expected>", as hvd::InvalidArgumentError.
[[noreturn]] inline void fail(const std::string& what, const std::string& token,
                              const std::string& expected) {
  throw InvalidArgumentError(what + ": '" + token + "': " + expected);
}

}  // namespace hvd::contract::slurm_text
