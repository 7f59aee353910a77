#include "agent/auth/cluster_key.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "hvd/error.hpp"

namespace hvd::agent::auth {
namespace {

// A raw key, or its hex form plus one optional newline; anything longer is wrong before reading.
constexpr size_t kHexSize = 2 * ClusterKey::kSize;
constexpr size_t kMaxFileSize = kHexSize + 1;

std::string describe(const std::string& path) { return "cluster key file '" + path + "'"; }

std::string octalMode(mode_t mode) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

const char* fileTypeName(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() { ::close(fd_); }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  int fd_;
};

// Wipes a buffer that held key material when it goes out of scope, on every path out.
template <size_t N>
struct WipedBuffer {
  unsigned char data[N] = {};
  ~WipedBuffer() { OPENSSL_cleanse(data, N); }
};

// 2*size lowercase hex digits of `data` into `out` (no terminator).
void hexInto(const unsigned char* data, size_t size, unsigned char* out) {
  static constexpr char kDigits[] = "0123456789abcdef";
  for (size_t i = 0; i < size; ++i) {
    out[2 * i] = static_cast<unsigned char>(kDigits[data[i] >> 4]);
    out[2 * i + 1] = static_cast<unsigned char>(kDigits[data[i] & 0xf]);
  }
}

int hexValue(unsigned char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string hexEncode(const unsigned char* data, size_t size) {
  std::string out(2 * size, '\0');
  hexInto(data, size, reinterpret_cast<unsigned char*>(out.data()));
  return out;
}

std::string sha256Hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int mdSize = 0;
  if (EVP_Digest(data.data(), data.size(), md, &mdSize, EVP_sha256(), nullptr) != 1) {
    throw BackendError("SHA-256 failed in libcrypto");
  }
  return hexEncode(md, mdSize);
}

ClusterKey ClusterKey::load(const std::string& path) {
  // O_NONBLOCK: opening a FIFO planted at the path must not hang start-up. Every check below is
  // made on the opened descriptor, so the file cannot be swapped between check and read.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) {
      throw InvalidArgumentError(describe(path) +
                                 " does not exist (create one with `hvdrun keygen`)");
    }
    throw InvalidArgumentError(describe(path) + " cannot be opened: " + std::strerror(err));
  }
  FdCloser closer(fd);

  struct stat st;
  if (::fstat(fd, &st) != 0) {
    throw InvalidArgumentError(describe(path) + " cannot be examined: " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    throw InvalidArgumentError(describe(path) + " is not a regular file (it is " +
                               fileTypeName(st.st_mode) + ")");
  }
  uid_t euid = ::geteuid();
  if (st.st_uid != euid) {
    // Another user could rewrite it, or it is someone else's secret: either way not ours.
    throw InvalidArgumentError(describe(path) + " is owned by uid " + std::to_string(st.st_uid) +
                               ", not by this process's effective uid " + std::to_string(euid));
  }
  mode_t mode = st.st_mode & 07777;
  if (mode != 0600 && mode != 0400) {
    throw InvalidArgumentError(describe(path) + " has mode " + octalMode(mode) +
                               "; it must be 0600 or 0400 so that no other user can read or "
                               "change it: run `chmod 600 " +
                               path + "`");
  }
  if (st.st_size == 0) {
    throw InvalidArgumentError(describe(path) + " is empty");
  }
  auto wrongLength = [&](long long size) {
    return InvalidArgumentError(describe(path) + " holds " + std::to_string(size) +
                                " bytes; expected 32 raw bytes or 64 hex characters "
                                "(optionally followed by a newline)");
  };
  if (static_cast<unsigned long long>(st.st_size) > kMaxFileSize) {
    throw wrongLength(st.st_size);
  }

  // Read one byte more than the largest valid file, in case it grew since fstat.
  WipedBuffer<kMaxFileSize + 1> buf;
  size_t size = 0;
  while (size < sizeof buf.data) {
    ssize_t n = ::read(fd, buf.data + size, sizeof buf.data - size);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw InvalidArgumentError(describe(path) + " cannot be read: " + std::strerror(errno));
    }
    if (n == 0) break;
    size += static_cast<size_t>(n);
  }
  if (size == 0) throw InvalidArgumentError(describe(path) + " is empty");

  if (size != kSize && size != kHexSize && !(size == kHexSize + 1 && buf.data[kHexSize] == '\n')) {
    throw wrongLength(static_cast<long long>(size));
  }
  return fromBytes(buf.data, size, describe(path));
}

