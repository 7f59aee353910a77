// Errors raised by libhvd. Every error thrown by the runtime derives from hvd::Error and carries
// one of a few kinds, so callers can tell "my input was wrong" from "a peer died" from "time ran
// out" without parsing messages. C return codes (syscalls, later NCCL/CUDA) are converted into
// these where they are returned, with the context that makes the message useful.
#pragma once

#include <stdexcept>
#include <string>

namespace hvd {

enum class ErrorKind {
  kInvalidArgument,  // the caller's input or environment is wrong
  kTimeout,          // a deadline passed (a peer is stopped, slow, or never arrived)
  kPeer,             // a peer closed its connection or died
  kBackend,          // a system call or library failed
  kInternal,         // a broken invariant inside hvd
};

const char* errorKindName(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

class InvalidArgumentError : public Error {
 public:
  explicit InvalidArgumentError(const std::string& m) : Error(ErrorKind::kInvalidArgument, m) {}
};

class TimeoutError : public Error {
 public:
  explicit TimeoutError(const std::string& m) : Error(ErrorKind::kTimeout, m) {}
};

class PeerError : public Error {
 public:
  explicit PeerError(const std::string& m) : Error(ErrorKind::kPeer, m) {}
};

class BackendError : public Error {
 public:
  explicit BackendError(const std::string& m) : Error(ErrorKind::kBackend, m) {}
};

class InternalError : public Error {
 public:
  explicit InternalError(const std::string& m) : Error(ErrorKind::kInternal, m) {}
};

// Throws the Error subclass of `kind` (so that callers catching by type still can), for an
// error whose kind was carried over a thread, a process or the wire.
[[noreturn]] void throwError(ErrorKind kind, const std::string& message);

}  // namespace hvd
