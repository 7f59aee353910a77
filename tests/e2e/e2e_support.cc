#include "e2e_support.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

namespace hvd::e2e {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// The identity lines of hvdrun's (tagged) output, by rank.
std::map<int, std::vector<Fields>> identities(const std::string& output) {
  std::map<int, std::vector<Fields>> byRank;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    const auto at = line.find("e2e rank=");
    if (at == std::string::npos || line.find(" size=", at) == std::string::npos) continue;
    Fields fields;
    std::istringstream words(line.substr(at + 4));
    std::string word;
    while (words >> word) {
      const auto eq = word.find('=');
      if (eq != std::string::npos) fields[word.substr(0, eq)] = word.substr(eq + 1);
    }
    byRank[std::atoi(fields["rank"].c_str())].push_back(fields);
  }
  return byRank;
}

size_t countOf(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

bool alive(pid_t pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
  // A zombie has exited; whether its parent (init, for an orphan) has reaped it yet is not ours.
  const std::string stat = readFile("/proc/" + std::to_string(pid) + "/stat");
  const auto close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() || stat[close + 2] != 'Z';
}

std::vector<std::string> hvdrunArgs(const Cluster& cluster, int np, const std::string& hosts,
                                    std::vector<std::string> extra) {
  std::vector<std::string> args = {HVDRUN_PATH,
                                   "-np",
                                   std::to_string(np),
                                   "-H",
                                   hosts,
                                   "--key-file",
                                   cluster.keyFile(),
                                   "--agent-port",
                                   std::to_string(cluster.port())};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::vector<std::string> jobCommand(const Cluster& cluster, const std::string& command,
                                    std::vector<std::string> args) {
  std::vector<std::string> argv = {
      HVDRUN_PATH,  command,           "-H",           cluster.address(0),
      "--key-file", cluster.keyFile(), "--agent-port", std::to_string(cluster.port())};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

// Waits until namespace i holds no process but its agent (or none when the agent is gone), for
// up to `timeout`; returns what is left beyond that, with each process's command line.
std::string leftoversIn(const Cluster& cluster, int i, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    std::string left;
    for (pid_t pid : cluster.pidsIn(i)) {
      if (pid == cluster.agentPid(i)) continue;
      std::ifstream cmdline("/proc/" + std::to_string(pid) + "/cmdline");
      std::string cmd((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
      std::replace(cmd.begin(), cmd.end(), '\0', ' ');
      left += "  pid " + std::to_string(pid) + ": " + cmd + "\n";
    }
    if (left.empty() || Clock::now() >= deadline) return left;
    std::this_thread::sleep_for(100ms);
  }
}

// Starts `hvdrun ... hvd-e2e-worker sleep` and waits until every rank is ready; *workers gets
// the ranks' pids in rank order.
void startSleepingJob(const Cluster& cluster, int np, const std::string& hosts,
                      std::unique_ptr<Child>* hvdrun, std::vector<pid_t>* workers) {
  *hvdrun = std::make_unique<Child>(
      hvdrunArgs(cluster, np, hosts, {"--grace", "2", "--", HVD_E2E_WORKER_PATH, "sleep"}));
  ASSERT_TRUE((*hvdrun)->waitForOutput(
      [np](const std::string& out) { return countOf(out, " ready") >= static_cast<size_t>(np); },
      60s))
      << (*hvdrun)->output();
  workers->clear();
  for (const auto& [rank, lines] : identities((*hvdrun)->output())) {
    workers->push_back(std::atoi(lines[0].at("pid").c_str()));
  }
  ASSERT_EQ(workers->size(), static_cast<size_t>(np)) << (*hvdrun)->output();
}

// Waits up to `timeout` for every pid to be gone; returns the ones still alive.
std::vector<pid_t> survivors(const std::vector<pid_t>& pids, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::vector<pid_t> left;
  for (pid_t pid : pids) {
    while (alive(pid) && Clock::now() < deadline) std::this_thread::sleep_for(50ms);
    if (alive(pid)) left.push_back(pid);
  }
  return left;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// True once agent i's log contains every one of `needles` (within `timeout`).
bool agentLogHas(const Cluster& cluster, int i, const std::vector<std::string>& needles,
                 std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    const std::string log = cluster.agentLog(i);
    if (std::all_of(needles.begin(), needles.end(),
                    [&](const std::string& n) { return log.find(n) != std::string::npos; })) {
      return true;
    }
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(50ms);
  }
}

std::string* E2e::skipReason_ = nullptr;
std::string* E2e::error_ = nullptr;
std::optional<Cluster>* E2e::cluster_ = nullptr;

void E2e::SetUpTestSuite() {
  skipReason_ = new std::string(whyNoNetns());
  error_ = new std::string();
  if (!skipReason_->empty()) return;
  if (const char* env = std::getenv("HVD_E2E_CLUSTER_ENV"); env != nullptr && *env != '\0') {
    cluster_ = new std::optional<Cluster>(Cluster::fromEnvFile(env, error_));
  } else {
    cluster_ = new std::optional<Cluster>(
        Cluster::up(2, "e2e" + std::to_string(::getpid() % 1000000), error_));
  }
}

void E2e::TearDownTestSuite() {
  if (cluster_ != nullptr) delete cluster_;  // runs `down` when this process brought it up
  cluster_ = nullptr;
  delete skipReason_;
  delete error_;
}

void E2e::SetUp() {
  if (!skipReason_->empty()) GTEST_SKIP() << *skipReason_;
  ASSERT_TRUE(cluster_ != nullptr && cluster_->has_value()) << *error_;
}

void E2e::TearDown() {
  if (!skipReason_->empty() || cluster_ == nullptr || !cluster_->has_value()) return;
  for (int i = 0; i < cluster().size(); ++i) {
    EXPECT_TRUE(alive(cluster().agentPid(i))) << "agent " << i << " died; its log:\n"
                                              << cluster().agentLog(i);
    EXPECT_EQ(leftoversIn(cluster(), i, 5s), "") << "processes left in " << cluster().ns(i);
  }
}

void upOwnCluster(int n, const std::string& tag, std::optional<Cluster>* cluster) {
  const std::string why = whyNoNetns();
  if (!why.empty()) GTEST_SKIP() << why;
  std::string error;
  std::optional<Cluster> up =
      Cluster::up(n, "e2e" + std::to_string(::getpid() % 100000) + tag, &error);
  ASSERT_TRUE(up.has_value()) << error;
  cluster->emplace(std::move(*up));
}

void expectPlacement(const Cluster& cluster, const RunResult& r, const std::vector<int>& slots) {
  const auto ranks = identities(r.output);
  int np = 0;
  for (int s : slots) np += s;
  ASSERT_EQ(static_cast<int>(ranks.size()), np) << describe(r);
  int rank = 0;
  for (size_t host = 0; host < slots.size(); ++host) {
    for (int local = 0; local < slots[host]; ++local, ++rank) {
      SCOPED_TRACE("rank " + std::to_string(rank));
      int crossRank = 0, crossSize = 0;
      for (size_t h = 0; h < slots.size(); ++h) {
        if (slots[h] <= local) continue;
        if (h < host) ++crossRank;
        ++crossSize;
      }
      ASSERT_EQ(ranks.count(rank), 1u) << describe(r);
      ASSERT_EQ(ranks.at(rank).size(), 1u) << "rank printed more than once\n" << describe(r);
      Fields f = ranks.at(rank)[0];
      EXPECT_EQ(f["size"], std::to_string(np));
      EXPECT_EQ(f["local_rank"], std::to_string(local));
      EXPECT_EQ(f["local_size"], std::to_string(slots[host]));
      EXPECT_EQ(f["cross_rank"], std::to_string(crossRank));
      EXPECT_EQ(f["cross_size"], std::to_string(crossSize));
      EXPECT_EQ(f["env_rank"], std::to_string(rank));
      EXPECT_EQ(f["env_local_rank"], std::to_string(local));
      EXPECT_EQ(f["env_cross_rank"], std::to_string(crossRank));
      // The rank ran inside its host's namespace, not here.
      EXPECT_EQ(f["netns"], std::to_string(cluster.netnsInode(static_cast<int>(host))));
      EXPECT_EQ(countOf(r.output, "e2e rank=" + std::to_string(rank) +
                                      " allreduce ok sum=" + std::to_string(np * (np + 1) / 2)),
                1u)
          << describe(r);
    }
  }
}

}  // namespace hvd::e2e
