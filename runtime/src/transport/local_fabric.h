// Ranks as threads: builds `size` Contexts in one process, every pair joined by a heap ring
// pair (the same ShmLink code as between processes) or, with kind == kTcpLike, by a TcpLink over
// a socketpair. Used by unit tests and in-process benchmarks.
#pragma once

#include <memory>
#include <vector>

#include "transport/context.h"

namespace hvd::transport {

enum class LocalLinkKind { kShm, kStream };

std::vector<std::unique_ptr<Context>> makeLocalContexts(int size, LocalLinkKind kind,
                                                        const ContextOptions& options,
                                                        size_t ringBytes = 1 << 20);

}  // namespace hvd::transport
