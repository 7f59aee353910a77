#include "core/config.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <sstream>

#include "contract/env_names.h"
#include "core/process_sets.h"
#include "core/scheduler_env.h"
#include "hvd/error.hpp"

namespace hvd::core {
namespace {

namespace names = contract::env;

constexpr const char* kLauncherHint =
    " (hvd::init() expects the worker environment that hvdrun or hvdagent sets: HVD_RANK, "
    "HVD_SIZE, HVD_LOCAL_RANK, HVD_LOCAL_SIZE, HVD_CROSS_RANK, HVD_CROSS_SIZE, HVD_JOB_ID, "
    "HVD_STORE_ADDR, HVD_STORE_TOKEN; or srun's SLURM_PROCID/SLURM_NTASKS/... or mpirun's "
    "OMPI_COMM_WORLD_*)";

std::string required(const EnvReader& getenv, const char* name) {
  const char* value = getenv(name);
  if (value == nullptr || *value == '\0') {
    throw InvalidArgumentError(std::string(name) + " is not set" + kLauncherHint);
  }
  return value;
}

long long parseInteger(const char* name, const std::string& text, long long min, long long max) {
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || *end != '\0') {
    throw InvalidArgumentError(std::string(name) + "='" + text + "' is not an integer");
  }
  if (value < min || value > max) {
    throw InvalidArgumentError(std::string(name) + "=" + text + " is out of range (expected " +
                               std::to_string(min) + ".." + std::to_string(max) + ")");
  }
  return value;
}

int requiredInt(const EnvReader& getenv, const char* name, long long min, long long max) {
  return static_cast<int>(parseInteger(name, required(getenv, name), min, max));
}

template <typename T>
T optionalInt(const EnvReader& getenv, const char* name, T fallback, long long min, long long max) {
  const char* value = getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  return static_cast<T>(parseInteger(name, value, min, max));
}

std::chrono::milliseconds optionalSeconds(const EnvReader& getenv, const char* name,
                                          std::chrono::milliseconds fallback) {
  const char* value = getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  char* end = nullptr;
  errno = 0;
  const double seconds = std::strtod(value, &end);
  if (errno != 0 || end == value || *end != '\0' || !std::isfinite(seconds) || seconds <= 0 ||
      seconds > 1e6) {
    throw InvalidArgumentError(std::string(name) + "='" + value +
                               "' is not a positive number of seconds");
  }
  return std::chrono::milliseconds(static_cast<long long>(std::ceil(seconds * 1000)));
}

// An engine knob: its HVD_* name, or the HOROVOD_* alias when only that is set. Returns the
// value (null when neither is set) and the name it came from, for error messages.
const char* engineVariable(const EnvReader& getenv, const char* name, const char* alias,
                           const char** used) {
  const char* value = getenv(name);
  *used = name;
  if (value == nullptr || *value == '\0') {
    value = getenv(alias);
    *used = alias;
  }
  if (value == nullptr || *value == '\0') return nullptr;
  return value;
}

// A non-negative decimal number (fractions allowed) no larger than `max`.
double parseNonNegative(const char* name, const char* value, double max, const char* unit) {
  char* end = nullptr;
  errno = 0;
  const double number = std::strtod(value, &end);
  if (errno != 0 || end == value || *end != '\0' || !std::isfinite(number) || number < 0 ||
      number > max) {
    std::ostringstream expected;
    expected << "a number of " << unit << " from 0 to " << max;
    throw InvalidArgumentError(std::string(name) + "='" + value + "' is not " + expected.str());
  }
  return number;
}

void parseEngineKnobs(const EnvReader& getenv, Config& c) {
  const char* used = nullptr;
  if (const char* v = engineVariable(getenv, "HVD_CYCLE_TIME", "HOROVOD_CYCLE_TIME", &used)) {
    const double ms = parseNonNegative(used, v, 60000, "milliseconds");
    if (ms <= 0) {
      throw InvalidArgumentError(std::string(used) + "='" + v +
                                 "' is not a positive number of milliseconds");
    }
    c.cycleTime = std::chrono::microseconds(std::max<long long>(1, std::llround(ms * 1000)));
  }
  if (const char* v =
          engineVariable(getenv, "HVD_CACHE_CAPACITY", "HOROVOD_CACHE_CAPACITY", &used)) {
    c.cacheCapacity = static_cast<size_t>(parseInteger(used, v, 0, 1 << 20));
  }
  if (const char* v =
          engineVariable(getenv, "HVD_FUSION_THRESHOLD", "HOROVOD_FUSION_THRESHOLD", &used)) {
    c.fusionThreshold = static_cast<size_t>(parseInteger(used, v, 0, 1ll << 40));
  }
  if (const char* v = engineVariable(getenv, "HVD_STALL_CHECK_TIME",
                                     "HOROVOD_STALL_CHECK_TIME_SECONDS", &used)) {
    c.stallCheckTime =
        std::chrono::milliseconds(std::llround(parseNonNegative(used, v, 1e6, "seconds") * 1000));
  }
  if (const char* v = engineVariable(getenv, "HVD_STALL_SHUTDOWN_TIME",
                                     "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", &used)) {
    c.stallShutdownTime =
        std::chrono::milliseconds(std::llround(parseNonNegative(used, v, 1e6, "seconds") * 1000));
  }
  if (const char* v = engineVariable(getenv, "HVD_TIMELINE", "HOROVOD_TIMELINE", &used)) {
    // Horovod's word for "the program starts it" (hvd.start_timeline), not a file name.
    if (std::string(v) == "DYNAMIC") {
      c.timelineDynamic = true;
    } else {
      c.timelinePath = v;
    }
  }
  if (const char* v = getenv("HVD_PROCESS_SETS"); v != nullptr && *v != '\0') {
    c.processSets = parseProcessSets(v, "HVD_PROCESS_SETS");
  }
  if (const char* v = engineVariable(getenv, "HVD_DYNAMIC_PROCESS_SETS",
                                     "HOROVOD_DYNAMIC_PROCESS_SETS", &used)) {
    c.dynamicProcessSets = parseInteger(used, v, 0, 1) == 1;
  }
  if (const char* v = engineVariable(getenv, "HVD_TIMELINE_MARK_CYCLES",
                                     "HOROVOD_TIMELINE_MARK_CYCLES", &used)) {
    c.timelineMarkCycles = parseInteger(used, v, 0, 1) == 1;
  }
}

// HVD_CPU_BACKEND, or Horovod's HOROVOD_CPU_OPERATIONS (whose "gloo", Horovod's own
// transports, is hvd's). `name` is the variable the value came from.
CpuBackend parseCpuBackend(const char* name, const std::string& value, const EnvReader& getenv) {
  const bool horovod = std::string(name) == "HOROVOD_CPU_OPERATIONS";
  CpuBackend backend;
  if (value == "hvd" || (horovod && value == "gloo")) {
    backend = CpuBackend::kHvd;
  } else if (value == "mpi") {
    backend = CpuBackend::kMpi;
  } else {
    throw InvalidArgumentError(std::string(name) + "='" + value +
                               "' is not a CPU backend (expected hvd or mpi" +
                               (horovod ? std::string(", or gloo for hvd") : std::string()) + ")");
  }
  const char* mpiSize = getenv("OMPI_COMM_WORLD_SIZE");
  if (backend == CpuBackend::kMpi && (mpiSize == nullptr || *mpiSize == '\0')) {
    throw InvalidArgumentError(std::string(name) + "=mpi needs a job started by mpirun, and " +
                               "this process was not (OMPI_COMM_WORLD_SIZE is not set): start " +
                               "it with mpirun, or leave " + name + " unset for hvd's own " +
                               "transports");
  }
  return backend;
}

}  // namespace

