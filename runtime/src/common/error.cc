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

}  // namespace hvd
