// The cluster key: the one secret every hvdagent and hvdrun of a cluster shares. Requests are
// signed with it (request_signer.h), so whoever can read the key file can start processes on
// every host. That is why loading is strict and fails closed: a key that others could have read
// or replaced is refused at start-up rather than trusted.
//
// Key file format: exactly 32 raw bytes (what generate() writes), or the same 32 bytes as 64
// lowercase or uppercase hex characters with an optional single trailing '\n' (what
// `openssl rand -hex 32 > key` writes). The file must be a regular file owned by the process's
// effective uid, with no group or other permission bits (0600 or 0400).
//
// The key bytes never leave this class: it computes the MAC itself and offers no accessor,
// stream operator or formatter for them. fingerprint() identifies a key in logs. The one way out
// is handOver(fd): hvdrun writes the one-time key of a Slurm job to the agents it starts over a
// pipe (their stdin), never to a file or a command line; they read it with receive(fd).
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

#include "contract/random.h"

namespace hvd::agent::auth {

class ClusterKey {
 public:
  static constexpr size_t kSize = 32;

  // Reads and checks the key file. Throws hvd::InvalidArgumentError naming the path and the
  // reason (missing, not a regular file, wrong owner, wrong mode, empty, wrong length, not hex);
  // never includes the file's contents in the message.
  static ClusterKey load(const std::string& path);

  // Creates `path` (O_EXCL, mode 0600) holding 32 bytes from the kernel CSPRNG and returns the
  // key. Refuses to overwrite an existing file; the parent directory must exist. Throws
  // hvd::InvalidArgumentError for those, hvd::BackendError when a system call fails.
  static ClusterKey generate(const std::string& path);

  // A fresh key from the kernel CSPRNG that lives in memory only (a one-time key for one job).
  static ClusterKey random();

  // Writes the key to `fd` as 64 hex characters and a newline (a pipe to a process that calls
  // receive()). Throws hvd::BackendError when the write fails.
  void handOver(int fd) const;

  // Reads one handOver() line from `fd` (blocking; the rest of the stream is left unread).
  // Throws hvd::InvalidArgumentError naming `what` when the stream ends first or the line is not
  // 64 hex characters; never includes what was read.
  static ClusterKey receive(int fd, const std::string& what);

  ClusterKey(const ClusterKey&) = default;
  ClusterKey& operator=(const ClusterKey&) = default;
  ~ClusterKey();  // wipes the bytes so they do not linger in freed memory

  // HMAC-SHA256 of `message` under this key, as 64 lowercase hex characters.
  std::string hmacSha256Hex(std::string_view message) const;

  // First 8 hex characters of SHA-256(key): tells keys apart in logs without revealing them.
  std::string fingerprint() const;

 private:
  explicit ClusterKey(const std::array<unsigned char, kSize>& bytes) : bytes_(bytes) {}
  // 32 raw bytes, or 64 hex characters (size 64 or 65); `what` names the source in errors.
  static ClusterKey fromBytes(const unsigned char* data, size_t size, const std::string& what);

  std::array<unsigned char, kSize> bytes_;
};

// Primitives shared by the key and the request signer.

// SHA-256 of `data` as 64 lowercase hex characters; the body digest that requests sign.
std::string sha256Hex(std::string_view data);

// `size` bytes as 2*size lowercase hex characters.
std::string hexEncode(const unsigned char* data, size_t size);

// The kernel CSPRNG (contract/random.h), as the agent's code names it: keys, nonces, job id
// suffixes and per-job store tokens.
using contract::fillFromKernelRandom;
using contract::randomHex;

}  // namespace hvd::agent::auth