const char* cpuBackendName(CpuBackend backend) {
  return backend == CpuBackend::kMpi ? "mpi" : "hvd";
}

Config parseConfig(const EnvReader& getenv) {
  Config c;
  const char* hvdRank = getenv(names::kRank);
  std::optional<SchedulerPlacement> scheduler;
  if (hvdRank == nullptr || *hvdRank == '\0') scheduler = placementFromScheduler(getenv);
  if (scheduler) {
    c.placementSource = scheduler->source;
    c.size = scheduler->size;
    c.rank = scheduler->rank;
    c.localSize = scheduler->localSize;
    c.localRank = scheduler->localRank;
    c.crossFromRendezvous = !scheduler->crossRank.has_value();
    c.crossRank = scheduler->crossRank.value_or(0);
    c.crossSize = scheduler->crossSize.value_or(1);
    const char* job = getenv(names::kJobId);
    c.jobId = job != nullptr && *job != '\0' ? job : scheduler->jobId;
  } else {
    c.size = requiredInt(getenv, names::kSize, 1, 1 << 20);
    c.rank = requiredInt(getenv, names::kRank, 0, c.size - 1);
    c.localSize = requiredInt(getenv, names::kLocalSize, 1, c.size);
    c.localRank = requiredInt(getenv, names::kLocalRank, 0, c.localSize - 1);
    c.crossSize = requiredInt(getenv, names::kCrossSize, 1, c.size);
    c.crossRank = requiredInt(getenv, names::kCrossRank, 0, c.crossSize - 1);
    c.jobId = required(getenv, names::kJobId);
  }
  if (const char* file = getenv("HVD_STORE_FILE"); file != nullptr && *file != '\0') {
    c.storeFile = file;
  }
  const char* storeAddr = getenv(names::kStoreAddr);
  const bool haveAddr = storeAddr != nullptr && *storeAddr != '\0';
  // Without a store address, a file store (no server, no token: the directory's permissions
  // guard it) when HVD_STORE_FILE names one.
  const bool fileStore = !haveAddr && !c.storeFile.empty();
  if (c.size > 1 && !haveAddr && !fileStore && scheduler && scheduler->source == "mpirun") {
    // The ranks meet through MPI itself (Runtime); a libhvd without MPI says what to set.
    c.mpiRendezvous = true;
  } else if (c.size > 1 && !haveAddr && !fileStore && scheduler) {
    throw InvalidArgumentError(
        "started by " + scheduler->source + " with " + std::to_string(c.size) +
        " ranks but no rendezvous store: set HVD_STORE_ADDR (and HVD_STORE_TOKEN) to a running "
        "store, or HVD_STORE_FILE to a directory every rank shares");
  } else if (c.size > 1 && !fileStore) {
    c.storeAddress = required(getenv, names::kStoreAddr);
    c.storeToken = required(getenv, names::kStoreToken);
  } else if (c.size == 1) {
    const char* address = getenv(names::kStoreAddr);
    const char* token = getenv(names::kStoreToken);
    if (address != nullptr) c.storeAddress = address;
    if (token != nullptr) c.storeToken = token;
  }
  c.timeout = optionalSeconds(getenv, "HVD_TIMEOUT", c.timeout);
  c.startTimeout = optionalSeconds(getenv, "HVD_START_TIMEOUT", c.timeout);
  if (const char* transport = getenv("HVD_TRANSPORT"); transport != nullptr && *transport) {
    const std::string t = transport;
    if (t == "tcp") {
      c.transport = TransportChoice::kTcp;
    } else if (t == "auto" || t == "shm") {
      c.transport = TransportChoice::kAuto;
    } else {
      throw InvalidArgumentError("HVD_TRANSPORT='" + t +
                                 "' is not a transport (expected auto, "
                                 "shm or tcp)");
    }
  }
  if (const char* address = getenv("HVD_DATA_ADDR"); address != nullptr) c.dataAddress = address;
  c.shmRingBytes =
      optionalInt<size_t>(getenv, "HVD_SHM_RING_BYTES", c.shmRingBytes, 4096, 1ll << 30);
  if ((c.shmRingBytes & (c.shmRingBytes - 1)) != 0) {
    throw InvalidArgumentError("HVD_SHM_RING_BYTES=" + std::to_string(c.shmRingBytes) +
                               " must be a power of two");
  }
  if (const char* small = getenv("HVD_SMALL_MESSAGE_BYTES"); small != nullptr && *small) {
    c.smallMessageBytes = optionalInt<size_t>(getenv, "HVD_SMALL_MESSAGE_BYTES", 0, 0, 1ll << 30);
    c.smallMessageBytesTcp = c.smallMessageBytes;
  }
  c.fullMeshRanks = optionalInt<int>(getenv, "HVD_FULL_MESH_RANKS", c.fullMeshRanks, 1, 1 << 30);
  c.pieceBytes = optionalInt<size_t>(getenv, "HVD_PIECE_BYTES", c.pieceBytes, 64, 1ll << 30);
  c.pieceBytesTcp =
      optionalInt<size_t>(getenv, "HVD_PIECE_BYTES_TCP", c.pieceBytesTcp, 64, 1ll << 30);
  c.yield = std::chrono::microseconds(
      optionalInt<long long>(getenv, "HVD_YIELD_US", c.yield.count(), 0, 10'000'000));
  if (const char* spin = getenv("HVD_SPIN_US"); spin != nullptr && *spin) {
    c.spin =
        std::chrono::microseconds(optionalInt<long long>(getenv, "HVD_SPIN_US", 0, 0, 10'000'000));
    c.spinFromEnvironment = true;
  }
  if (const char* backend = getenv("HVD_GPU_BACKEND"); backend != nullptr && *backend) {
    const std::string b = backend;
    if (b == "auto") {
      c.gpuBackend = gpu::GpuBackendChoice::kAuto;
    } else if (b == "nccl") {
      c.gpuBackend = gpu::GpuBackendChoice::kNccl;
    } else if (b == "host") {
      c.gpuBackend = gpu::GpuBackendChoice::kHost;
    } else {
      throw InvalidArgumentError("HVD_GPU_BACKEND='" + b +
                                 "' is not a GPU backend (expected auto, nccl or host)");
    }
  }
  const char* used = nullptr;
  if (const char* v = engineVariable(getenv, "HVD_CPU_BACKEND", "HOROVOD_CPU_OPERATIONS", &used)) {
    c.cpuBackend = parseCpuBackend(used, v, getenv);
  }
  if (const char* v = engineVariable(getenv, "HVD_HIERARCHICAL_ALLREDUCE",
                                     "HOROVOD_HIERARCHICAL_ALLREDUCE", &used)) {
    c.hierarchicalAllreduce = parseInteger(used, v, 0, 1) == 1;
  }
  parseEngineKnobs(getenv, c);
  return c;
}

