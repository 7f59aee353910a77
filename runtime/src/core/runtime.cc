#include "core/runtime.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "contract/host_port.h"
#include "contract/random.h"
#include "core/elastic_session.h"
#include "core/job_members.h"
#include "core/scheduler_env.h"
#include "engine/timeline.h"
#include "hvd/error.hpp"
#include "hvd_support/fd_limit.h"
#include "hvd_support/host.h"
#include "hvd_support/interfaces.h"
#include "hvd_support/logging.h"
#include "mpi/mpi_collectives.h"
#include "store/file_store.h"
#include "store/prefixed_store.h"
#include "store/tcp_store_client.h"
#include "transport/mesh.h"

namespace hvd::core {
namespace {

// The job's failure board lives in the store under "failure": the first rank to give up
// records "<kind>\n<message>" there before it tears its links down.
class StoreFailureBoard final : public transport::FailureBoard {
 public:
  explicit StoreFailureBoard(store::Store& store) : store_(store) {}
  void publish(ErrorKind kind, const std::string& message) noexcept override {
    try {
      store_.compareSet(kKey, "", std::to_string(static_cast<int>(kind)) + "\n" + message);
    } catch (const std::exception&) {
      // The store is gone too; the local error is still reported.
    }
  }
  bool lookup(ErrorKind* kind, std::string* message) noexcept override {
    try {
      if (!store_.check({kKey})) return false;
      const std::string value = store_.get(kKey, std::chrono::milliseconds(1000));
      const auto newline = value.find('\n');
      if (newline == std::string::npos) return false;
      *kind = static_cast<ErrorKind>(std::stoi(value.substr(0, newline)));
      *message = value.substr(newline + 1);
      return true;
    } catch (const std::exception&) {
      return false;
    }
  }

