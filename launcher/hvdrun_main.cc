// hvdrun, embedded mode (DESIGN.md "How a job flows", step 1): every host is this machine, so the
// job coordinator, process supervision and the job's store all run inside this process. The
// remote path (hvdagent over gRPC) plugs into the same JobCoordinator with other NodeAgents.
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "agent/auth/cluster_key.h"
#include "agent/coordinator/exit_codes.h"
#include "agent/coordinator/job_coordinator.h"
#include "agent/coordinator/local_node_agent.h"
#include "agent/node/gpu_discovery.h"
#include "agent/process/posix_spawner.h"
#include "hvd/error.hpp"
#include "launcher/cli.h"
#include "launcher/output.h"
#include "store/tcp_store_server.h"

extern char** environ;

namespace {

namespace coord = hvd::agent::coordinator;

// The write end of the signal self-pipe: the only global, because a signal handler can reach
// nothing else. The handler only writes the signal number; the main loop does the work.
int gSignalPipeWrite = -1;

void onSignal(int signo) {
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(signo);
  (void)!::write(gSignalPipeWrite, &byte, 1);
  errno = saved;
}

// Returns the read end, or -1 when the pipe cannot be made.
int installSignalPipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return -1;
  gSignalPipeWrite = fds[1];
  struct sigaction sa = {};
  sa.sa_handler = onSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  // A closed stdout (hvdrun | head) must not kill the launcher while its ranks still run.
  std::signal(SIGPIPE, SIG_IGN);
  return fds[0];
}

// `bytes` random bytes from the kernel CSPRNG as hex (the job id suffix, and the job's store
// credential, which is never printed or logged).
std::string randomHex(size_t bytes) {
  std::vector<unsigned char> buf(bytes);
  hvd::agent::auth::fillFromKernelRandom(buf.data(), buf.size());
  return hvd::agent::auth::hexEncode(buf.data(), buf.size());
}

// MASTER_PORT for torch env://: a port the kernel says is free on loopback right now. Released
// before the ranks start, so another process could take it first; acceptable for local jobs
// until the agent reserves ports (JobSpec::masterPort).
int pickFreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 29500;
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 29500;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

std::string ownHostname() {
  char name[256] = {};
  return ::gethostname(name, sizeof(name) - 1) == 0 ? std::string(name) : std::string();
}

// Forwards the job's events to the renderer and wakes the main loop the moment the job ends,
// so hvdrun exits as soon as its last rank does (a byte 0 on the self-pipe: not a signal).
class WakingClientEvents final : public coord::ClientEvents {
 public:
  WakingClientEvents(coord::ClientEvents& inner, int wakeFd) : inner_(inner), wakeFd_(wakeFd) {}
  void onOutput(int rank, const std::string& host, hvd::agent::process::Stream stream,
                std::string_view line) override {
    inner_.onOutput(rank, host, stream, line);
  }
  void onJobEnd(const coord::JobResult& result) override {
    inner_.onJobEnd(result);
    const unsigned char wake = 0;
    (void)!::write(wakeFd_, &wake, 1);
  }

 private:
  coord::ClientEvents& inner_;
  int wakeFd_;
};

void printFailure(const coord::JobResult& result) {
  std::fprintf(stderr, "%s\n", result.summary.c_str());
  if (result.rank >= 0 && !result.stderrTail.empty()) {
    std::fprintf(stderr, "hvdrun: last %zu line(s) of rank %d's stderr:\n",
                 result.stderrTail.size(), result.rank);
    for (const std::string& line : result.stderrTail) std::fprintf(stderr, "  %s\n", line.c_str());
  }
  if (!result.unreportedRanks.empty()) {
    std::fprintf(stderr, "hvdrun: %zu rank(s) did not report their exit in time\n",
                 result.unreportedRanks.size());
  }
}

