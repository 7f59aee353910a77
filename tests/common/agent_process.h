// hvdagent as a test runs it: the real executable in a child process with an explicit
// environment, a temporary HOME, state directory and key, and an ephemeral port written to
// --port-file. Shared by the mp tests of hvdagent and of hvdrun's job commands. Header-only:
// each test target defines HVDAGENT_PATH (the executable under test).
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/auth/cluster_key.h"
#include "common/test_support.h"

#ifndef HVDAGENT_PATH
#error "HVDAGENT_PATH must name the hvdagent executable"
#endif

namespace hvd::test::agent_process {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

inline bool isRoot() { return ::geteuid() == 0; }

inline bool waitUntil(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return condition();
}

inline std::string readFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Gone, or a zombie nobody has reaped yet: either way it runs no more.
inline bool deadOrZombie(pid_t pid) {
  const std::string stat = readFile("/proc/" + std::to_string(pid) + "/stat");
  if (stat.empty()) return true;
  const size_t close = stat.rfind(')');
  return close != std::string::npos && stat.size() > close + 2 && stat[close + 2] == 'Z';
}

// hvdagent as a child process with output in files.
class Agent : public hvd::test::Process {
 public:
  Agent(const fs::path& dir, std::vector<std::string> args, std::vector<std::string> env)
      : Agent(dir / ("agent-" + std::to_string(++counter()) + ".log"), dir, std::move(args),
              std::move(env)) {}

  std::string output() const { return readFile(log_); }

  // Waits for --port-file (written once serving); 0 if the agent exited or time ran out.
  int waitPort(const fs::path& portFile, std::chrono::milliseconds timeout) {
    int port = 0;
    waitUntil(
        [&] {
          std::ifstream in(portFile);
          if (in >> port && port > 0) return true;
          return waitExit(0ms).has_value();
        },
        timeout);
    return port;
  }

 private:
  Agent(fs::path log, const fs::path& dir, std::vector<std::string> args,
        std::vector<std::string> env)
      : Process(withAgentPath(std::move(args)), options(log, dir, std::move(env))),
        log_(std::move(log)) {}

  static std::vector<std::string> withAgentPath(std::vector<std::string> args) {
    args.insert(args.begin(), HVDAGENT_PATH);
    return args;
  }
  // Exactly `env` plus PATH and HOME (the test directory); stdout and stderr to `log`.
  static hvd::test::ProcessOptions options(const fs::path& log, const fs::path& dir,
                                           std::vector<std::string> env) {
    env.push_back("PATH=/usr/bin:/bin");
    env.push_back("HOME=" + dir.string());
    hvd::test::ProcessOptions o;
    o.output = hvd::test::ProcessOptions::Output::kFile;
    o.outputFile = log.string();
    o.inheritEnv = false;
    o.env = std::move(env);
    return o;
  }
  static int& counter() {
    static int n = 0;  // log file names within one test process
    return n;
  }
  const fs::path log_;
};

// A key file with `mode` holding 32 random bytes (or `size` of them).
inline fs::path writeKey(const fs::path& dir, const std::string& name, mode_t mode,
                         size_t size = 32) {
  const fs::path path = dir / name;
  std::vector<unsigned char> bytes(size);
  hvd::agent::auth::fillFromKernelRandom(bytes.data(), bytes.size());
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  ::close(fd);
  ::chmod(path.c_str(), mode);
  return path;
}

// What every test that wants a running agent passes: root needs both confirmations.
inline std::vector<std::string> rootArgs() {
  return isRoot() ? std::vector<std::string>{"--allow-run-as-root"} : std::vector<std::string>{};
}
inline std::vector<std::string> rootEnv() {
  return isRoot() ? std::vector<std::string>{"HVD_ALLOW_RUN_AS_ROOT_CONFIRM=1"}
                  : std::vector<std::string>{};
}

// A running agent on 127.0.0.1:<ephemeral> with its own key and state directory.
struct RunningAgent {
  explicit RunningAgent(const fs::path& dir, std::vector<std::string> extra = {},
                        std::vector<std::string> extraEnv = {})
      : keyFile(dir / "cluster.key") {
    if (!fs::exists(keyFile)) writeKey(dir, "cluster.key", 0600);
    const fs::path portFile = dir / "port";
    fs::remove(portFile);
    std::vector<std::string> args = {"--listen",         "127.0.0.1:0",
                                     "--key-file",       keyFile.string(),
                                     "--state-dir",      (dir / "state").string(),
                                     "--port-file",      portFile.string(),
                                     "--shutdown-grace", "1"};
    for (const std::string& a : rootArgs()) args.push_back(a);
    for (const std::string& a : extra) args.push_back(a);
    std::vector<std::string> env = rootEnv();
    env.insert(env.end(), extraEnv.begin(), extraEnv.end());
    agent.emplace(dir, args, env);
    port = agent->waitPort(portFile, 20s);
  }

  fs::path keyFile;
  std::optional<Agent> agent;
  int port = 0;
};

}  // namespace hvd::test::agent_process
