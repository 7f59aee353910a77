#include "mpi/mpi_api.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "hvd/error.hpp"
#include "hvd_support/logging.h"

namespace hvd::mpi {
namespace {

constexpr size_t kErrorBytes = 1024;

// What the process knows about MPI. Never destroyed: the atexit handler and Sessions ending
// during static destruction still use it.
struct ProcessState {
  std::mutex mutex;
  bool triedPlugin = false;
  std::unique_ptr<Plugin> plugin;
  std::string pluginWhy;
  std::weak_ptr<Session> session;  // the live session, if any
  bool initializedByHvd = false;   // hvd called MPI_Init_thread: hvd finalizes
  bool finalized = false;
  bool exiting = false;  // the atexit handler ran: the last Session's end finalizes
  bool atexitRegistered = false;
};

ProcessState& state() {
  static ProcessState* s = new ProcessState;
  return *s;
}

const char* threadLevelName(int level) {
  switch (level) {
    case HVD_MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case HVD_MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case HVD_MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    default:
      return "MPI_THREAD_MULTIPLE";
  }
}

// Called with the state's mutex held.
void finalizeLocked(ProcessState& s) {
  if (!s.initializedByHvd || s.finalized || s.plugin == nullptr) return;
  s.finalized = true;
  char err[kErrorBytes] = {0};
  const int rc = s.plugin->table().finalize(err, sizeof(err));
  if (rc != HVD_MPI_OK) logging::get("init")->warn("MPI_Finalize failed: {}", err);
}

void finalizeAtExit() {
  ProcessState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.exiting = true;
  // A session still alive (a Runtime owned by a static object) finalizes when it ends.
  if (s.session.expired()) finalizeLocked(s);
}

std::string directoryOfLibhvd() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&pluginCandidates), &info) == 0 || info.dli_fname == nullptr) {
    return {};
  }
  const std::string path = info.dli_fname;
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

}  // namespace

std::vector<std::string> pluginCandidates() {
  std::vector<std::string> out;
  const std::string dir = directoryOfLibhvd();
  if (!dir.empty()) out.push_back(dir + "/" + kPluginName);
  out.push_back(kPluginName);
  return out;
}

bool pluginBuilt() {
#ifdef HVD_HAVE_MPI
  return true;
#else
  return false;
#endif
}

std::unique_ptr<Plugin> openPlugin(const std::vector<std::string>& candidates, std::string* why) {
  std::string errors;
  for (const std::string& path : candidates) {
    gpu::DlLibrary library;
    std::string error;
    if (!library.open({path}, RTLD_NOW | RTLD_GLOBAL, &error)) {
      errors += (errors.empty() ? "" : "; ") + error;
      continue;
    }
    hvd_mpi_plugin_get_fn get = nullptr;
    if (!library.resolve(HVD_MPI_PLUGIN_ENTRY, &get)) {
      errors += (errors.empty() ? "" : "; ") + path + " has no " + HVD_MPI_PLUGIN_ENTRY;
      continue;
    }
    const hvd_mpi_plugin_v1* table = get(HVD_MPI_PLUGIN_ABI_VERSION);
    if (table == nullptr || table->abi_version != HVD_MPI_PLUGIN_ABI_VERSION ||
        table->struct_size < sizeof(hvd_mpi_plugin_v1)) {
      errors += (errors.empty() ? "" : "; ") + path + " does not speak plugin ABI version " +
                std::to_string(HVD_MPI_PLUGIN_ABI_VERSION) +
                " (a libhvd_mpi.so of another hvd version?)";
      continue;
    }
    return std::make_unique<Plugin>(std::move(library), table, path);
  }
  if (why != nullptr) *why = errors;
  return nullptr;
}

std::string pluginLoadError(const std::string& purpose, bool built, const std::string& why) {
  if (built) return purpose + ": cannot load hvd's MPI plugin (" + why + ")";
  return purpose + ": this libhvd was built without MPI (" + kPluginName + " not found: " + why +
         ")";
}

void check(int rc, const std::string& what, const char* err) {
  if (rc == HVD_MPI_OK) return;
  const std::string message = what + ": " + (err != nullptr && *err ? err : "MPI call failed");
  if (rc == HVD_MPI_ERR_ARGUMENT) throw InvalidArgumentError(message);
  if (rc == HVD_MPI_ERR_TIMEOUT) throw TimeoutError(message);
  throw BackendError(message);
}

std::shared_ptr<Session> Session::acquire(const std::string& purpose, bool needThreadMultiple) {
  ProcessState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.triedPlugin) {
    s.triedPlugin = true;
    s.plugin = openPlugin(pluginCandidates(), &s.pluginWhy);
  }
  if (s.plugin == nullptr) throw BackendError(pluginLoadError(purpose, pluginBuilt(), s.pluginWhy));
  if (s.finalized) {
    throw BackendError(purpose +
                       ": MPI was finalized when this process exited or shut hvd down; MPI "
                       "cannot be initialised again");
  }
  const hvd_mpi_plugin_v1& api = s.plugin->table();
  char err[kErrorBytes] = {0};
  int initializedHere = 0;
  int provided = HVD_MPI_THREAD_SINGLE;
  const int rc = api.init(&initializedHere, &provided, err, sizeof(err));
  if (rc != HVD_MPI_OK) throw BackendError(purpose + ": " + err);
  if (initializedHere != 0) {
    s.initializedByHvd = true;
    if (!s.atexitRegistered) {
      s.atexitRegistered = std::atexit(finalizeAtExit) == 0;
    }
  }
  if (needThreadMultiple && provided != HVD_MPI_THREAD_MULTIPLE) {
    throw BackendError(
        purpose + " needs MPI_THREAD_MULTIPLE (the engine's thread and the caller's call MPI " +
        "concurrently) but MPI runs at " + threadLevelName(provided) +
        (s.initializedByHvd
             ? std::string(": this MPI library does not provide it")
             : std::string(": the program initialised MPI; call MPI_Init_thread with "
                           "MPI_THREAD_MULTIPLE, or let hvd initialise MPI")));
  }
  if (auto live = s.session.lock()) return live;
  char version[kErrorBytes] = {0};
  if (api.library_version(version, sizeof(version)) != HVD_MPI_OK) version[0] = '\0';
  std::shared_ptr<Session> session(new Session(&api, version));
  s.session = session;
  return session;
}

Session::~Session() {
  ProcessState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.exiting) finalizeLocked(s);
}

bool Session::initializedByHvd() const {
  ProcessState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.initializedByHvd;
}

std::string Session::shortVersion() const {
  const auto comma = version_.find(',');
  return version_.empty() ? std::string("unknown MPI") : version_.substr(0, comma);
}

Comm::Comm(std::shared_ptr<Session> session) : session_(std::move(session)) {
  const hvd_mpi_plugin_v1& api = session_->api();
  char err[kErrorBytes] = {0};
  check(api.comm_dup_world(&comm_, err, sizeof(err)), "mpi", err);
  try {
    check(api.comm_rank(comm_, &rank_, err, sizeof(err)), "mpi", err);
    check(api.comm_size(comm_, &size_, err, sizeof(err)), "mpi", err);
  } catch (...) {
    api.comm_free(comm_, err, sizeof(err));
    throw;
  }
}

Comm::~Comm() {
  char err[kErrorBytes] = {0};
  if (session_->api().comm_free(comm_, err, sizeof(err)) != HVD_MPI_OK) {
    logging::get("coll")->warn("MPI_Comm_free failed: {}", err);
  }
}

}  // namespace hvd::mpi
