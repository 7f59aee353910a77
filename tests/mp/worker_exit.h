// Exit codes of the test workers (hvd-test-worker, hvd-engine-worker), so the multi-process
// tests can tell from a rank's status which kind of hvd::Error ended it: 10 peer, 11 timeout,
// 12 anything else.
#pragma once

#include "hvd/error.hpp"

namespace hvd::test {

inline int exitCodeFor(const hvd::Error& e) {
  switch (e.kind()) {
    case hvd::ErrorKind::kPeer:
      return 10;
    case hvd::ErrorKind::kTimeout:
      return 11;
    default:
      return 12;
  }
}

}  // namespace hvd::test
