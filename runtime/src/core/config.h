// The resolved configuration of one worker: its place in the job (the worker environment
// contract of docs/architecture.md) and the runtime's tuning knobs, parsed once at init.
//
// Under mpirun two more: with no HVD_STORE_ADDR and no HVD_STORE_FILE the ranks meet
// through MPI itself (mpiRendezvous: rank 0 serves a TCP store, MPI_Bcast tells the others
// where; core/runtime.h), and HVD_CPU_BACKEND=mpi runs the CPU collectives through MPI.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "contract/env_reader.h"
#include "contract/worker_variables.h"
#include "gpu/backend_choice.h"

namespace hvd::core {

enum class TransportChoice { kAuto, kTcp };

// What runs the CPU collectives (collectives/host_collectives.h): hvd's own transports, or MPI.
enum class CpuBackend { kHvd, kMpi };
const char* cpuBackendName(CpuBackend backend);  // "hvd", "mpi"

struct Config {
  int rank = 0;
  int size = 1;
  int localRank = 0;
  int localSize = 1;
  int crossRank = 0;
  int crossSize = 1;
  std::string jobId;
  std::string storeAddress;  // host:port of the job's TCP store
  std::string storeToken;    // never logged
  // HVD_STORE_FILE: a directory on a filesystem every rank shares, used as the rendezvous store
  // (file store) when no HVD_STORE_ADDR is given; the job's keys go under <dir>/<job id>.
  std::string storeFile;
  // "hvd" (the HVD_* contract), "srun" or "mpirun" (core/scheduler_env.h).
  std::string placementSource = "hvd";
  // mpirun names no node index: the cross rank and size are derived from every rank's host at
  // rendezvous (Runtime) instead of read here.
  bool crossFromRendezvous = false;
  // Started by mpirun (OMPI_COMM_WORLD_SIZE) with more than one rank, no HVD_STORE_ADDR and no
  // HVD_STORE_FILE: the runtime bootstraps the store over MPI, or fails saying what to set.
  bool mpiRendezvous = false;
  std::chrono::milliseconds timeout{60000};            // HVD_TIMEOUT (seconds)
  std::chrono::milliseconds startTimeout{60000};       // HVD_START_TIMEOUT (seconds)
  TransportChoice transport = TransportChoice::kAuto;  // HVD_TRANSPORT
  std::string dataAddress;                             // HVD_DATA_ADDR (default: route to store)
  // HVD_DATA_IFACE (alias HOROVOD_GLOO_IFACE): the interface named; its address, found at parse
  // time on this host, becomes dataAddress unless HVD_DATA_ADDR gave one.
  std::string dataInterface;
  size_t shmRingBytes = 1 << 20;  // HVD_SHM_RING_BYTES
  int fullMeshRanks = 64;         // HVD_FULL_MESH_RANKS
  // HVD_SMALL_MESSAGE_BYTES sets both crossovers when given.
  size_t smallMessageBytes = 8 << 10;
  size_t smallMessageBytesTcp = 128 << 10;
  // HVD_SPIN_US; when unset, 50 us, or 0 when this host runs more ranks than this process may
  // use CPUs (a spinning rank would hold the core its peer needs; yielding hands it over).
  std::chrono::microseconds spin{50};
  bool spinFromEnvironment = false;
  std::chrono::microseconds yield{2000};  // HVD_YIELD_US
  size_t pieceBytes = 256 << 10;          // HVD_PIECE_BYTES (shared memory)
  size_t pieceBytesTcp = 1 << 20;         // HVD_PIECE_BYTES_TCP

  // HVD_CPU_BACKEND (alias HOROVOD_CPU_OPERATIONS): hvd (default) or mpi, which needs a job
  // mpirun started (OMPI_COMM_WORLD_SIZE set) and a libhvd with its MPI plugin.
  CpuBackend cpuBackend = CpuBackend::kHvd;
  gpu::GpuBackendChoice gpuBackend = gpu::GpuBackendChoice::kAuto;  // HVD_GPU_BACKEND
  // HVD_HIERARCHICAL_ALLREDUCE (alias HOROVOD_HIERARCHICAL_ALLREDUCE): 0 or 1.
  bool hierarchicalAllreduce = false;

