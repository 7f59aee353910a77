#include "launcher/build_info.h"

#ifndef HVD_VERSION_STRING
#error "HVD_VERSION_STRING must be defined by the build (launcher/sources.cmake)"
#endif
#ifndef HVD_BUILD_NCCL
#define HVD_BUILD_NCCL 0
#endif
#ifndef HVD_BUILD_MPI
#define HVD_BUILD_MPI 0
#endif

namespace hvd::launcher {

std::string versionText() { return std::string("hvdrun ") + HVD_VERSION_STRING + "\n"; }

std::string checkBuildText() {
  std::string text = versionText();
  // TCP and same-host shared memory are always built; NCCL and MPI only when CMake found them.
  text += "transports: tcp shm\n";
  text += std::string("NCCL: ") + (HVD_BUILD_NCCL ? "yes" : "no") + "\n";
  text += std::string("MPI: ") + (HVD_BUILD_MPI ? "yes" : "no") + "\n";
  // The control plane always links gRPC with its TLS support (--tls-cert/--tls-key/--tls-ca).
  text += "TLS: yes\n";
  return text;
}

}  // namespace hvd::launcher
