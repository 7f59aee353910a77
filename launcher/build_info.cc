#include "launcher/build_info.h"

#include <memory>

#include "hvd/error.hpp"
#include "runtime/src/gpu/cuda_api.h"
#include "runtime/src/gpu/loader.h"
#include "runtime/src/gpu/nccl_api.h"

#ifndef HVD_VERSION_STRING
#error "HVD_VERSION_STRING must be defined by the build (launcher/sources.cmake)"
#endif
#ifndef HVD_BUILD_NCCL
#define HVD_BUILD_NCCL 0
#endif
#ifndef HVD_BUILD_NCCL_VERSION
#define HVD_BUILD_NCCL_VERSION ""
#endif
#ifndef HVD_BUILD_MPI
#define HVD_BUILD_MPI 0
#endif

namespace hvd::launcher {
namespace {

// "NCCL: yes (built against NCCL 2.27; libnccl.so.2 loads: NCCL 2.27.3)". The library is the
// one a worker would load ($HVD_NCCL_LIBRARY or libnccl.so.2), on this host.
std::string ncclLine() {
  if (!HVD_BUILD_NCCL) return "NCCL: no (built without the NCCL backend)\n";
  const std::string library = gpu::ncclLibraryFromEnv();
  std::string line = std::string("NCCL: yes (built against NCCL ") + HVD_BUILD_NCCL_VERSION + "; ";
  std::string why;
  if (std::unique_ptr<gpu::NcclApi> nccl = gpu::loadNccl(library, &why)) {
    line += library + " loads: NCCL " + gpu::ncclVersionText(nccl->version());
  } else {
    line += library + " does not load: " + why;
  }
  return line + ")\n";
}

// "CUDA driver: yes (libcuda.so.1 loads: 8 devices)" or "CUDA driver: no (why)".
std::string cudaLine() {
  std::string why;
  std::unique_ptr<gpu::CudaApi> cuda = gpu::loadCuda(gpu::kDefaultCudaLibrary, &why);
  if (cuda == nullptr) return "CUDA driver: no (" + why + ")\n";
  std::string line = std::string("CUDA driver: yes (") + gpu::kDefaultCudaLibrary + " loads: ";
  try {
    const int devices = cuda->deviceCount();
    line += std::to_string(devices) + (devices == 1 ? " device" : " devices");
  } catch (const hvd::Error& e) {
    line += e.what();
  }
  return line + ")\n";
}

}  // namespace

std::string hvdrunVersion() { return HVD_VERSION_STRING; }

std::string versionText() { return "hvdrun " + hvdrunVersion() + "\n"; }

std::string checkBuildText() {
  std::string text = versionText();
  // TCP and same-host shared memory are always built; NCCL and MPI only when CMake found them.
  text += "transports: tcp shm\n";
  text += ncclLine();
  text += cudaLine();
  // With MPI, libhvd's plugin libhvd_mpi.so (libhvd itself never links MPI).
  text += HVD_BUILD_MPI ? "MPI: yes (plugin libhvd_mpi.so: rendezvous under mpirun, "
                          "HVD_CPU_BACKEND=mpi)\n"
                        : "MPI: no\n";
  // The control plane always links gRPC with its TLS support (--tls-cert/--tls-key/--tls-ca).
  text += "TLS: yes\n";
  return text;
}

}  // namespace hvd::launcher