 private:
  static constexpr const char* kKey = "failure";
  store::Store& store_;
};

int usableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

std::string hostOf(const std::string& address) {
  const std::optional<contract::HostPort> split = contract::splitHostPort(address, nullptr);
  return split ? split->host : address;
}

// <HVD_STORE_FILE>/<job id>, created if missing (every rank may race to create it).
std::string fileStoreDirectory(const Config& config) {
  const std::string dir = config.storeFile + "/" + config.jobId;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (!std::filesystem::is_directory(dir)) {
    throw InvalidArgumentError("HVD_STORE_FILE: cannot create the job's store directory " + dir +
                               (ec ? ": " + ec.message() : std::string()));
  }
  return dir;
}

// Broadcasts `text` from rank 0 (length first: every rank must know how much to receive).
std::string broadcastText(mpi::Comm& comm, const std::string& text) {
  char err[1024] = {0};
  uint64_t length = text.size();
  mpi::check(comm.api().bcast(comm.handle(), &length, sizeof(length), 0, err, sizeof(err)),
             "the rendezvous over MPI", err);
  std::string out = comm.rank() == 0 ? text : std::string(length, '\0');
  if (length > 0) {
    mpi::check(comm.api().bcast(comm.handle(), out.data(), length, 0, err, sizeof(err)),
               "the rendezvous over MPI", err);
  }
  return out;
}

std::string mpiPlacementMismatch(const Config& config, const mpi::Comm& comm) {
  return "MPI places this process as rank " + std::to_string(comm.rank()) + " of " +
         std::to_string(comm.size()) + " but hvd's placement (from " + config.placementSource +
         ") is rank " + std::to_string(config.rank) + " of " + std::to_string(config.size);
}

}  // namespace

void Runtime::storeFromMpi() {
  auto log = logging::get("init");
  bootstrapComm_ = std::make_unique<mpi::Comm>(mpi_);
  if (bootstrapComm_->rank() != config_.rank || bootstrapComm_->size() != config_.size) {
    throw InvalidArgumentError("the rendezvous over MPI: " +
                               mpiPlacementMismatch(config_, *bootstrapComm_));
  }
  // Rank 0 says "ok\n<address>\n<token>" or "error\n<why>": every rank takes part in the
  // broadcast either way, so a failing rank 0 fails the job instead of leaving it waiting.
  std::string message;
  std::exception_ptr failure;
  if (config_.rank == 0) {
    try {
      store::TcpStoreServerOptions options;
      options.bindAddress =
          !config_.dataAddress.empty() ? config_.dataAddress : transport::firstInterfaceIpv4();
      storeServer_ = std::make_unique<store::TcpStoreServer>(options);
      storeServer_->start();
      const std::string token = contract::randomHex(32);  // a store token nobody can guess
      storeServer_->addJob(config_.jobId, token);
      message = "ok\n" + storeServer_->address() + "\n" + token;
    } catch (const std::exception& e) {
      failure = std::current_exception();
      message = std::string("error\n") + e.what();
    }
  }
  message = broadcastText(*bootstrapComm_, message);
  if (failure) std::rethrow_exception(failure);
  const auto first = message.find('\n');
  const auto second = message.find('\n', first == std::string::npos ? first : first + 1);
  if (message.compare(0, first, "ok") != 0 || second == std::string::npos) {
    throw BackendError("the rendezvous over MPI: rank 0 could not start the job's store: " +
                       (first == std::string::npos ? message : message.substr(first + 1)));
  }
  config_.storeAddress = message.substr(first + 1, second - first - 1);
  config_.storeToken = message.substr(second + 1);
  log->info("rendezvous over MPI: rank 0 serves the job's store at {}", config_.storeAddress);
}

void Runtime::mpiCollectives() {
  auto comm = std::make_unique<mpi::Comm>(mpi_);
  auto engineComm = std::make_unique<mpi::Comm>(mpi_);
  if (comm->rank() != config_.rank || comm->size() != config_.size) {
    throw InvalidArgumentError("HVD_CPU_BACKEND=mpi: " + mpiPlacementMismatch(config_, *comm));
  }
  collectives_ = std::make_unique<mpi::MpiCollectives>(std::move(comm), config_.timeout);
  engineCollectives_ =
      std::make_unique<mpi::MpiCollectives>(std::move(engineComm), config_.timeout);
  logging::get("init")->info("cpu backend: mpi ({}; MPI initialised by {})", mpi_->libraryVersion(),
                             mpi_->initializedByHvd() ? "hvd" : "the program");
}

Runtime::Runtime(const Config& config, int generation) : config_(config) {
  logging::setRank(config_.rank);
  auto log = logging::get("init");
  log->info("configuration: {}", config_.summary());

  // MPI first: its communicators are duplicated in the same order on every rank, before
  // anything that can fail on one rank alone.
  const bool mpiBackend = config_.cpuBackend == CpuBackend::kMpi;
  if (mpiBackend || config_.mpiRendezvous) {
    try {
      mpi_ = mpi::Session::acquire(mpiBackend ? "HVD_CPU_BACKEND=mpi" : "the rendezvous over MPI",
                                   mpiBackend);
    } catch (const BackendError& e) {
      if (mpiBackend) throw;
      throw InvalidArgumentError(
          "started by mpirun with " + std::to_string(config_.size) +
          " ranks but no rendezvous store, and hvd cannot meet through MPI (" + e.what() +
          "): set HVD_STORE_ADDR (and HVD_STORE_TOKEN) to a running store, or HVD_STORE_FILE "
          "to a directory every rank shares, or build hvd with MPI (its plugin libhvd_mpi.so "
          "goes next to libhvd.so)");
    }
    if (config_.mpiRendezvous) storeFromMpi();
    if (mpiBackend) mpiCollectives();
  }

  // One socket per peer, shared-memory segments, the store: a large job outgrows the usual
  // soft limit of 1024 descriptors.
  const FileLimit files = raiseOpenFileLimit();
  if (files.now != files.before)
    log->debug("open-file limit raised from {} to {}", files.before, files.now);

  transport::ContextOptions options;
  options.timeout = config_.timeout;
  options.spin = config_.spin;
  const int cpus = usableCpus();
  if (!config_.spinFromEnvironment && config_.localSize > cpus) {
    options.spin = std::chrono::microseconds(0);
    log->info("{} local ranks on {} usable CPUs: waiting ranks yield instead of spinning",
              config_.localSize, cpus);
  }
  options.yield = config_.yield;
  options.smallMessageBytes = config_.smallMessageBytes;
  options.fullMeshRanks = config_.fullMeshRanks;
  options.smallMessageBytesTcp = config_.smallMessageBytesTcp;
  options.pieceBytes = config_.pieceBytes;
  options.pieceBytesTcp = config_.pieceBytesTcp;

  if (config_.size == 1) {
    context_ = std::make_unique<transport::Context>(
        0, 1, std::vector<std::unique_ptr<transport::Link>>(1), options);
    mesh_.options = options;
    devices_ =
        std::make_unique<gpu::DeviceBackend>(deviceOptions(config_, true), *context_, nullptr);
    if (!collectives_) collectives_ = std::make_unique<coll::RingCollectives>(*context_);
    setUpProcessSets();
    return;
  }
  if (!config_.storeAddress.empty()) {
    store_ = std::make_unique<store::TcpStore>(config_.storeAddress, storeJobOf(config_),
                                               config_.storeToken, config_.startTimeout);
  } else {
    store_ = std::make_unique<store::FileStore>(fileStoreDirectory(config_));
  }
  // A job of some launched ranks (hvd.init(comm=[...])) meets in a namespace of its own, so
  // that disjoint lists form their jobs side by side.
  scoped_ = std::make_unique<store::PrefixedStore>(
      *store_, "g" + std::to_string(generation) + "/" + membersNamespace(config_.members));
  auto& scoped = *scoped_;

  transport::MeshConfig& mesh = mesh_;
  mesh.rank = config_.rank;
  mesh.size = config_.size;
  mesh.hostKey = transport::localHostKey();
  mesh.hostName = localHostName();
  mesh.bindAddress = !config_.dataAddress.empty() ? config_.dataAddress
                     : !config_.storeAddress.empty()
                         ? transport::localAddressToward(hostOf(config_.storeAddress))
                         : transport::firstInterfaceIpv4();
  mesh.allowShm = config_.transport != TransportChoice::kTcp;
  mesh.shmRingBytes = config_.shmRingBytes;
  mesh.setupTimeout = config_.startTimeout;
  mesh.processSets = !config_.processSets.empty() || config_.dynamicProcessSets;
  mesh.options = options;
  std::vector<std::string> hostKeys;
  const bool placeFromHosts = config_.crossFromRendezvous || !config_.members.empty();
  const auto rendezvousStart = std::chrono::steady_clock::now();
  network_ = transport::Mesh::join(scoped, mesh, placeFromHosts ? &hostKeys : nullptr);
  const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - rendezvousStart);
  context_ = network_->connect(0, options,
                               std::max(std::chrono::milliseconds(0), mesh.setupTimeout - spent));
  if (!config_.members.empty()) {
    const HostPlacement p = placementFromHostKeys(hostKeys, config_.rank);
    config_.localRank = p.localRank;
    config_.localSize = p.localSize;
    config_.crossRank = p.crossRank;
    config_.crossSize = p.crossSize;
    log->info("local rank {}/{}, cross rank {}/{} (from the members' hosts)", p.localRank,
              p.localSize, p.crossRank, p.crossSize);
  } else if (config_.crossFromRendezvous) {
    std::tie(config_.crossRank, config_.crossSize) =
        crossFromHostKeys(hostKeys, config_.rank, config_.localRank, config_.localSize);
    log->info("cross rank {}/{} (from every rank's host)", config_.crossRank, config_.crossSize);
  }
  failureBoard_ = std::make_unique<StoreFailureBoard>(scoped);
  context_->setFailureBoard(failureBoard_.get());
  devices_ = std::make_unique<gpu::DeviceBackend>(deviceOptions(config_, true), *context_, &scoped);
  if (!collectives_) collectives_ = std::make_unique<coll::RingCollectives>(*context_);
  log->info("connected: {} ranks over {}{}", config_.size, context_->describeTransports(),
            mpiBackend ? "; CPU collectives over " + collectives_->describe() : std::string());
  exchangeInitFacts();
  setUpProcessSets();
}

