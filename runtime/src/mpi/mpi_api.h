// How libhvd reaches MPI without linking it: the plugin libhvd_mpi.so (mpi/plugin_abi.h),
// opened with dlopen the first time something needs MPI (the rendezvous of a job mpirun
// started without a store; HVD_CPU_BACKEND=mpi). A program that mpirun did not start never
// loads it, and a libhvd built where MPI is missing simply has no plugin to load.
//
// The plugin is looked for next to libhvd.so (found with dladdr), then through the dynamic
// loader's search (LD_LIBRARY_PATH, the ldconfig cache). It is opened RTLD_GLOBAL: Open MPI
// dlopens components of its own that expect libmpi's symbols to be global.
//
// MPI's lifetime is the process's: the first Session initialises it (MPI_Init_thread with
// MPI_THREAD_MULTIPLE) unless the program already did, and it stays initialised across
// hvd::shutdown()/init() cycles, since MPI cannot be initialised twice. If hvd initialised it,
// hvd finalizes it at process exit (atexit, or the last Session's end when that comes later, as
// for a Runtime owned by a static object); if the program did, the program finalizes it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gpu/loader.h"
#include "mpi/plugin_abi.h"

namespace hvd::mpi {

inline constexpr const char* kPluginName = "libhvd_mpi.so";

// Where the plugin is looked for, in order: <directory of libhvd.so>/libhvd_mpi.so, then
// "libhvd_mpi.so" (the dynamic loader's search).
std::vector<std::string> pluginCandidates();

// True when this libhvd was built with its MPI plugin (CMake found MPI).
bool pluginBuilt();

// An opened plugin: its table, valid while the library stays loaded (as long as this lives).
class Plugin {
 public:
  Plugin(gpu::DlLibrary library, const hvd_mpi_plugin_v1* table, std::string path)
      : library_(std::move(library)), table_(table), path_(std::move(path)) {}
  const hvd_mpi_plugin_v1& table() const { return *table_; }
  const std::string& path() const { return path_; }

 private:
  gpu::DlLibrary library_;
  const hvd_mpi_plugin_v1* table_;
  std::string path_;
};

// Opens the first of `candidates` that loads and returns its ABI-1 table. Returns null and
// sets *why (each candidate's dlerror(), a missing entry point, another ABI version).
std::unique_ptr<Plugin> openPlugin(const std::vector<std::string>& candidates, std::string* why);

// The error Session::acquire gives when no plugin loads: "<purpose>: this libhvd was built
// without MPI (libhvd_mpi.so not found: <why>)", or for a build with MPI "<purpose>: cannot
// load hvd's MPI plugin (<why>)" (a plugin missing from an install, or its libmpi).
std::string pluginLoadError(const std::string& purpose, bool built, const std::string& why);

// Turns a plugin return code into an exception: HVD_MPI_ERR_ARGUMENT -> InvalidArgumentError,
// HVD_MPI_ERR_TIMEOUT -> TimeoutError, anything else -> BackendError, each "<what>: <err>".
void check(int rc, const std::string& what, const char* err);

// Holds MPI initialised (see above) and gives the plugin's table.
class Session {
 public:
  // The process's session: opens the plugin (once; it stays loaded) and initialises MPI
  // unless the program or an earlier session did. `purpose` starts every error message
  // ("HVD_CPU_BACKEND=mpi"). With `needThreadMultiple`, MPI running below
  // MPI_THREAD_MULTIPLE is an error (the engine's thread and the caller's call MPI at once).
  // Throws hvd::BackendError naming what failed.
  static std::shared_ptr<Session> acquire(const std::string& purpose, bool needThreadMultiple);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const hvd_mpi_plugin_v1& api() const { return *api_; }
  // The first line of MPI_Get_library_version: "Open MPI v4.1.4, package: ...".
  const std::string& libraryVersion() const { return version_; }
  // libraryVersion() up to its first comma: "Open MPI v4.1.4".
  std::string shortVersion() const;
  // Whether hvd (not the program) initialised MPI.
  bool initializedByHvd() const;

 private:
  Session(const hvd_mpi_plugin_v1* api, std::string version)
      : api_(api), version_(std::move(version)) {}
  const hvd_mpi_plugin_v1* api_;
  std::string version_;
};

// One communicator of its own: MPI_Comm_dup(MPI_COMM_WORLD), errors returned. Creating it is
// collective: every rank creates its communicators in the same order. Keeps MPI initialised.
class Comm {
 public:
  explicit Comm(std::shared_ptr<Session> session);
  ~Comm();  // MPI_Comm_free (a failure is logged)
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  hvd_mpi_comm* handle() const { return comm_; }
  const hvd_mpi_plugin_v1& api() const { return session_->api(); }
  Session& session() const { return *session_; }

 private:
  std::shared_ptr<Session> session_;
  hvd_mpi_comm* comm_ = nullptr;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace hvd::mpi
