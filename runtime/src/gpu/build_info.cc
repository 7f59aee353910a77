// hvd::ncclBuilt() and hvd::ncclVersion(): what the public API says about the GPU backend.
#include <memory>
#include <string>

#include "gpu/loader.h"
#include "gpu/nccl_api.h"
#include "hvd/hvd.hpp"

namespace hvd {

bool ncclBuilt() { return gpu::ncclCompiled(); }

std::string ncclVersion() {
  // Loaded for the question and released again: NCCL stays mapped (RTLD_NODELETE), so asking
  // twice costs a dlopen of a library already present.
  std::string why;
  std::unique_ptr<gpu::NcclApi> nccl = gpu::loadNccl(gpu::ncclLibraryFromEnv(), &why);
  return nccl != nullptr ? gpu::ncclVersionText(nccl->version()) : std::string();
}

}  // namespace hvd