void Runtime::setUpProcessSets() {
  ProcessSetEngines::Setup setup;
  setup.config = &config_;
  setup.mesh = network_.get();
  setup.store = scoped_.get();
  setup.options = mesh_.options;
  setup.connectTimeout = config_.startTimeout;
  setup.jobEngine = [this]() -> engine::Engine& { return engine(); };
  processSets_ = std::make_unique<ProcessSetEngines>(std::move(setup));
  const std::vector<int> ids = processSets_->registerStatic(config_.processSets);
  processSets_->startOwn(ids);
  if (!ids.empty() || config_.dynamicProcessSets) {
    std::string listed;
    for (size_t i = 0; i < ids.size(); ++i) {
      listed +=
          (i ? "; " : "") + std::to_string(ids[i]) + ": " + rankList(processSets_->ranks(ids[i]));
    }
    logging::get("init")->info("process sets {}{}", listed.empty() ? "none yet" : listed,
                               config_.dynamicProcessSets ? " (dynamic)" : "");
  }
}

// Every rank must start with the same process sets (and mode), or their ids would differ: a
// digest of them names the ranks that differ from rank 0. The same allgather carries each
// rank's local size, as Horovod's controller gathers them at init for is_homogeneous.
void Runtime::exchangeInitFacts() {
  uint64_t digest = 1469598103934665603ull;  // FNV-1a over the list and the mode
  auto mix = [&digest](uint64_t value) {
    for (int byte = 0; byte < 8; ++byte) {
      digest ^= (value >> (8 * byte)) & 0xff;
      digest *= 1099511628211ull;
    }
  };
  for (const auto& set : config_.processSets) {
    mix(set.size());
    for (int r : set) mix(static_cast<uint64_t>(r));
  }
  mix(config_.dynamicProcessSets ? 1 : 0);
  constexpr size_t kFacts = 2;  // the digest, the local size
  const int64_t mine[kFacts] = {static_cast<int64_t>(digest), config_.localSize};
  std::vector<int64_t> all(kFacts * config_.size);
  collectives_->allgather(mine, kFacts, all.data(), std::vector<size_t>(config_.size, kFacts),
                          DataType::kInt64);
  std::vector<int> differ;
  for (int r = 0; r < config_.size; ++r) {
    if (all[kFacts * r] != all[0]) differ.push_back(r);
    if (all[kFacts * r + 1] != config_.localSize) homogeneous_ = false;
  }
  if (differ.empty()) return;
  std::string mineText;
  for (size_t i = 0; i < config_.processSets.size(); ++i) {
    mineText += (i ? ";" : "") + rankList(config_.processSets[i]);
  }
  throw InvalidArgumentError(
      "hvd init: every rank must be given the same process sets (HVD_PROCESS_SETS, "
      "hvd.init(process_sets=...), HVD_DYNAMIC_PROCESS_SETS), but rank" +
      std::string(differ.size() > 1 ? "s " : " ") + rankList(differ) +
      " differ from rank 0 (this is rank " + std::to_string(config_.rank) + ": '" + mineText +
      "', dynamic " + (config_.dynamicProcessSets ? "on" : "off") + ")");
}