int runEmbedded(const hvd::launcher::Options& options,
                const std::vector<hvd::launcher::HostSlots>& hosts) {
  std::vector<std::string> callerEnv;
  for (char** e = environ; *e != nullptr; ++e) callerEnv.emplace_back(*e);

  coord::JobSpec spec;
  spec.jobId = "hvdrun-" + std::to_string(::getpid()) + "-" + randomHex(4);
  spec.argv = options.command;
  spec.env = hvd::launcher::forwardedEnvironment(callerEnv, options.exports);
  spec.cwd = std::filesystem::current_path().string();
  spec.np = options.np;
  spec.hosts = hosts;
  spec.oversubscribe = options.oversubscribe;
  spec.stopSignal = *hvd::launcher::parseSignal(options.stopSignal);
  spec.grace = std::chrono::milliseconds(static_cast<long long>(options.graceSeconds * 1000));
  spec.masterPort = pickFreePort();

  hvd::launcher::OutputRenderer renderer(options.np, options.tagOutput, options.outputDir);

  const int signalPipe = installSignalPipe();
  if (signalPipe < 0) throw hvd::BackendError("cannot create the signal pipe");

  hvd::store::TcpStoreServer store;  // loopback, ephemeral port
  store.start();
  const std::string token = randomHex(32);
  store.addJob(spec.jobId, token);
  spdlog::debug("hvdrun: job {} np {} on {} (embedded), store {}", spec.jobId, spec.np,
                hosts[0].host, store.address());

  hvd::agent::process::PosixSpawner spawner;
  hvd::agent::node::NvmlGpuDiscovery gpus;
  coord::LocalNodeAgent agent(hosts[0].host, &spawner, &gpus);
  coord::SteadyClock clock;
  WakingClientEvents events(renderer, gSignalPipeWrite);
  coord::JobCoordinator coordinator(spec, {&agent}, {store.address(), token}, &events, &clock);

  coordinator.start();
  // The pipe carries signals and the job's end (byte 0), so the loop wakes at once for both;
  // the 200 ms timeout only paces tick(), which matters once a stop is under way.
  while (!coordinator.finished()) {
    pollfd pfd = {signalPipe, POLLIN, 0};
    if (::poll(&pfd, 1, 200) > 0) {
      unsigned char signo = 0;
      while (::read(signalPipe, &signo, 1) == 1) {
        if (signo == 0) continue;  // the job ended: the loop condition sees it
        std::fprintf(stderr, "hvdrun: got %s, stopping the job (again within 2 s to kill it)\n",
                     signo == SIGINT ? "SIGINT" : "SIGTERM");
        coordinator.cancel();
      }
    }
    coordinator.tick();
  }
  // Before the coordinator goes: no event may reach it after this.
  agent.shutdown();
  store.removeJob(spec.jobId);
  store.stop();

  const coord::JobResult result = *coordinator.result();
  if (result.exitCode != coord::kExitSuccess) printFailure(result);
  return result.exitCode;
}

}  // namespace

int main(int argc, char** argv) {
  if (const char* level = std::getenv("HVD_LOG_LEVEL")) {
    spdlog::set_level(spdlog::level::from_str(level));
  }
  hvd::launcher::Options options;
  if (std::optional<int> code = hvd::launcher::parseCommandLine(argc, argv, &options)) {
    return *code;
  }
  std::vector<hvd::launcher::HostSlots> hosts;
  try {
    hosts = hvd::launcher::resolveHosts(options);
    const std::string self = ownHostname();
    for (const hvd::launcher::HostSlots& h : hosts) {
      if (!hvd::launcher::isLocalHost(h.host, self)) {
        std::fprintf(stderr,
                     "hvdrun: remote hosts need hvdagent, which is not available yet in this "
                     "build (host '%s')\n",
                     h.host.c_str());
        return coord::kExitUsage;
      }
    }
    if (hosts.size() > 1) {
      // One machine is one host: two names for it would split its ranks into two "nodes" that
      // both claim every GPU.
      std::fprintf(stderr,
                   "hvdrun: '%s' and '%s' are both this machine; list it once with its slots\n",
                   hosts[0].host.c_str(), hosts[1].host.c_str());
      return coord::kExitUsage;
    }
  } catch (const hvd::Error& e) {
    std::fprintf(stderr, "hvdrun: %s\n", e.what());
    return coord::kExitUsage;
  }
  try {
    return runEmbedded(options, hosts);
  } catch (const hvd::InvalidArgumentError& e) {
    std::fprintf(stderr, "hvdrun: %s\n", e.what());
    return coord::kExitUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hvdrun: %s\n", e.what());
    return 1;
  }
}
