// What this hvdrun build is and has, for `hvdrun --version` and `hvdrun --check-build`. The
// facts come from CMake at build time (compile definitions set in launcher/sources.cmake from
// HvdDependencies' detection), so the answer describes the binary, not the machine it runs on.
#pragma once

#include <string>

namespace hvd::launcher {

// "hvdrun 0.1.0\n".
std::string versionText();

// One line per capability, e.g. "transports: tcp shm\nNCCL: no\nMPI: yes\nTLS: yes\n", headed by
// the version line.
std::string checkBuildText();

}  // namespace hvd::launcher