ClusterKey ClusterKey::fromBytes(const unsigned char* data, size_t size, const std::string& what) {
  std::array<unsigned char, kSize> bytes;
  if (size == kSize) {
    std::memcpy(bytes.data(), data, kSize);
  } else {
    for (size_t i = 0; i < kSize; ++i) {
      int hi = hexValue(data[2 * i]);
      int lo = hexValue(data[2 * i + 1]);
      if (hi < 0 || lo < 0) {
        OPENSSL_cleanse(bytes.data(), bytes.size());
        throw InvalidArgumentError(what + " holds 64 characters that are not all hex digits");
      }
      bytes[i] = static_cast<unsigned char>(hi << 4 | lo);
    }
  }
  ClusterKey key(bytes);
  OPENSSL_cleanse(bytes.data(), bytes.size());
  return key;
}

ClusterKey ClusterKey::random() {
  WipedBuffer<kSize> buf;
  fillFromKernelRandom(buf.data, kSize);
  return fromBytes(buf.data, kSize, "random key");
}

void ClusterKey::handOver(int fd) const {
  WipedBuffer<kHexSize + 1> line;  // the hex stays in wiped memory, not in a std::string
  hexInto(bytes_.data(), kSize, line.data);
  line.data[kHexSize] = '\n';
  size_t written = 0;
  while (written < sizeof line.data) {
    const ssize_t n = ::write(fd, line.data + written, sizeof line.data - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw BackendError(std::string("cannot hand the cluster key over: ") + std::strerror(errno));
    }
    written += static_cast<size_t>(n);
  }
}

ClusterKey ClusterKey::receive(int fd, const std::string& what) {
  // Byte by byte up to the newline, so nothing after the key line is consumed.
  WipedBuffer<kHexSize + 1> line;
  size_t size = 0;
  while (size < sizeof line.data) {
    const ssize_t n = ::read(fd, line.data + size, 1);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw InvalidArgumentError(what + " cannot be read: " + std::strerror(errno));
    }
    if (n == 0) break;
    if (line.data[size] == '\n') break;
    ++size;
  }
  if (size != kHexSize) {
    throw InvalidArgumentError(what + " did not hold one line of 64 hex characters (" +
                               std::to_string(size) + " characters before its end)");
  }
  return fromBytes(line.data, kHexSize, what);
}

ClusterKey ClusterKey::generate(const std::string& path) {
  // O_EXCL: never replace a key (that would lock the cluster out) and never write through a
  // pre-placed symlink. O_NOFOLLOW as well, for a dangling symlink at the path.
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    int err = errno;
    if (err == EEXIST) {
      throw InvalidArgumentError(describe(path) +
                                 " already exists; refusing to overwrite it (remove it first if "
                                 "you mean to replace the cluster key on every host)");
    }
    if (err == ENOENT) {
      throw InvalidArgumentError(describe(path) +
                                 " cannot be created: its directory does not exist");
    }
    throw InvalidArgumentError(describe(path) + " cannot be created: " + std::strerror(err));
  }

  WipedBuffer<kSize> buf;
  try {
    FdCloser closer(fd);
    // The umask may have taken owner bits away (it never adds any); load() requires 0600.
    if (::fchmod(fd, 0600) != 0) {
      throw BackendError(describe(path) + ": fchmod failed: " + std::strerror(errno));
    }
    fillFromKernelRandom(buf.data, kSize);
    size_t written = 0;
    while (written < kSize) {
      ssize_t n = ::write(fd, buf.data + written, kSize - written);
      if (n < 0) {
        if (errno == EINTR) continue;
        throw BackendError(describe(path) + ": write failed: " + std::strerror(errno));
      }
      written += static_cast<size_t>(n);
    }
    // A key that exists only in the page cache would be lost, or truncated, by a crash.
    if (::fsync(fd) != 0) {
      throw BackendError(describe(path) + ": fsync failed: " + std::strerror(errno));
    }
  } catch (...) {
    ::unlink(path.c_str());  // a partial key file would later be refused anyway; do not leave it
    throw;
  }
  std::array<unsigned char, kSize> bytes;
  std::memcpy(bytes.data(), buf.data, kSize);
  ClusterKey key(bytes);
  OPENSSL_cleanse(bytes.data(), bytes.size());
  return key;
}

ClusterKey::~ClusterKey() { OPENSSL_cleanse(bytes_.data(), bytes_.size()); }

std::string ClusterKey::hmacSha256Hex(std::string_view message) const {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int mdSize = 0;
  static constexpr unsigned char kEmpty[1] = {0};
  const unsigned char* data =
      message.empty() ? kEmpty : reinterpret_cast<const unsigned char*>(message.data());
  if (HMAC(EVP_sha256(), bytes_.data(), static_cast<int>(bytes_.size()), data, message.size(), md,
           &mdSize) == nullptr) {
    throw BackendError("HMAC-SHA256 failed in libcrypto");
  }
  return hexEncode(md, mdSize);
}

std::string ClusterKey::fingerprint() const {
  return sha256Hex(std::string_view(reinterpret_cast<const char*>(bytes_.data()), bytes_.size()))
      .substr(0, 8);
}

}  // namespace hvd::agent::auth
