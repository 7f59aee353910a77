#include "e2e_cluster.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>
#include <utility>

#include "e2e_process.h"

namespace hvd::e2e {

namespace {

using namespace std::chrono_literals;

std::vector<std::string> scriptEnv() { return {"HVD_NETNS_STATE_ROOT=" HVD_E2E_STATE_ROOT}; }

}  // namespace

// KEY=VALUE lines (what `up` prints and writes to STATE/env).
std::map<std::string, std::string> parseEnvLines(const std::string& text) {
  std::map<std::string, std::string> values;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const auto eq = line.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    const std::string key = line.substr(0, eq);
    if (key.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789") != std::string::npos) {
      continue;
    }
    values[key] = line.substr(eq + 1);
  }
  return values;
}

unsigned long long netnsInodeOf(const std::string& ns) {
  struct stat st {};
  const std::string path = "/run/netns/" + ns;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<unsigned long long>(st.st_ino) : 0;
}

std::string whyNoNetns() {
  if (::geteuid() != 0) return "needs root for network namespaces";
  const RunResult r = run({"ip", "netns", "list"}, 10s);
  if (r.status != 0) return "'ip netns' is not available: " + r.output;
  return {};
}

std::optional<Cluster> Cluster::up(int n, const std::string& prefix, std::string* error) {
  const RunResult r = run({HVD_E2E_SCRIPT, "up", std::to_string(n), "--prefix", prefix, "--bin",
                           HVD_E2E_BIN_DIR, "--log-level", "debug"},
                          60s, scriptEnv());
  if (r.status != 0) {
    *error = "netns-cluster.sh up failed: " + describe(r);
    // up removes what it created when it fails; make sure even if it was killed.
    run({HVD_E2E_SCRIPT, "down", "--prefix", prefix}, 30s, scriptEnv());
    return std::nullopt;
  }
  std::optional<Cluster> cluster =
      fromEnvFile(std::string(HVD_E2E_STATE_ROOT) + "/" + prefix + "/env", error);
  if (cluster) {
    cluster->owned_ = true;
  } else {
    run({HVD_E2E_SCRIPT, "down", "--prefix", prefix}, 30s, scriptEnv());
  }
  return cluster;
}

std::optional<Cluster> Cluster::fromEnvFile(const std::string& path, std::string* error) {
  std::ifstream in(path);
  if (!in) {
    *error = "no cluster env file " + path;
    return std::nullopt;
  }
  std::stringstream text;
  text << in.rdbuf();
  auto values = parseEnvLines(text.str());
  Cluster c;
  c.prefix_ = values["PREFIX"];
  c.state_ = values["STATE"];
  c.subnet_ = values["SUBNET"];
  c.keyFile_ = values["KEY"];
  c.port_ = std::atoi(values["PORT"].c_str());
  const int n = std::atoi(values["N"].c_str());
  for (int i = 0; i < n; ++i) {
    c.namespaces_.push_back(values["NS_" + std::to_string(i)]);
    c.addresses_.push_back(values["ADDR_" + std::to_string(i)]);
  }
  if (c.prefix_.empty() || c.keyFile_.empty() || c.port_ <= 0 || n <= 0) {
    *error = "incomplete cluster env file " + path + ":\n" + text.str();
    return std::nullopt;
  }
  return c;
}

Cluster::Cluster(Cluster&& other) noexcept
    : owned_(std::exchange(other.owned_, false)),
      prefix_(std::move(other.prefix_)),
      state_(std::move(other.state_)),
      subnet_(std::move(other.subnet_)),
      keyFile_(std::move(other.keyFile_)),
      port_(other.port_),
      namespaces_(std::move(other.namespaces_)),
      addresses_(std::move(other.addresses_)) {}

Cluster::~Cluster() { down(); }

void Cluster::down() {
  if (!owned_) return;
  owned_ = false;
  run({HVD_E2E_SCRIPT, "down", "--prefix", prefix_}, 60s, scriptEnv());
}

std::string Cluster::agentLog(int i) const {
  std::ifstream in(state_ + "/h" + std::to_string(i) + "/agent.log");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string Cluster::hostList(int slotsEach) const {
  std::string list;
  for (const std::string& address : addresses_) {
    if (!list.empty()) list += ",";
    list += address + ":" + std::to_string(slotsEach);
  }
  return list;
}

pid_t Cluster::agentPid(int i) const {
  std::ifstream in(state_ + "/h" + std::to_string(i) + "/agent.pid");
  pid_t pid = -1;
  in >> pid;
  return in ? pid : -1;
}

std::vector<pid_t> Cluster::pidsIn(int i) const {
  const RunResult r = run({"ip", "netns", "pids", ns(i)}, 10s);
  std::vector<pid_t> pids;
  std::istringstream in(r.output);
  pid_t pid;
  while (in >> pid) pids.push_back(pid);
  return pids;
}

unsigned long long Cluster::netnsInode(int i) const { return netnsInodeOf(ns(i)); }

}  // namespace hvd::e2e