Config configFromEnvironment() {
  return parseConfig([](const char* name) { return std::getenv(name); });
}

std::string Config::summary() const {
  std::ostringstream out;
  out << "rank " << rank << "/" << size << " local " << localRank << "/" << localSize << " cross "
      << crossRank << "/" << crossSize << (crossFromRendezvous ? " (from rendezvous)" : "")
      << " from " << placementSource << " job " << jobId << " store "
      << (!storeAddress.empty() ? storeAddress
          : !storeFile.empty()  ? "file " + storeFile
          : mpiRendezvous       ? std::string("<from MPI: rank 0 serves it>")
                                : std::string("-"))
      << " token " << (storeToken.empty() ? "<unset>" : "<set>") << " timeout " << timeout.count()
      << "ms"
      << " transport " << (transport == TransportChoice::kTcp ? "tcp" : "auto") << " shm-ring "
      << shmRingBytes << "B full-mesh " << fullMeshRanks << " small-message " << smallMessageBytes
      << "B (tcp " << smallMessageBytesTcp << "B) piece " << pieceBytes << "B (tcp "
      << pieceBytesTcp << "B) spin " << spin.count() << "us yield " << yield.count()
      << "us cpu-backend " << cpuBackendName(cpuBackend) << " gpu-backend "
      << gpu::gpuBackendName(gpuBackend) << (hierarchicalAllreduce ? " hierarchical" : "");
  return out.str();
}

}  // namespace hvd::core
