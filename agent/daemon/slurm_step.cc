#include "agent/daemon/slurm_step.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "agent/common/net.h"
#include "agent/common/thread_guard.h"
#include "hvd/error.hpp"
#include "hvd_support/host.h"
#include "hvd_support/interfaces.h"

namespace hvd::agent::daemon {

std::string readyLine(const std::string& node, const std::string& address) {
  return std::string(kReadyPrefix) + node + " " + address;
}

std::string slurmStepListen(const contract::EnvReader& getenv) {
  const char* launcher = getenv("SLURM_LAUNCH_NODE_IPADDR");
  return common::joinHostPort(launcher != nullptr && *launcher
                                  ? transport::localAddressToward(launcher)
                                  : transport::firstInterfaceIpv4(),
                              0);
}

std::string slurmNodeName(const contract::EnvReader& getenv) {
  if (const char* node = getenv("SLURMD_NODENAME"); node != nullptr && *node) return node;
  return localHostName();
}

TemporaryStateDir::TemporaryStateDir(const contract::EnvReader& getenv) {
  const char* tmp = getenv("TMPDIR");
  const char* job = getenv("SLURM_JOB_ID");
  std::string pattern = std::string(tmp != nullptr && *tmp ? tmp : "/tmp") + "/hvdagent-" +
                        (job != nullptr && *job ? job : "step") + "-XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (::mkdtemp(buffer.data()) == nullptr) {
    throw BackendError("cannot create a temporary state dir " + pattern + ": " +
                       std::strerror(errno));
  }
  path_ = buffer.data();
}

TemporaryStateDir::~TemporaryStateDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void watchForEnd(int fd, std::function<void()> onEnd) {
  std::thread([fd, onEnd = std::move(onEnd)] {
    bool ended = false;
    // A watcher that fails can no longer tell when hvdrun goes: ending now is the safe side (an
    // agent that outlives its allocation's hvdrun would keep the ranks running).
    common::runGuarded(
        "stdin watcher (--slurm-step)",
        [&] {
          char buffer[256];
          for (;;) {
            pollfd pfd = {fd, POLLIN, 0};
            const int ready = ::poll(&pfd, 1, -1);
            if (ready < 0 && errno == EINTR) continue;
            if (ready < 0) break;
            const ssize_t n = ::read(fd, buffer, sizeof(buffer));
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) break;
          }
          ended = true;
          onEnd();
        },
        [&](const std::string&) {
          if (!ended) onEnd();
        });
  }).detach();
}

}  // namespace hvd::agent::daemon
