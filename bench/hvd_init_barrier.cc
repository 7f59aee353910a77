// hvd-init-barrier: the worker bench/launch.sh runs under hvdrun. hvd::init(), hvd::barrier(),
// hvd::shutdown(), exit 0; measures what hvdrun costs to start a job that synchronises once.
// Prints the error and exits 1 on failure.
#include <cstdio>
#include <exception>

#include "hvd/hvd.hpp"

int main() {
  try {
    hvd::init();
    hvd::barrier();
    hvd::shutdown();
  } catch (const hvd::Error& e) {
    std::fprintf(stderr, "hvd-init-barrier: %s error: %s\n", hvd::errorKindName(e.kind()),
                 e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hvd-init-barrier: %s\n", e.what());
    return 1;
  }
  return 0;
}
