#include "hvd/error.hpp"

namespace hvd {

const char* errorKindName(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidArgument:
      return "invalid argument";
    case ErrorKind::kTimeout:
      return "timeout";
    case ErrorKind::kPeer:
      return "peer failure";
    case ErrorKind::kBackend:
      return "backend error";
    case ErrorKind::kInternal:
      return "internal error";
  }
  return "unknown error";
}

void throwError(ErrorKind kind, const std::string& message) {
  switch (kind) {
    case ErrorKind::kInvalidArgument:
      throw InvalidArgumentError(message);
    case ErrorKind::kTimeout:
      throw TimeoutError(message);
    case ErrorKind::kPeer:
      throw PeerError(message);
    case ErrorKind::kBackend:
      throw BackendError(message);
    case ErrorKind::kInternal:
      break;
  }
  throw InternalError(message);
}

}  // namespace hvd
