// Slurm's hostlist and tasks-per-node forms (contract/slurm_hosts.h, contract/slurm_tasks.h): every
// form hvdrun meets in an allocation, and clear errors for malformed ones.
#include "contract/slurm_hosts.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "contract/slurm_tasks.h"
#include "hvd/error.hpp"

namespace hvd::contract {
namespace {

using Names = std::vector<std::string>;

std::string errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const InvalidArgumentError& e) {
    return e.what();
  }
  return "no error";
}

TEST(SlurmHostlist, PlainNamesRangesListsAndPadding) {
  EXPECT_EQ(expandHostlist("n1"), Names{"n1"});
  EXPECT_EQ(expandHostlist("a,b,c"), (Names{"a", "b", "c"}));
  EXPECT_EQ(expandHostlist("node[01-04,07],gpu-a[1-2]"),
            (Names{"node01", "node02", "node03", "node04", "node07", "gpu-a1", "gpu-a2"}));
  EXPECT_EQ(expandHostlist("n[08-11]"), (Names{"n08", "n09", "n10", "n11"}));
  EXPECT_EQ(expandHostlist("n[9-10]"), (Names{"n9", "n10"}));
  EXPECT_EQ(expandHostlist("n[3]"), Names{"n3"});
  EXPECT_EQ(expandHostlist("n[1-2]-ib"), (Names{"n1-ib", "n2-ib"}));
  EXPECT_EQ(expandHostlist("r[1-2]n[1-2]"), (Names{"r1n1", "r1n2", "r2n1", "r2n2"}));
  EXPECT_EQ(expandHostlist("x[1-2],y,z[5]"), (Names{"x1", "x2", "y", "z5"}));
}

TEST(SlurmHostlist, MalformedListsNameTheTokenAndWhatWasExpected) {
  const std::map<std::string, std::string> bad = {
      {"", "is empty"},
      {"n[1-3", "without its ']'"},
      {"n1-3]", "unbalanced"},
      {"n[[1]]", "nested"},
      {"n[3-1]", "runs backwards"},
      {"n[a-b]", "expected [N], [N-M]"},
      {"n[1-]", "expected [N], [N-M]"},
      {"n[]", "expected [N], [N-M]"},
      {"a,,b", "empty host name"},
      {"[1-2]", "a host name before '['"},
      {"n[1-9999999]", "more than"},
  };
  for (const auto& [text, why] : bad) {
    const std::string message = errorOf([&] { expandHostlist(text); });
    EXPECT_NE(message.find(why), std::string::npos) << "'" << text << "': " << message;
    if (!text.empty()) {
      EXPECT_NE(message.find("SLURM_JOB_NODELIST '" + text + "'"), std::string::npos) << message;
    }
  }
}

TEST(SlurmTasksPerNode, CountsAndRepeats) {
  EXPECT_EQ(expandTasksPerNode("4"), std::vector<int>{4});
  EXPECT_EQ(expandTasksPerNode("2(x3),1"), (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(expandTasksPerNode("1,8(x2)"), (std::vector<int>{1, 8, 8}));
  for (const char* bad : {"", "x", "2(x)", "2(x3", "(x3)", "0", "2(x0)", "2,,1", "-1", "2(y3)"}) {
    const std::string message = errorOf([&] { expandTasksPerNode(bad); });
    EXPECT_NE(message.find("SLURM_TASKS_PER_NODE"), std::string::npos) << bad << ": " << message;
  }
}

std::map<std::string, std::string>& fakeEnv() {
  static std::map<std::string, std::string> env;
  return env;
}
const char* lookup(const char* name) {
  auto it = fakeEnv().find(name);
  return it == fakeEnv().end() ? nullptr : it->second.c_str();
}

TEST(SlurmAllocation, HostsAndSlotsFromTheAllocation) {
  fakeEnv() = {};
  EXPECT_EQ(slurmAllocationHosts(lookup), std::nullopt) << "not in an allocation";

  fakeEnv() = {{"SLURM_JOB_ID", "42"},
               {"SLURM_JOB_NODELIST", "node[1-3]"},
               {"SLURM_TASKS_PER_NODE", "2(x2),1"}};
  const auto hosts = slurmAllocationHosts(lookup);
  ASSERT_TRUE(hosts.has_value());
  ASSERT_EQ(hosts->size(), 3u);
  EXPECT_EQ((*hosts)[0], (HostSlots{"node1", 2}));
  EXPECT_EQ((*hosts)[2], (HostSlots{"node3", 1}));

  // Counts that do not match the nodes (a step's view): slots left to each host's GPUs.
  fakeEnv()["SLURM_TASKS_PER_NODE"] = "4";
  const auto gpus = slurmAllocationHosts(lookup);
  ASSERT_TRUE(gpus.has_value());
  EXPECT_EQ((*gpus)[1], (HostSlots{"node2", std::nullopt}));

  fakeEnv() = {{"SLURM_JOB_ID", "42"}};
  EXPECT_NE(errorOf([] { slurmAllocationHosts(lookup); }).find("SLURM_JOB_NODELIST is not"),
            std::string::npos);
}

}  // namespace
}  // namespace hvd::contract
