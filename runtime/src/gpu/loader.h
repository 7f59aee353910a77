// What the dlopen loaders of libnccl.so.2 and libcuda.so.1 share (dl_nccl_api.cc,
// dl_cuda_api.cc), and the parts of loading that need no CUDA headers, so they are built and
// tested everywhere. Internal to libhvd.
#pragma once

#include <dlfcn.h>

#include <string>
#include <utility>
#include <vector>

namespace hvd::gpu {

// The reason loadNccl / loadCuda give in a libhvd built without CUDA and NCCL's headers.
inline constexpr const char* kBuiltWithoutNccl = "this libhvd was built without the NCCL backend";
inline constexpr const char* kBuiltWithoutCuda =
    "this libhvd was built without CUDA support (no NCCL backend)";

// Where loadNccl looks for `library`, in order: the name itself (the dynamic loader's search:
// LD_LIBRARY_PATH, the ldconfig cache, ...), and for the default name libnccl.so.2 also
// $CUDA_HOME/lib64, $NCCL_HOME/lib and /usr/local/cuda/lib64 (the environment is read at the
// call; unset or empty variables are skipped, duplicates dropped).
std::vector<std::string> ncclLibraryCandidates(const std::string& library);

// The library nccl_version() and `hvdrun --check-build` load: $HVD_NCCL_LIBRARY when set and
// not empty, else kDefaultNcclLibrary.
std::string ncclLibraryFromEnv();

// NCCL_VERSION_CODE as text: 22703 -> "2.27.3" (codes of NCCL before 2.9, e.g. 2804, too).
std::string ncclVersionText(int code);

// A library opened with dlopen, closed by the destructor. Movable, not copyable.
class DlLibrary {
 public:
  DlLibrary() = default;
  DlLibrary(DlLibrary&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  DlLibrary& operator=(DlLibrary&& other) noexcept {
    std::swap(handle_, other.handle_);
    return *this;
  }
  DlLibrary(const DlLibrary&) = delete;
  DlLibrary& operator=(const DlLibrary&) = delete;
  ~DlLibrary() {
    if (handle_ != nullptr) dlclose(handle_);
  }

  // Opens the first of `candidates` that loads; otherwise returns false and sets *why to each
  // candidate's dlerror() text, joined by "; ".
  bool open(const std::vector<std::string>& candidates, int flags, std::string* why) {
    std::string errors;
    for (const std::string& name : candidates) {
      dlerror();
      void* handle = dlopen(name.c_str(), flags);
      if (handle != nullptr) {
        if (handle_ != nullptr) dlclose(handle_);
        handle_ = handle;
        return true;
      }
      const char* error = dlerror();
      if (!errors.empty()) errors += "; ";
      errors += error != nullptr ? error : name + ": dlopen failed";
    }
    if (why != nullptr) *why = errors;
    return false;
  }

  // Resolves `name` into *fn (a function pointer of the declared type); false when missing.
  template <typename Fn>
  bool resolve(const char* name, Fn* fn) const {
    void* symbol = dlsym(handle_, name);
    *fn = reinterpret_cast<Fn>(symbol);
    return symbol != nullptr;
  }

 private:
  void* handle_ = nullptr;
};

}  // namespace hvd::gpu
