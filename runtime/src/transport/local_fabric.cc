#include "transport/local_fabric.h"

#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "common/syscall_error.h"
#include "transport/shm_link.h"
#include "transport/tcp_link.h"

namespace hvd::transport {

std::vector<std::unique_ptr<Context>> makeLocalContexts(int size, LocalLinkKind kind,
                                                        const ContextOptions& options,
                                                        size_t ringBytes) {
  std::vector<std::vector<std::unique_ptr<Link>>> links(size);
  for (auto& row : links) row.resize(size);
  for (int a = 0; a < size; ++a) {
    for (int b = a + 1; b < size; ++b) {
      int fds[2];
      if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) throwSyscall("socketpair");
      const std::string nameA = "rank " + std::to_string(a) + " (thread)";
      const std::string nameB = "rank " + std::to_string(b) + " (thread)";
      if (kind == LocalLinkKind::kShm) {
        auto memory = allocateHeapRing(ringBytes);
        links[a][b] = std::make_unique<ShmLink>(b, 0, memory, fds[0], nameB);
        links[b][a] = std::make_unique<ShmLink>(a, 1, memory, fds[1], nameA);
      } else {
        links[a][b] = std::make_unique<TcpLink>(b, fds[0], nameB);
        links[b][a] = std::make_unique<TcpLink>(a, fds[1], nameA);
      }
    }
  }
  std::vector<std::unique_ptr<Context>> contexts;
  for (int r = 0; r < size; ++r) {
    contexts.push_back(std::make_unique<Context>(r, size, std::move(links[r]), options));
  }
  return contexts;
}

}  // namespace hvd::transport
