// Unguessable values (store tokens, job tags, nonces, job id suffixes): one source for the
// runtime, the agent and hvdrun, the kernel's CSPRNG, and no weaker fallback. Header only
// (hvd_contract_env), like the rest of what the runtime shares with the agent and hvdrun.
#pragma once

#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "hvd/error.hpp"

namespace hvd::contract {

// Fills `out` with `size` bytes from getrandom(2). Throws BackendError if the kernel cannot
// provide them.
inline void fillFromKernelRandom(unsigned char* out, size_t size) {
  size_t got = 0;
  while (got < size) {
    const ssize_t n = ::getrandom(out + got, size - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw BackendError(std::string("getrandom failed: ") + std::strerror(errno));
    }
    got += static_cast<size_t>(n);
  }
}

// `bytes` random bytes as 2*bytes lowercase hex characters.
inline std::string randomHex(size_t bytes) {
  std::vector<unsigned char> buf(bytes);
  fillFromKernelRandom(buf.data(), buf.size());
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes);
  for (unsigned char b : buf) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

}  // namespace hvd::contract
