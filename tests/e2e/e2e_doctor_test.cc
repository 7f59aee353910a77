// `hvdrun doctor` against real agents (launcher/doctor.h): three network-namespace hosts, each
// test with a cluster of its own. All healthy: exit 0 and a row for each; a wrong key: every
// agent AUTH FAILED; one agent stopped: exit 1 naming that host and its address; one agent of
// another version (hvdagent-e2e-other-version, a test-only build of hvdagent with another
// version compiled in) in place of the real one: exit 1 naming the host and both versions. The
// --json output is parsed by python3's json module and its fields checked. Needs root; skipped
// otherwise.
#include <signal.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "e2e_support.h"

namespace hvd::e2e {
namespace {

using namespace std::chrono_literals;

constexpr int kHosts = 3;
constexpr char kOtherVersion[] = HVD_E2E_OTHER_AGENT_VERSION;

// Loads the JSON in argv[1] (so a syntax error fails the test) and prints one line per fact the
// tests check: "ok ...", "hvdrun ...", one "host ..." per host, one "problem ..." per problem.
constexpr char kJsonFacts[] = R"PY(
import json, sys
d = json.load(open(sys.argv[1]))
print("ok", d["ok"])
print("hvdrun", d["hvdrun_version"], d["clock_limit_us"])
for h in d["hosts"]:
    clock = h["clock_offset_us"]
    print("host", h["host"], h["address"], h["status"].replace(" ", "_"), h["reachable"],
          h["authenticated"], h["version"], h["cpus"],
          clock is not None and abs(clock) < d["clock_limit_us"],
          h["clock_uncertainty_us"] is not None, h["gpus"] is not None)
for p in d["problems"]:
    print("problem", p["kind"], p["host"], p["address"])
)PY";

class E2eDoctor : public ::testing::Test {
 protected:
  void SetUp() override { upOwnCluster(kHosts, "dr", &cluster_); }
  void TearDown() override {
    other_.reset();  // before the cluster's namespaces go
    cluster_.reset();
  }

  const Cluster& c() const { return *cluster_; }
  std::string agentAt(int i) const { return c().agentAddress(i); }

