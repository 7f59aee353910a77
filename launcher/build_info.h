// What this hvdrun build is and has, for `hvdrun --version` and `hvdrun --check-build`. The
// build facts come from CMake at build time (compile definitions set in launcher/sources.cmake
// from HvdDependencies' detection); --check-build adds what this host offers the GPU backend:
// whether the NCCL library and the CUDA driver load here.
#pragma once

#include <string>

namespace hvd::launcher {

// "0.1.0": the version of this build, which every agent should report too (hvdrun doctor).
std::string hvdrunVersion();

// "hvdrun 0.1.0\n".
std::string versionText();

// One line per capability, headed by the version line, e.g.
//   transports: tcp shm
//   NCCL: yes (built against NCCL 2.27; libnccl.so.2 loads: NCCL 2.27.3)
//   CUDA driver: no (libcuda.so.1: cannot open shared object file: No such file or directory)
//   MPI: yes
//   TLS: yes
// "NCCL: no (built without the NCCL backend)" when it is not built. The NCCL library is
// $HVD_NCCL_LIBRARY when set (as for the workers), else libnccl.so.2.
std::string checkBuildText();

}  // namespace hvd::launcher
