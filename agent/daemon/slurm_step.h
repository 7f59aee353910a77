// hvdagent's side of a Slurm job: the agent that hvdrun starts on
// every node of its allocation with `srun --ntasks-per-node=1 --overlap hvdagent --slurm-step`
// (launcher/slurm_agents.h). Such an agent lives exactly as long as hvdrun's srun step:
//   * its cluster key is hvdrun's one-time key, read from stdin (ClusterKey::receive), so it is
//     never in a file or on a command line;
//   * it listens on this node's address toward the host srun ran on (SLURM_LAUNCH_NODE_IPADDR;
//     the route the launcher's connections will take), on an ephemeral port;
//   * its state dir is a fresh temporary directory, removed when the agent exits;
//   * once serving it prints readyLine() on stdout, which srun forwards to hvdrun;
//   * the end of stdin (hvdrun closed it, or died) stops it as SIGTERM does.
#pragma once

#include <functional>
#include <string>
#include <thread>

#include "contract/env_reader.h"

namespace hvd::agent::daemon {

// "hvdagent-ready <node> <host:port>": the line hvdrun waits for, one per node.
inline constexpr char kReadyPrefix[] = "hvdagent-ready ";
std::string readyLine(const std::string& node, const std::string& address);

// The --listen value of a --slurm-step agent: "<local address toward SLURM_LAUNCH_NODE_IPADDR>:0",
// or the first non-loopback IPv4 address when srun did not set it. `getenv` is injectable.
std::string slurmStepListen(const contract::EnvReader& getenv);

// The node's name as Slurm knows it (SLURMD_NODENAME), else the hostname.
std::string slurmNodeName(const contract::EnvReader& getenv);

// A directory made with mkdtemp under $TMPDIR (else /tmp), "hvdagent-<SLURM_JOB_ID>-XXXXXX",
// mode 0700; removed with everything in it on destruction. Throws hvd::BackendError when it
// cannot be made.
class TemporaryStateDir {
 public:
  explicit TemporaryStateDir(const contract::EnvReader& getenv);
  ~TemporaryStateDir();
  TemporaryStateDir(const TemporaryStateDir&) = delete;
  TemporaryStateDir& operator=(const TemporaryStateDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Watches `fd` (stdin) on a thread; when it reaches its end or errors, calls `onEnd` once.
// Bytes read after the key line are ignored. The thread is detached: the process exits with it.
void watchForEnd(int fd, std::function<void()> onEnd);

}  // namespace hvd::agent::daemon