  std::vector<std::string> doctor(std::vector<std::string> extra = {}) const {
    std::vector<std::string> argv = {HVDRUN_PATH,
                                     "doctor",
                                     "-H",
                                     c().address(0) + "," + c().address(1) + "," + c().address(2),
                                     "--key-file",
                                     c().keyFile(),
                                     "--agent-port",
                                     std::to_string(c().port()),
                                     "--start-timeout",
                                     "5"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  }

  // `hvdrun doctor --json`, its facts as kJsonFacts prints them; *status gets hvdrun's status.
  std::string jsonFacts(int* status) {
    const RunResult r = run(doctor({"--json"}), 30s);
    *status = r.status;
    const std::string path = dir_.file("doctor.json");
    std::ofstream(path) << r.output;
    const RunResult facts = run({"python3", "-c", kJsonFacts, path}, 30s);
    EXPECT_EQ(facts.status, 0) << describe(facts) << "\nthe JSON:\n" << r.output;
    return facts.output;
  }

  // "host ADDR ADDR:PORT OK True True VERSION CPUS True True True": an agent that answered, of
  // `version`, with a clock within the limit and its GPUs listed.
  std::string healthyHostFacts(int i, const std::string& version, const std::string& status) {
    return "host " + c().address(i) + " " + agentAt(i) + " " + status + " True True " + version;
  }

  // Stops agent i and waits until it is gone.
  void stopAgent(int i) {
    const pid_t pid = c().agentPid(i);
    ASSERT_GT(pid, 0);
    ASSERT_EQ(::kill(pid, SIGTERM), 0);
    ASSERT_TRUE(survivors({pid}, 15s).empty()) << "agent " << i << " did not stop";
  }

  std::optional<Cluster> cluster_;
  std::unique_ptr<Child> other_;
  TempDir dir_;
};

TEST_F(E2eDoctor, ThreeHealthyAgentsPassAndTheTableListsEach) {
  const RunResult r = run(doctor(), 30s);
  ASSERT_EQ(r.status, 0) << describe(r);
  for (int i = 0; i < kHosts; ++i) {
    // The row: host, address, status and version, in that order.
    const std::string row = c().address(i) + "  " + agentAt(i) + "  OK ";
    const size_t at = r.output.find(row);
    ASSERT_NE(at, std::string::npos) << describe(r);
    EXPECT_NE(
        r.output.substr(at, r.output.find('\n', at) - at).find(" " HVD_E2E_PROJECT_VERSION " "),
        std::string::npos)
        << describe(r);
  }
  EXPECT_NE(r.output.find("all 3 agent(s) OK (hvdrun " HVD_E2E_PROJECT_VERSION ")"),
            std::string::npos)
      << describe(r);
  EXPECT_LT(r.seconds, 10) << describe(r);

  int status = -1;
  const std::string facts = jsonFacts(&status);
  EXPECT_EQ(status, 0);
  EXPECT_NE(facts.find("ok True\n"), std::string::npos) << facts;
  EXPECT_NE(facts.find("hvdrun " HVD_E2E_PROJECT_VERSION " 1000000\n"), std::string::npos) << facts;
  for (int i = 0; i < kHosts; ++i) {
    // Every agent said its time, within a second of ours (one machine, one clock).
    const std::string host = healthyHostFacts(i, HVD_E2E_PROJECT_VERSION, "OK");
    const size_t at = facts.find(host);
    ASSERT_NE(at, std::string::npos) << facts;
    EXPECT_EQ(facts.substr(facts.find(' ', at + host.size() + 1), 16), " True True True\n")
        << facts;
  }
  EXPECT_EQ(facts.find("problem"), std::string::npos) << facts;
}

TEST_F(E2eDoctor, AWrongKeyIsAnAuthenticationFindingForEveryAgent) {
  const std::string wrongKey = dir_.file("other.key");
  ASSERT_EQ(run({HVDRUN_PATH, "keygen", "--key-file", wrongKey}, 30s).status, 0);
  std::vector<std::string> argv = doctor();
  argv[5] = wrongKey;  // --key-file's value
  const RunResult r = run(argv, 30s);
  EXPECT_EQ(r.status, 1) << describe(r);
  for (int i = 0; i < kHosts; ++i) {
    EXPECT_NE(r.output.find(c().address(i) + "  " + agentAt(i) + "  AUTH FAILED"),
              std::string::npos)
        << describe(r);
    EXPECT_NE(r.output.find(c().address(i) + " (" + agentAt(i) +
                            "): the agent refused hvdrun's call: authentication failed"),
              std::string::npos)
        << describe(r);
  }
}

TEST_F(E2eDoctor, AStoppedAgentIsUnreachableNamedWithItsAddress) {
  stopAgent(1);
  const RunResult r = run(doctor(), 30s);
  EXPECT_EQ(r.status, 1) << describe(r);
  EXPECT_NE(r.output.find(c().address(1) + "  " + agentAt(1) + "  UNREACHABLE"), std::string::npos)
      << describe(r);
  EXPECT_NE(r.output.find("1 problem(s) on 1 of 3 host(s)"), std::string::npos) << describe(r);
  EXPECT_NE(r.output.find("  " + c().address(1) + " (" + agentAt(1) + "): agent unreachable: "),
            std::string::npos)
      << describe(r);
  for (int i : {0, 2}) {
    EXPECT_NE(r.output.find(c().address(i) + "  " + agentAt(i) + "  OK "), std::string::npos)
        << describe(r);
  }

  int status = -1;
  const std::string facts = jsonFacts(&status);
  EXPECT_EQ(status, 1);
  EXPECT_NE(facts.find("ok False\n"), std::string::npos) << facts;
  EXPECT_NE(facts.find("host " + c().address(1) + " " + agentAt(1) +
                       " UNREACHABLE False False None None False False False\n"),
            std::string::npos)
      << facts;
  EXPECT_NE(facts.find(healthyHostFacts(0, HVD_E2E_PROJECT_VERSION, "OK")), std::string::npos)
      << facts;
  EXPECT_NE(facts.find("problem unreachable " + c().address(1) + " " + agentAt(1) + "\n"),
            std::string::npos)
      << facts;
  EXPECT_EQ(countOf(facts, "problem "), 1u) << facts;
}

TEST_F(E2eDoctor, AnAgentOfAnotherVersionIsAMismatchNamingBothVersions) {
  stopAgent(2);
  // The test-only agent where the real one was: same address, key and flags.
  other_ = std::make_unique<Child>(std::vector<std::string>{
      "ip", "netns", "exec", c().ns(2), "env", "HVD_ALLOW_RUN_AS_ROOT_CONFIRM=1",
      HVD_E2E_OTHER_AGENT_PATH, "--listen", agentAt(2), "--key-file", c().keyFile(), "--state-dir",
      dir_.file("other-state"), "--allow-run-as-root", "--log-level", "info"});
  ASSERT_TRUE(other_->waitForOutput(
      [&](const std::string& out) {
        return out.find(std::string("hvdagent ") + kOtherVersion + ": listening on") !=
               std::string::npos;
      },
      20s))
      << other_->output();

  const RunResult r = run(doctor(), 30s);
  EXPECT_EQ(r.status, 1) << describe(r);
  EXPECT_NE(
      r.output.find(c().address(2) + "  " + agentAt(2) + "  VERSION MISMATCH  " + kOtherVersion),
      std::string::npos)
      << describe(r);
  EXPECT_NE(r.output.find("  " + c().address(2) + " (" + agentAt(2) + "): hvdagent " +
                          kOtherVersion + " but hvdrun " HVD_E2E_PROJECT_VERSION ": "),
            std::string::npos)
      << describe(r);
  EXPECT_NE(r.output.find("1 problem(s) on 1 of 3 host(s)"), std::string::npos) << describe(r);

  int status = -1;
  const std::string facts = jsonFacts(&status);
  EXPECT_EQ(status, 1);
  EXPECT_NE(facts.find("ok False\n"), std::string::npos) << facts;
  EXPECT_NE(facts.find(healthyHostFacts(2, kOtherVersion, "VERSION_MISMATCH")), std::string::npos)
      << facts;
  EXPECT_NE(facts.find(healthyHostFacts(1, HVD_E2E_PROJECT_VERSION, "OK")), std::string::npos)
      << facts;
  EXPECT_NE(facts.find("problem version_mismatch " + c().address(2) + " " + agentAt(2) + "\n"),
            std::string::npos)
      << facts;
  EXPECT_EQ(countOf(facts, "problem "), 1u) << facts;
}

}  // namespace
}  // namespace hvd::e2e
