// The parts of the NCCL and CUDA loaders every libhvd has. Whether this libhvd has the real
// loaders is decided here and nowhere else: with CUDA and NCCL's headers (HVD_HAVE_NCCL, set by
// api.cmake) dl_nccl_api.cc and dl_cuda_api.cc define ncclCompiled, loadNccl and loadCuda;
// without them the stubs below say why there is no GPU backend.
#include "gpu/nccl_api.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "contract/worker_variables.h"
#include "gpu/cuda_api.h"
#include "gpu/loader.h"

namespace hvd::gpu {

const char* ncclResultName(NcclResult result) {
  switch (result) {
    case NcclResult::kSuccess:
      return "ncclSuccess";
    case NcclResult::kUnhandledCudaError:
      return "ncclUnhandledCudaError";
    case NcclResult::kSystemError:
      return "ncclSystemError";
    case NcclResult::kInternalError:
      return "ncclInternalError";
    case NcclResult::kInvalidArgument:
      return "ncclInvalidArgument";
    case NcclResult::kInvalidUsage:
      return "ncclInvalidUsage";
    case NcclResult::kRemoteError:
      return "ncclRemoteError";
    case NcclResult::kInProgress:
      return "ncclInProgress";
  }
  return "ncclUnknownResult";
}

std::vector<std::string> ncclLibraryCandidates(const std::string& library) {
  std::vector<std::string> candidates{library};
  if (library != kDefaultNcclLibrary) return candidates;
  auto add = [&](std::string path) {
    for (const std::string& c : candidates) {
      if (c == path) return;
    }
    candidates.push_back(std::move(path));
  };
  const char* cudaHome = std::getenv("CUDA_HOME");
  if (cudaHome != nullptr && *cudaHome != '\0') add(std::string(cudaHome) + "/lib64/" + library);
  const char* ncclHome = std::getenv("NCCL_HOME");
  if (ncclHome != nullptr && *ncclHome != '\0') add(std::string(ncclHome) + "/lib/" + library);
  add(std::string("/usr/local/cuda/lib64/") + library);
  return candidates;
}

std::string ncclLibraryFromEnv() {
  const char* library = std::getenv(contract::worker::kNcclLibrary.name);
  return library != nullptr && *library != '\0' ? library : kDefaultNcclLibrary;
}

std::string ncclVersionText(int code) {
  // NCCL_VERSION(X, Y, Z) is X*1000 + Y*100 + Z up to 2.8, X*10000 + Y*100 + Z since 2.9.
  const int major = code >= 10000 ? code / 10000 : code / 1000;
  const int minor = code >= 10000 ? code % 10000 / 100 : code % 1000 / 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
}

#if !(defined(HVD_HAVE_NCCL) && HVD_HAVE_NCCL)

bool ncclCompiled() { return false; }

std::unique_ptr<NcclApi> loadNccl(const std::string& library, std::string* why) {
  if (why != nullptr) *why = kBuiltWithoutNccl;
  return nullptr;
}

std::unique_ptr<CudaApi> loadCuda(const std::string& library, std::string* why) {
  if (why != nullptr) *why = kBuiltWithoutCuda;
  return nullptr;
}

#endif

}  // namespace hvd::gpu
