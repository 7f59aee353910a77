// The NCCL and CUDA loaders against the real libraries of this host: what loads, what does not
// and why, and that hvd's own checks refuse what NCCL lacks before calling it. CPU CI machines
// have libnccl.so.2 but no driver; on a GPU machine the driver loads instead (both pass).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "gpu/cuda_api.h"
#include "gpu/loader.h"
#include "gpu/nccl_api.h"
#include "hvd/hvd.h"
#include "hvd/hvd.hpp"

#ifndef HVD_TEST_HAVE_NCCL
#error "HVD_TEST_HAVE_NCCL must be defined by tests/unit/gpu_api.cmake"
#endif

namespace hvd::gpu {
namespace {

using ::testing::HasSubstr;

// Sets (or, with nullopt, unsets) an environment variable for the scope of a test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

#define SKIP_WITHOUT_NCCL() \
  if (!HVD_TEST_HAVE_NCCL) GTEST_SKIP() << "this libhvd was built without the NCCL backend"

TEST(NcclResultName, NamesEveryResultAsNcclDoes) {
  EXPECT_STREQ(ncclResultName(NcclResult::kSuccess), "ncclSuccess");
  EXPECT_STREQ(ncclResultName(NcclResult::kUnhandledCudaError), "ncclUnhandledCudaError");
  EXPECT_STREQ(ncclResultName(NcclResult::kSystemError), "ncclSystemError");
  EXPECT_STREQ(ncclResultName(NcclResult::kInternalError), "ncclInternalError");
  EXPECT_STREQ(ncclResultName(NcclResult::kInvalidArgument), "ncclInvalidArgument");
  EXPECT_STREQ(ncclResultName(NcclResult::kInvalidUsage), "ncclInvalidUsage");
  EXPECT_STREQ(ncclResultName(NcclResult::kRemoteError), "ncclRemoteError");
  EXPECT_STREQ(ncclResultName(NcclResult::kInProgress), "ncclInProgress");
  EXPECT_STREQ(ncclResultName(static_cast<NcclResult>(99)), "ncclUnknownResult");
}

TEST(NcclVersionText, FormatsOldAndNewVersionCodes) {
  EXPECT_EQ(ncclVersionText(22703), "2.27.3");
  EXPECT_EQ(ncclVersionText(21400), "2.14.0");
  EXPECT_EQ(ncclVersionText(21903), "2.19.3");
  EXPECT_EQ(ncclVersionText(2804), "2.8.4");  // before 2.9: X*1000 + Y*100 + Z
}

TEST(NcclLibraryCandidates, DefaultNameFallsBackToCudaHomeNcclHomeAndUsrLocalCuda) {
  ScopedEnv cudaHome("CUDA_HOME", "/opt/cuda");
  ScopedEnv ncclHome("NCCL_HOME", "/opt/nccl");
  EXPECT_EQ(ncclLibraryCandidates("libnccl.so.2"),
            (std::vector<std::string>{"libnccl.so.2", "/opt/cuda/lib64/libnccl.so.2",
                                      "/opt/nccl/lib/libnccl.so.2",
                                      "/usr/local/cuda/lib64/libnccl.so.2"}));
}

TEST(NcclLibraryCandidates, UnsetOrEmptyHomesAreSkippedAndDuplicatesDropped) {
  {
    ScopedEnv cudaHome("CUDA_HOME", std::nullopt);
    ScopedEnv ncclHome("NCCL_HOME", "");
    EXPECT_EQ(ncclLibraryCandidates("libnccl.so.2"),
              (std::vector<std::string>{"libnccl.so.2", "/usr/local/cuda/lib64/libnccl.so.2"}));
  }
  ScopedEnv cudaHome("CUDA_HOME", "/usr/local/cuda");
  ScopedEnv ncclHome("NCCL_HOME", std::nullopt);
  EXPECT_EQ(ncclLibraryCandidates("libnccl.so.2"),
            (std::vector<std::string>{"libnccl.so.2", "/usr/local/cuda/lib64/libnccl.so.2"}));
}

TEST(NcclLibraryCandidates, AnyOtherNameIsTriedAlone) {
  ScopedEnv cudaHome("CUDA_HOME", "/opt/cuda");
  EXPECT_EQ(ncclLibraryCandidates("/opt/nccl/lib/libnccl.so.2"),
            (std::vector<std::string>{"/opt/nccl/lib/libnccl.so.2"}));
  EXPECT_EQ(ncclLibraryCandidates("libnccl.so"), (std::vector<std::string>{"libnccl.so"}));
}

TEST(NcclLibraryFromEnv, HvdNcclLibraryOverridesTheDefaultUnlessEmpty) {
  {
    ScopedEnv library("HVD_NCCL_LIBRARY", std::nullopt);
    EXPECT_EQ(ncclLibraryFromEnv(), kDefaultNcclLibrary);
  }
  {
    ScopedEnv library("HVD_NCCL_LIBRARY", "");
    EXPECT_EQ(ncclLibraryFromEnv(), kDefaultNcclLibrary);
  }
  ScopedEnv library("HVD_NCCL_LIBRARY", "/opt/nccl/lib/libnccl.so.2");
  EXPECT_EQ(ncclLibraryFromEnv(), "/opt/nccl/lib/libnccl.so.2");
}

TEST(NcclBuilt, MatchesTheBuildInTheCAndCppApis) {
  EXPECT_EQ(ncclCompiled(), static_cast<bool>(HVD_TEST_HAVE_NCCL));
  EXPECT_EQ(hvd::ncclBuilt(), static_cast<bool>(HVD_TEST_HAVE_NCCL));
  EXPECT_EQ(hvd_nccl_built(), HVD_TEST_HAVE_NCCL ? 1 : 0);
}

TEST(LoadNccl, AMissingPathIsNullAndTheReasonNamesThePath) {
  const std::string path = "/nonexistent/hvd-test/libnccl.so.2";
  std::string why;
  EXPECT_EQ(loadNccl(path, &why), nullptr);
  EXPECT_THAT(why, HasSubstr(HVD_TEST_HAVE_NCCL ? path : kBuiltWithoutNccl));
}

TEST(LoadNccl, ALibraryWithoutNcclNamesTheMissingSymbol) {
  SKIP_WITHOUT_NCCL();
  std::string why;
  EXPECT_EQ(loadNccl("libc.so.6", &why), nullptr);
  EXPECT_EQ(why, "libc.so.6 lacks ncclGetVersion (NCCL 2.14 or later is required)");
}

TEST(LoadNccl, WithoutTheBackendEveryLoadSaysItIsNotBuilt) {
  if (HVD_TEST_HAVE_NCCL) GTEST_SKIP() << "this libhvd has the NCCL backend";
  std::string why;
  EXPECT_EQ(loadNccl(kDefaultNcclLibrary, &why), nullptr);
  EXPECT_EQ(why, kBuiltWithoutNccl);
  EXPECT_EQ(loadCuda(kDefaultCudaLibrary, &why), nullptr);
  EXPECT_EQ(why, kBuiltWithoutCuda);
  EXPECT_EQ(hvd::ncclVersion(), "");
  EXPECT_STREQ(hvd_nccl_version(), "");
}

// CMake only builds the backend where it found libnccl, so the build host can load it.
TEST(LoadNccl, TheDefaultLibraryLoadsOnTheBuildHostAndReportsItsVersion) {
  SKIP_WITHOUT_NCCL();
  ScopedEnv library("HVD_NCCL_LIBRARY", std::nullopt);
  std::string why;
  std::unique_ptr<NcclApi> nccl = loadNccl(kDefaultNcclLibrary, &why);
  ASSERT_NE(nccl, nullptr) << why;
  EXPECT_GE(nccl->version(), 21400);  // ncclCommInitRankConfig
  EXPECT_EQ(hvd::ncclVersion(), ncclVersionText(nccl->version()));
  EXPECT_EQ(std::string(hvd_nccl_version()), ncclVersionText(nccl->version()));
  EXPECT_NE(nccl->errorString(NcclResult::kSystemError), "");
  EXPECT_NE(nccl->errorString(NcclResult::kSystemError), nccl->errorString(NcclResult::kSuccess));
}

TEST(NcclVersion, HonoursHvdNcclLibrary) {
  ScopedEnv library("HVD_NCCL_LIBRARY", "/nonexistent/hvd-test/libnccl.so.2");
  EXPECT_EQ(hvd::ncclVersion(), "");
  EXPECT_STREQ(hvd_nccl_version(), "");
}

// A type or op outside hvd's enums must come back as kInvalidArgument from hvd's mapping, with
// NCCL never called: NCCL records the last failure of any call (ncclGetLastError), so a call
// that reached it would replace the message a deliberate bad call left there first. (Every
// type and op hvd has maps to NCCL's, so there is no valid pair to refuse.)
TEST(LoadNccl, TypesAndOpsNcclLacksAreRefusedWithoutCallingNccl) {
  SKIP_WITHOUT_NCCL();
  std::string why;
  std::unique_ptr<NcclApi> nccl = loadNccl(kDefaultNcclLibrary, &why);
  ASSERT_NE(nccl, nullptr) << why;
  float buffer[2] = {1, 2};
  EXPECT_EQ(nccl->broadcast(buffer, buffer, 1, DataType::kFloat32, 0, nullptr, nullptr),
            NcclResult::kInvalidArgument);  // NCCL's own check of the null communicator
  const std::string before = nccl->lastError(nullptr);

  const auto badType = static_cast<DataType>(kNumDataTypes);
  const auto badOp = static_cast<ReduceOp>(kNumReduceOps);
  EXPECT_EQ(nccl->allReduce(buffer, buffer, 1, badType, ReduceOp::kSum, nullptr, nullptr),
            NcclResult::kInvalidArgument);
  EXPECT_EQ(nccl->allReduce(buffer, buffer, 1, DataType::kFloat32, badOp, nullptr, nullptr),
            NcclResult::kInvalidArgument);
  EXPECT_EQ(nccl->reduceScatter(buffer, buffer, 1, DataType::kFloat32, badOp, nullptr, nullptr),
            NcclResult::kInvalidArgument);
  EXPECT_EQ(nccl->allGather(buffer, buffer, 1, badType, nullptr, nullptr),
            NcclResult::kInvalidArgument);
  EXPECT_EQ(nccl->broadcast(buffer, buffer, 1, badType, 0, nullptr, nullptr),
            NcclResult::kInvalidArgument);
  EXPECT_EQ(nccl->send(buffer, 1, badType, 0, nullptr, nullptr), NcclResult::kInvalidArgument);
  EXPECT_EQ(nccl->recv(buffer, 1, badType, 0, nullptr, nullptr), NcclResult::kInvalidArgument);
  EXPECT_EQ(nccl->lastError(nullptr), before);
}

// No driver on CPU machines: null with the loader's reason. With a driver, the devices count.
TEST(LoadCuda, TheDriverLoadsOrTheReasonSaysWhyNot) {
  std::string why;
  std::unique_ptr<CudaApi> cuda = loadCuda(kDefaultCudaLibrary, &why);
  if (cuda != nullptr) {
    EXPECT_GE(cuda->deviceCount(), 1);
    return;
  }
  if (!HVD_TEST_HAVE_NCCL) {
    EXPECT_EQ(why, kBuiltWithoutCuda);
  } else if (why.rfind("cuInit failed: ", 0) != 0) {  // a driver without a usable device
    EXPECT_THAT(why, HasSubstr("libcuda.so.1"));
  }
}

TEST(LoadCuda, AMissingPathOrALibraryWithoutTheDriverApiIsNamed) {
  SKIP_WITHOUT_NCCL();
  std::string why;
  EXPECT_EQ(loadCuda("/nonexistent/hvd-test/libcuda.so.1", &why), nullptr);
  EXPECT_THAT(why, HasSubstr("/nonexistent/hvd-test/libcuda.so.1"));
  EXPECT_EQ(loadCuda("libc.so.6", &why), nullptr);
  EXPECT_EQ(why, "libc.so.6 lacks cuInit");
}

}  // namespace
}  // namespace hvd::gpu
