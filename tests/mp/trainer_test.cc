// hvd-train (examples/trainer) under the real hvdrun: np ranks with per-rank batch b must end
// at the parameters of one process trained with batch np*b (within float32 rounding: only the
// order of the gradient sums differs), and the loss must fall.
//
// Why two activations. With ReLU, "within rounding" holds only until some pre-activation lies
// within rounding of 0: one run then takes the unit's gradient and the other does not, and the
// runs separate by lr/rows at once (seen at step 10 of a 32-128-128-10 run). With fusion on, the
// engine's summation order depends on which tensors a cycle fuses, i.e. on timing, so whether
// that happens varies from run to run. So: tanh (smooth: rounding differences stay rounding)
// runs with fusion on, as users run; ReLU runs with HVD_FUSION_THRESHOLD=0, which fixes every
// tensor's summation order and makes the comparison reproducible.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <regex>
#include <string>
#include <vector>

#include "mlp.h"

namespace {

struct Result {
  int status = -1;  // exit code, or 128 + signal
  std::string output;
};

// Runs `command` through sh, stdout and stderr together.
Result run(const std::string& command) {
  Result r;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return r;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) r.output.append(buffer, n);
  const int status = ::pclose(pipe);
  if (WIFEXITED(status)) r.status = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.status = 128 + WTERMSIG(status);
  return r;
}

// The loss of every epoch line rank 0 printed:
//   "epoch   1  loss 0.985820  accuracy  66.38%  time 0.238 s  comm  90.9%"
std::vector<double> epochLosses(const std::string& output) {
  std::vector<double> losses;
  static const std::regex line(
      R"(epoch +\d+ +loss +([0-9.]+) +accuracy +[0-9.]+% +time +[0-9.]+ s +comm +[0-9.]+%)");
  for (std::sregex_iterator it(output.begin(), output.end(), line), end; it != end; ++it) {
    losses.push_back(std::stod((*it)[1].str()));
  }
  return losses;
}

std::string tempPath(const std::string& name) {
  return ::testing::TempDir() + "hvd_trainer_" + std::to_string(::getpid()) + "_" + name;
}

void expectSameTraining(int np, int batch, int epochs, const std::string& activation) {
  const std::string args = " --epochs " + std::to_string(epochs) + " --batch " +
                           std::to_string(batch) + " --samples 4096 --seed 7 --activation " +
                           activation;
  const std::string env = activation == "relu" ? " -x HVD_FUSION_THRESHOLD=0" : "";
  const std::string distPath = tempPath("np" + std::to_string(np) + ".bin");
  const std::string refPath = tempPath("ref" + std::to_string(np) + ".bin");

  const Result dist =
      run(std::string(HVDRUN_PATH) + " -np " + std::to_string(np) + " --no-tag-output" + env +
          " -- " + HVD_TRAIN_PATH + args + " --dump-params " + distPath);
  ASSERT_EQ(dist.status, 0) << dist.output;
  const Result ref = run(std::string(HVD_TRAIN_PATH) + " --reference --np-equivalent " +
                         std::to_string(np) + args + " --dump-params " + refPath);
  ASSERT_EQ(ref.status, 0) << ref.output;
  EXPECT_NE(dist.output.find(std::to_string(np) + " ranks"), std::string::npos) << dist.output;

  // The loss fell, and per epoch it is the reference's (printed with 6 decimals).
  const std::vector<double> distLoss = epochLosses(dist.output);
  const std::vector<double> refLoss = epochLosses(ref.output);
  ASSERT_EQ(distLoss.size(), static_cast<size_t>(epochs)) << dist.output;
  ASSERT_EQ(refLoss.size(), static_cast<size_t>(epochs)) << ref.output;
  EXPECT_LT(distLoss.back(), 0.8 * distLoss.front()) << dist.output;
  for (int e = 0; e < epochs; ++e) {
    EXPECT_NEAR(distLoss[e], refLoss[e], 1e-4) << "epoch " << e + 1 << "\n"
                                               << dist.output << ref.output;
  }

  const std::vector<float> d = hvd_train::loadParameters(distPath);
  const std::vector<float> r = hvd_train::loadParameters(refPath);
  ASSERT_EQ(d.size(), r.size());
  ASSERT_FALSE(r.empty());
  double worst = 0;
  size_t worstAt = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    const double excess = std::fabs(static_cast<double>(d[i]) - r[i]) /
                          std::max(1.0, std::fabs(static_cast<double>(r[i])));
    if (excess > worst) {
      worst = excess;
      worstAt = i;
    }
  }
  EXPECT_LE(worst, 1e-4) << "parameter " << worstAt << ": np " << np << " " << d[worstAt]
                         << ", reference " << r[worstAt];
  std::printf("np %d %s: max relative parameter difference to the reference %.3g (%zu values)\n",
              np, activation.c_str(), worst, r.size());
  std::remove(distPath.c_str());
  std::remove(refPath.c_str());
}

TEST(Trainer, OneRankMatchesReference) { expectSameTraining(1, 64, 2, "relu"); }
TEST(Trainer, TwoRanksMatchReferenceWithDoubleBatch) { expectSameTraining(2, 32, 3, "relu"); }
TEST(Trainer, FourRanksMatchReferenceWithFourfoldBatch) { expectSameTraining(4, 16, 3, "relu"); }
TEST(Trainer, TwoRanksFusedMatchReference) { expectSameTraining(2, 32, 3, "tanh"); }
TEST(Trainer, FourRanksFusedMatchReference) { expectSameTraining(4, 16, 3, "tanh"); }

TEST(Trainer, UsageErrorsExitTwo) {
  const Result r = run(std::string(HVD_TRAIN_PATH) + " --frobnicate 1");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("unknown option '--frobnicate'"), std::string::npos) << r.output;
}

TEST(Trainer, WithoutLauncherSaysHowToRun) {
  // No worker environment and no --reference: hvd::init() fails and says what it expects.
  const Result r =
      run("env -u HVD_RANK -u HVD_SIZE " + std::string(HVD_TRAIN_PATH) + " --epochs 1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("HVD_RANK"), std::string::npos) << r.output;
}

}  // namespace
