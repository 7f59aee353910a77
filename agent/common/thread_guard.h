// The last line of defence of a thread body or main(): an exception that escaped every handler
// is a bug, but letting it reach std::terminate takes the whole agent (every job on the node) or
// hvdrun (with its terminal and ranks) down with a core dump and no word about what happened.
// Instead it is logged once, naming the thread's role, and the caller's safe path runs: a stream
// reader reports the stream as lost, a watcher stops watching.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace hvd::agent::common {

// Runs `body`. If it throws, logs "<role>: internal error: <what>" (spdlog, error level) and
// then runs `onError` (if given) with <what>; an exception of onError is logged too. Never
// throws.
void runGuarded(std::string_view role, const std::function<void()>& body,
                const std::function<void(const std::string& what)>& onError = {}) noexcept;

// What the exception being handled says: what() of a std::exception, else "unknown exception".
// Only inside a catch block.
std::string currentExceptionMessage();

}  // namespace hvd::agent::common