  // The engine (each also read under its HOROVOD_* name; the HVD_* one wins when both are set).
  std::chrono::microseconds cycleTime{1000};        // HVD_CYCLE_TIME (ms, fractions ok)
  size_t cacheCapacity = 1024;                      // HVD_CACHE_CAPACITY (0: no cache)
  size_t fusionThreshold = size_t{128} << 20;       // HVD_FUSION_THRESHOLD (bytes; 0: off)
  std::chrono::milliseconds stallCheckTime{60000};  // HVD_STALL_CHECK_TIME (s; 0: off)
  std::chrono::milliseconds stallShutdownTime{0};   // HVD_STALL_SHUTDOWN_TIME (s; 0: never)
  // HVD_STALL_CHECK_DISABLE (alias HOROVOD_STALL_CHECK_DISABLE): when 1, stallCheckTime is 0,
  // which turns off the warnings and the shutdown both.
  bool stallCheckDisabled = false;
  std::string timelinePath;  // HVD_TIMELINE (rank 0 writes it)
  // HVD_TIMELINE=DYNAMIC: no timeline until hvd::startTimeline() (timelinePath stays empty).
  bool timelineDynamic = false;
  bool timelineMarkCycles = false;  // HVD_TIMELINE_MARK_CYCLES: 0 or 1
  // Which of the engine's tunable knobs the environment set: autotune leaves those as they are.
  bool fusionThresholdSet = false;
  bool cycleTimeSet = false;
  bool cacheCapacitySet = false;
  bool hierarchicalSet = false;

  // Autotune (engine/autotune.h): HVD_AUTOTUNE, HVD_AUTOTUNE_LOG, HVD_AUTOTUNE_WARMUP_SAMPLES,
  // HVD_AUTOTUNE_STEPS_PER_SAMPLE, HVD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES,
  // HVD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE (each also under its HOROVOD_* name).
  bool autotune = false;
  std::string autotuneLog;
  int autotuneWarmupSamples = 3;
  int autotuneStepsPerSample = 10;
  int autotuneBayesOptMaxSamples = 20;
  double autotuneNoise = 0.8;
  size_t stragglerWindow = 256;  // HVD_STRAGGLER_WINDOW (0: no straggler check)

  // Process sets (core/process_sets.h) fixed at init: HVD_PROCESS_SETS ("0,1;2,3"), or the
  // list hvd.init(process_sets=...) passes; every rank must give the same list.
  std::vector<std::vector<int>> processSets;
  // HVD_DYNAMIC_PROCESS_SETS (alias HOROVOD_DYNAMIC_PROCESS_SETS): 0 or 1; sets may be added
  // and removed after init.
  bool dynamicProcessSets = false;

  // hvd.init(comm=[...]) (core/job_members.h): the launched ranks that form this job, rank i
  // being launched rank members[i]; empty for every launched rank as launched. With members,
  // rank and size are the new job's, and the local and cross placement (the launched rank's
  // until then) come from the members' hosts at rendezvous.
  std::vector<int> members;

  // Elastic mode (HVD_ELASTIC, contract/elastic.h): the store namespace is the round's, and
  // init after shutdown asks the leader for the next round's place (core/elastic_session.h).
  bool elastic = false;
  int elasticRound = 0;                              // HVD_ELASTIC_ROUND
  int workerId = 0;                                  // HVD_WORKER_ID
  std::chrono::milliseconds elasticTimeout{600000};  // HVD_ELASTIC_TIMEOUT (seconds)

  // One line for the start-up log: the placement and the store, then every knob of the worker
  // table (contract/worker_variables.h) as its variable spells it. The token is shown as "<set>".
  std::string summary() const;
};

// Reads the configuration through `getenv` (injectable for tests): every configuration
// variable of the worker table, in the table's order, each checked against its entry. A missing
// or malformed variable throws hvd::InvalidArgumentError naming it and what was expected.
using contract::EnvReader;
Config parseConfig(const EnvReader& getenv);
Config configFromEnvironment();

// The value `config` holds for `variable`, spelled as the variable takes it ("" when it holds
// none; the token as it is); nullopt for a variable the configuration does not read.
std::optional<std::string> configValue(const Config& config,
                                       const contract::WorkerVariable& variable);

// The CPU backend the environment asks for, read as parseConfig reads it: "hvd" (also when
// unset) or "mpi", or "" for a value parseConfig would refuse. Whether mpirun started the
// process is parseConfig's concern, not this one's.
std::string requestedCpuBackend(const EnvReader& getenv);

}  // namespace hvd::core
