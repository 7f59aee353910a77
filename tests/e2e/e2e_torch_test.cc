// An unmodified torch.distributed script under hvdrun across two netns hosts: examples/torch_ddp.py
// trains a small model with DistributedDataParallel on gloo, initialised with init_method="env://"
// from the RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR and MASTER_PORT
// every rank gets, and its final parameters must equal a single-process run on the same global
// batch (float64; summation order differs, so within 1e-12). Debian's python3-torch under
// /usr/bin/python3 (installed by scripts/install-deps.sh); skipped with the reason where it cannot
// be imported.
#include <cmath>
#include <cstdlib>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "e2e_support.h"

namespace hvd::e2e {
namespace {

using namespace std::chrono_literals;

constexpr const char* kPython = "/usr/bin/python3";

// "param <name> <index> <value>" lines (tags stripped) -> value.
std::map<std::string, double> params(const std::string& output) {
  std::map<std::string, double> out;
  const std::regex line(R"((?:^|\n)(?:\[0\]<stdout>: )?param (\S+) (\d+) (\S+))");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line);
       it != std::sregex_iterator(); ++it) {
    out[(*it)[1].str() + "/" + (*it)[2].str()] = std::stod((*it)[3].str());
  }
  return out;
}

TEST_F(E2e, TorchDdpScriptRunsUnchangedAcrossTwoHostsAndMatchesOneProcess) {
  if (std::system("/usr/bin/python3 -c 'import torch.distributed as d; "
                  "assert d.is_gloo_available()' > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "no torch.distributed with gloo for /usr/bin/python3 (apt-get install "
                    "python3-torch)";
  }
  const RunResult single = run({kPython, HVD_TORCH_DDP_SCRIPT, "--single"}, 120s);
  ASSERT_EQ(single.status, 0) << describe(single);
  const std::map<std::string, double> want = params(single.output);
  ASSERT_EQ(want.size(), 8u * 16 + 16 + 16 + 1) << describe(single);

  // gloo picks its address from an interface: the namespace's own (eth0), not the hostname,
  // which every namespace shares with this machine.
  const RunResult ddp =
      run(hvdrunArgs(cluster(), 4, cluster().hostList(2),
                     {"-x", "GLOO_SOCKET_IFNAME=eth0", "--", kPython, HVD_TORCH_DDP_SCRIPT}),
          180s);
  ASSERT_EQ(ddp.status, 0) << describe(ddp);
  for (int rank = 0; rank < 4; ++rank) {
    const int local = rank % 2;
    const std::string expect = "torch rank=" + std::to_string(rank) +
                               " world=4 local_rank=" + std::to_string(local) +
                               " local_world=2 group_rank=" + std::to_string(rank / 2) +
                               " master=" + cluster().address(0) + ":";
    EXPECT_EQ(countOf(ddp.output, expect), 1u) << describe(ddp);
  }
  const std::map<std::string, double> got = params(ddp.output);
  ASSERT_EQ(got.size(), want.size()) << describe(ddp);
  for (const auto& [name, value] : want) {
    ASSERT_EQ(got.count(name), 1u) << name;
    EXPECT_NEAR(got.at(name), value, 1e-12 * std::max(1.0, std::fabs(value))) << name;
  }
}

}  // namespace
}  // namespace hvd::e2e
