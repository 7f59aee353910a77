// A netns cluster for the e2e tests: brought up and torn down by scripts/netns-cluster.sh, or
// read from the env file of one that a ctest fixture brought up.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hvd::e2e {

// Empty when this process can build network namespaces (root, `ip netns` works); otherwise why
// not, for a skip message.
std::string whyNoNetns();

// KEY=VALUE lines (what the cluster scripts' `up` prints and writes to STATE/env), by key.
std::map<std::string, std::string> parseEnvLines(const std::string& text);

// Inode of network namespace `ns` (/run/netns/NS): what /proc/PID/ns/net of its processes
// refers to; 0 when it does not exist.
unsigned long long netnsInodeOf(const std::string& ns);

class Cluster {
 public:
  // Runs `netns-cluster.sh up n --prefix prefix` (binaries from bin/); nullopt with *error set
  // (the script's output) on failure. The returned cluster is owned: its destructor runs down.
  static std::optional<Cluster> up(int n, const std::string& prefix, std::string* error);

  // A cluster someone else brought up, from its env file (not owned: never torn down here).
  static std::optional<Cluster> fromEnvFile(const std::string& path, std::string* error);

  Cluster(Cluster&& other) noexcept;
  Cluster& operator=(Cluster&&) = delete;
  Cluster(const Cluster&) = delete;
  ~Cluster();

  // Runs `netns-cluster.sh down` now (owned clusters only; idempotent).
  void down();

  int size() const { return static_cast<int>(addresses_.size()); }
  const std::string& prefix() const { return prefix_; }
  const std::string& subnet() const { return subnet_; }  // "10.X.Y"
  const std::string& keyFile() const { return keyFile_; }
  int port() const { return port_; }
  const std::string& ns(int i) const { return namespaces_.at(i); }
  const std::string& address(int i) const { return addresses_.at(i); }
  std::string agentAddress(int i) const { return address(i) + ":" + std::to_string(port_); }
  std::string agentLog(int i) const;

  // "-H" list: "ADDR0:slots,ADDR1:slots,...".
  std::string hostList(int slotsEach) const;

  // The agent's pid (from the state dir), or -1.
  pid_t agentPid(int i) const;

  // Every process inside namespace i now (ip netns pids).
  std::vector<pid_t> pidsIn(int i) const;

  // Inode of namespace i (what /proc/PID/ns/net of its processes refers to).
  unsigned long long netnsInode(int i) const;

 private:
  Cluster() = default;

  bool owned_ = false;
  std::string prefix_;
  std::string state_;
  std::string subnet_;
  std::string keyFile_;
  int port_ = 0;
  std::vector<std::string> namespaces_;
  std::vector<std::string> addresses_;
};

}  // namespace hvd::e2e
