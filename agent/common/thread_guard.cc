#include "agent/common/thread_guard.h"

#include <spdlog/spdlog.h>

#include <exception>

#include "hvd_support/logging.h"

namespace hvd::agent::common {

std::string currentExceptionMessage() {
  try {
    throw;
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown exception";
  }
}

void runGuarded(std::string_view role, const std::function<void()>& body,
                const std::function<void(const std::string& what)>& onError) noexcept {
  std::string what;
  try {
    body();
    return;
  } catch (...) {
    // Logging itself may throw (bad_alloc, a failing sink): nothing more can be done then.
    try {
      what = currentExceptionMessage();
      hvd::logging::program("thread")->error("{}: internal error: {}", role, what);
    } catch (...) {
    }
  }
  if (!onError) return;
  try {
    onError(what);
  } catch (...) {
    try {
      hvd::logging::program("thread")->error("{}: internal error while recovering: {}", role,
                                             currentExceptionMessage());
    } catch (...) {
    }
  }
}

}  // namespace hvd::agent::common