gpu::DeviceBackendOptions deviceOptions(const Config& config, bool blockingApi) {
  gpu::DeviceBackendOptions o;
  o.agreeOverContext = blockingApi;
  o.choice = config.gpuBackend;
  o.hierarchical = config.hierarchicalAllreduce;
  o.rank = config.rank;
  o.size = config.size;
  o.localRank = config.localRank;
  o.localSize = config.localSize;
  o.crossRank = config.crossRank;
  o.host = localHostName();
  o.opTimeout = config.timeout;
  o.startTimeout = config.startTimeout;
  return o;
}

engine::Engine& Runtime::engine() {
  std::lock_guard<std::mutex> lock(engineMutex_);
  if (engine_) return *engine_;
  if (config_.size == 1) {
    engineContext_ = std::make_unique<transport::Context>(
        0, 1, std::vector<std::unique_ptr<transport::Link>>(1), mesh_.options);
  } else {
    // The engine's own links, on its own channel of init's rendezvous (every rank's engine
    // connects them when it starts). No failure board: its background cycles would often be
    // the first to notice a dead peer, and the root cause the job reports should come from the
    // user's collectives; the engine fails its own handles with its own error.
    engineScoped_ = std::make_unique<store::PrefixedStore>(*scoped_, "engine/");
    engineContext_ = network_->connect(1, mesh_.options, mesh_.setupTimeout);
  }
  gpu::DeviceBackendOptions devices = deviceOptions(config_, false);
  devices.hierarchicalTunable = config_.autotune && !config_.hierarchicalSet;
  engineDevices_ =
      std::make_unique<gpu::DeviceBackend>(devices, *engineContext_, engineScoped_.get());
  engine::EngineOptions options = engineOptions(config_);
  options.devices = engineDevices_.get();
  options.collectives = engineCollectives_.get();  // null: the engine's own ring
  if (timelineDecided_) {
    // The program started or stopped a timeline before the engine existed: that wins over
    // HVD_TIMELINE.
    options.timelinePath.clear();
    options.timelineMarkCycles = pendingMarkCycles_;
  }
  engine_ = std::make_unique<engine::Engine>(*engineContext_, options, std::move(pendingTimeline_));
  return *engine_;
}

void Runtime::startTimeline(const std::string& path, bool markCycles) {
  std::unique_ptr<engine::Timeline> replaced;  // closed after the lock is released
  engine::Engine* running = nullptr;
  {
    std::lock_guard<std::mutex> lock(engineMutex_);
    running = engine_.get();
    if (running == nullptr) {
      if (path.empty()) {
        throw InvalidArgumentError(
            "startTimeline: the path is empty (pass the file to write the timeline to; "
            "stopTimeline() stops it)");
      }
      // Nothing records before the engine exists; rank 0 opens the file now (so that its
      // error is this call's) and hands it to the engine when that starts.
      if (config_.rank == 0 && !(pendingTimeline_ && pendingTimeline_->path() == path)) {
        auto fresh = std::make_unique<engine::Timeline>(path, config_.rank);
        replaced = std::move(pendingTimeline_);
        pendingTimeline_ = std::move(fresh);
      }
      timelineDecided_ = true;
      pendingMarkCycles_ = markCycles;
      return;
    }
  }
  // engine_ never changes once set; the engine serialises timeline calls itself.
  running->startTimeline(path, markCycles);
}

void Runtime::stopTimeline() {
  std::unique_ptr<engine::Timeline> stopped;  // closed after the lock is released
  engine::Engine* running = nullptr;
  {
    std::lock_guard<std::mutex> lock(engineMutex_);
    running = engine_.get();
    if (running == nullptr) {
      stopped = std::move(pendingTimeline_);
      timelineDecided_ = true;
      pendingMarkCycles_ = false;
      return;
    }
  }
  running->stopTimeline();
}

void Runtime::setStopReason(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(engineMutex_);
    if (engine_) engine_->setStopReason(reason);
  }
  if (processSets_) processSets_->setStopReason(reason);
}

engine::EngineStats Runtime::engineStats() {
  std::lock_guard<std::mutex> lock(engineMutex_);
  return engine_ ? engine_->stats() : engine::EngineStats{};
}

engine::EngineOptions engineOptions(const Config& config) {
  engine::EngineOptions o;
  o.cycleTime = config.cycleTime;
  o.cacheCapacity = config.cacheCapacity;
  o.fusionThreshold = config.fusionThreshold;
  o.stallCheckTime = config.stallCheckTime;
  o.stallShutdownTime = config.stallShutdownTime;
  o.timelinePath = config.timelinePath;
  o.timelineMarkCycles = config.timelineMarkCycles;
  o.autotune.enabled = config.autotune;
  o.autotune.logPath = config.autotuneLog;
  o.autotune.warmupSamples = config.autotuneWarmupSamples;
  o.autotune.stepsPerSample = config.autotuneStepsPerSample;
  o.autotune.bayesOptMaxSamples = config.autotuneBayesOptMaxSamples;
  o.autotune.noise = config.autotuneNoise;
  o.autotune.fusionFixed = config.fusionThresholdSet;
  o.autotune.cycleFixed = config.cycleTimeSet;
  o.autotune.cacheFixed = config.cacheCapacitySet;
  o.autotune.hierarchicalFixed = config.hierarchicalSet;
  o.stragglers.window = config.stragglerWindow;
  // A rank counts as last only by more than the jitter of the cycles that negotiate its ops.
  o.stragglers.minLag =
      std::max<std::chrono::microseconds>(std::chrono::milliseconds(2), 2 * config.cycleTime);
  o.hostName = localHostName();
  return o;
}

Runtime::~Runtime() {
  // The engine uses its context; the context refers to the board: tear down in dependency
  // order. The engine stops in step with every rank's engine (see engine/engine.h), and so
  // does every process set's, with its members'.
  processSets_.reset();
  engine_.reset();
  engineDevices_.reset();
  engineCollectives_.reset();
  engineContext_.reset();
  devices_.reset();
  collectives_.reset();
  engineScoped_.reset();
  context_.reset();
  network_.reset();
  failureBoard_.reset();
  scoped_.reset();
  store_.reset();
  if (bootstrapComm_) {
    // Rank 0's store server must outlive every rank's use of it: each rank has closed its
    // connection when it arrives here. A rank that never arrives costs the timeout, no more.
    char err[1024] = {0};
    const double seconds = std::chrono::duration<double>(config_.startTimeout).count();
    if (bootstrapComm_->api().barrier(bootstrapComm_->handle(), seconds, err, sizeof(err)) !=
        HVD_MPI_OK) {
      logging::get("init")->warn("shutdown: {}; closing the job's store anyway", err);
    }
  }
  storeServer_.reset();
  bootstrapComm_.reset();
  mpi_.reset();
}

}  // namespace hvd::core
