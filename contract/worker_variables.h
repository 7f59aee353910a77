// The variables a worker reads, in one table: each one's name, Horovod's name for it, type,
// range, default and meaning. Everything else derives from it: the runtime's parser and its
// start-up summary walk the table (runtime/src/core/config.cc), the agent writes the table's
// names (agent/node/worker_env.cc), and hvdrun builds its engine options' help and settings from
// the entries (findWorkerVariable below). A variable added here and not parsed, or parsed and not
// written, fails tests/unit/worker_env_roundtrip_test.cc.
//
// Header only and dependency-free (hvd_contract_env): the runtime, below every other module,
// includes it. Reading a value against its entry (range, choices, error text) is
// contract/worker_values.h.
//
// For hvdrun: findWorkerVariable(name) finds an entry by its name or alias; `doc` is one line
// for --help, `defaultValue` what the ranks use when the option is not given, `min`/`max` the
// range the ranks accept (in the variable's own unit), and contract::parseWorkerValue
// (contract/worker_values.h) checks a value exactly as a rank will.
#pragma once

#include <string_view>

namespace hvd::contract {

enum class VariableType {
  kBool,     // 0 or 1
  kInt,      // a whole number in [min, max]
  kSize,     // a count (bytes, entries) in [min, max]
  kSeconds,  // a timeout: a positive number of seconds (fractions allowed), at most max
  kNumber,   // a decimal number of `unit` in [min, max]; above min when `positive`
  kString,   // any text; an empty value counts as unset, as for every type
  kEnum,     // one of `choices`
};

// Who puts the variable into a worker's environment.
enum class VariableSource {
  kLauncher,  // the agent, for every rank (agent/node/worker_env.h)
  kUser,      // the user: hvdrun -x or an hvdrun option, or the shell the job inherits
};

// Which part of the worker reads it.
enum class VariableReader {
  kConfig,   // the runtime's configuration at init (runtime/src/core/config.h)
  kLogging,  // libhvd's loggers, when each is created (HVD_LOG_*; hvdrun and hvdagent too)
  kNccl,     // the NCCL loader, when a device op or hvd.nccl_built() first needs NCCL
};

struct WorkerVariable {
  // The required facts; the rest are set with the with*() steps below, each returning a copy, so
  // that an entry reads as a sentence and omits what does not apply.
  constexpr WorkerVariable(const char* name, VariableType type, const char* doc)
      : name(name), type(type), doc(doc) {}

  const char* name;
  VariableType type;
  const char* doc;  // one line: what it does, in the unit the variable takes
  // Horovod's name, read when `name` is unset or empty (so `name` wins when both are set).
  const char* alias = nullptr;
  VariableSource source = VariableSource::kUser;
  VariableReader reader = VariableReader::kConfig;
  // The accepted range (kBool, kInt, kSize, kNumber; kSeconds: above min, up to max).
  double min = 0;
  double max = 0;
  bool positive = false;  // kNumber: strictly above min
  // "s", "ms", "us", "B" or "": the summary prints it after a value; kNumber's errors name it.
  const char* unit = "";
  // kEnum: the accepted values, space-separated; `aliasChoices`: "word=value" synonyms accepted
  // only under the alias (Horovod's words); `noun`: what a value names, for errors.
  const char* choices = nullptr;
  const char* aliasChoices = nullptr;
  const char* noun = nullptr;
  // What an unset variable means, spelled as a value; null where there is no single value (the
  // doc line says what applies).
  const char* defaultValue = nullptr;
  // A valid value other than the default: for help texts and for the tests that send every
  // variable through the writer and the parser.
  const char* example = nullptr;
  bool secret = false;  // never logged or summarised (its value is replaced)

  constexpr WorkerVariable withAlias(const char* horovodName) const {
    WorkerVariable v = *this;
    v.alias = horovodName;
    return v;
  }
  constexpr WorkerVariable writtenByLauncher() const {
    WorkerVariable v = *this;
    v.source = VariableSource::kLauncher;
    return v;
  }
  constexpr WorkerVariable readBy(VariableReader r) const {
    WorkerVariable v = *this;
    v.reader = r;
    return v;
  }
  // Also what the runtime narrows an entry to when the bound depends on another value
  // (HVD_RANK: 0..HVD_SIZE-1).
  constexpr WorkerVariable withRange(double low, double high) const {
    WorkerVariable v = *this;
    v.min = low;
    v.max = high;
    return v;
  }
  constexpr WorkerVariable aboveMin() const {
    WorkerVariable v = *this;
    v.positive = true;
    return v;
  }
  constexpr WorkerVariable withUnit(const char* u) const {
    WorkerVariable v = *this;
    v.unit = u;
    return v;
  }
  constexpr WorkerVariable withChoices(const char* what, const char* values,
                                       const char* horovodSynonyms = nullptr) const {
    WorkerVariable v = *this;
    v.noun = what;
    v.choices = values;
    v.aliasChoices = horovodSynonyms;
    return v;
  }
  constexpr WorkerVariable withDefault(const char* value) const {
    WorkerVariable v = *this;
    v.defaultValue = value;
    return v;
  }
  constexpr WorkerVariable withExample(const char* value) const {
    WorkerVariable v = *this;
    v.example = value;
    return v;
  }
  constexpr WorkerVariable asSecret() const {
    WorkerVariable v = *this;
    v.secret = true;
    return v;
  }
};

namespace worker {

using T = VariableType;

// --- The rank's place in the job (contract/placement.h) and the job -------------------------
// Required unless srun or mpirun started the worker (runtime/src/core/scheduler_env.h).
inline constexpr WorkerVariable kSize =
    WorkerVariable("HVD_SIZE", T::kInt, "the number of ranks in the job")
        .writtenByLauncher()
        .withRange(1, 1 << 20)
        .withExample("6");
inline constexpr WorkerVariable kRank =
    WorkerVariable("HVD_RANK", T::kInt, "this rank, 0..HVD_SIZE-1")
        .writtenByLauncher()
        .withRange(0, (1 << 20) - 1)
        .withExample("5");
inline constexpr WorkerVariable kLocalSize =
    WorkerVariable("HVD_LOCAL_SIZE", T::kInt, "the ranks on this rank's host, 1..HVD_SIZE")
        .writtenByLauncher()
        .withRange(1, 1 << 20)
        .withExample("3");
inline constexpr WorkerVariable kLocalRank =
    WorkerVariable("HVD_LOCAL_RANK", T::kInt, "this rank's index on its host, 0..HVD_LOCAL_SIZE-1")
        .writtenByLauncher()
        .withRange(0, (1 << 20) - 1)
        .withExample("2");
inline constexpr WorkerVariable kCrossSize =
    WorkerVariable("HVD_CROSS_SIZE", T::kInt,
                   "the hosts that run a rank with this local rank, 1..HVD_SIZE")
        .writtenByLauncher()
        .withRange(1, 1 << 20)
        .withExample("2");
inline constexpr WorkerVariable kCrossRank =
    WorkerVariable("HVD_CROSS_RANK", T::kInt, "this rank's host among those, 0..HVD_CROSS_SIZE-1")
        .writtenByLauncher()
        .withRange(0, (1 << 20) - 1)
        .withExample("1");
inline constexpr WorkerVariable kJobId =
    WorkerVariable("HVD_JOB_ID", T::kString, "the job's id: the namespace of its store keys")
        .writtenByLauncher()
        .withExample("job-7");

// --- The rendezvous store ------------------------------------------------------------------
inline constexpr WorkerVariable kStoreFile =
    WorkerVariable("HVD_STORE_FILE", T::kString,
                   "a directory every rank shares, used as the store when HVD_STORE_ADDR is unset "
                   "(srun, mpirun); the job's keys go under <dir>/<job id>")
        .withExample("/shared/hvd-store");
inline constexpr WorkerVariable kStoreAddr =
    WorkerVariable("HVD_STORE_ADDR", T::kString,
                   "host:port of the job's TCP store (required with more than one rank, unless "
                   "HVD_STORE_FILE names a store or mpirun provides one)")
        .writtenByLauncher()
        .withExample("[fd00::1]:29400");
inline constexpr WorkerVariable kStoreToken =
    WorkerVariable("HVD_STORE_TOKEN", T::kString,
                   "the attempt's bearer token for the store (required with HVD_STORE_ADDR)")
        .writtenByLauncher()
        .asSecret()
        .withExample("token-of-the-attempt");

// --- Elastic mode (contract/elastic.h) -----------------------------------------------------
inline constexpr WorkerVariable kElastic =
    WorkerVariable("HVD_ELASTIC", T::kBool,
                   "1: an elastic job; init after shutdown takes the rank's place in the next "
                   "round from the leader")
        .withAlias("HOROVOD_ELASTIC")
        .writtenByLauncher()
        .withRange(0, 1)
        .withDefault("0")
        .withExample("1");
inline constexpr WorkerVariable kElasticRound =
    WorkerVariable("HVD_ELASTIC_ROUND", T::kInt,
                   "the round the worker was started for (its store namespace)")
        .writtenByLauncher()
        .withRange(0, 1 << 30)
        .withDefault("0")
        .withExample("3");
inline constexpr WorkerVariable kWorkerId =
    WorkerVariable("HVD_WORKER_ID", T::kInt,
                   "the worker's id in an elastic job, kept across rounds and never reused")
        .writtenByLauncher()
        .withRange(0, 1 << 30)
        .withDefault("0")
        .withExample("7");
inline constexpr WorkerVariable kElasticTimeout =
    WorkerVariable("HVD_ELASTIC_TIMEOUT", T::kSeconds,
                   "seconds a worker waits for its place in the next round")
        .withAlias("HOROVOD_ELASTIC_TIMEOUT")
        .writtenByLauncher()
        .withRange(0, 1e6)
        .withUnit("s")
        .withDefault("600")
        .withExample("120");

// --- Transports and their tuning -----------------------------------------------------------
inline constexpr WorkerVariable kTimeout =
    WorkerVariable("HVD_TIMEOUT", T::kSeconds,
                   "seconds a collective or store wait may take before it fails")
        .withRange(0, 1e6)
        .withUnit("s")
        .withDefault("60")
        .withExample("30");
inline constexpr WorkerVariable kStartTimeout =
    WorkerVariable("HVD_START_TIMEOUT", T::kSeconds,
                   "seconds every rank may take to arrive at the rendezvous (default: "
                   "HVD_TIMEOUT's value)")
        .withRange(0, 1e6)
        .withUnit("s")
        .withExample("90");
inline constexpr WorkerVariable kTransport =
    WorkerVariable("HVD_TRANSPORT", T::kEnum,
                   "auto (shared memory to same-host peers, TCP to others; shm is a synonym) or "
                   "tcp (TCP to every peer)")
        .withChoices("transport", "auto shm tcp")
        .withDefault("auto")
        .withExample("tcp");
inline constexpr WorkerVariable kDataAddr =
    WorkerVariable("HVD_DATA_ADDR", T::kString,
                   "the address this rank's data-plane listener binds and advertises (default: the "
                   "local address that routes to the store)")
        .withExample("10.0.0.7");
// Horovod's HOROVOD_GLOO_IFACE, which horovodrun sets from --network-interface: a name every
// host can share where the addresses differ. Resolved on the rank's own host at init.
inline constexpr WorkerVariable kDataIface =
    WorkerVariable("HVD_DATA_IFACE", T::kString,
                   "the network interface whose address (IPv4 first) this rank's data-plane "
                   "listener binds and advertises (HVD_DATA_ADDR wins when both are set)")
        .withAlias("HOROVOD_GLOO_IFACE")
        .withExample("lo");
inline constexpr WorkerVariable kShmRingBytes =
    WorkerVariable("HVD_SHM_RING_BYTES", T::kSize,
                   "bytes of each shared-memory ring, per direction (a power of two)")
        .withRange(4096, 1 << 30)
        .withUnit("B")
        .withDefault("1048576")
        .withExample("65536");
inline constexpr WorkerVariable kSmallMessageBytes =
    WorkerVariable("HVD_SMALL_MESSAGE_BYTES", T::kSize,
                   "up to this many bytes a collective takes the latency-optimised algorithm "
                   "(default 8192 over shared memory, 131072 over TCP; given, both)")
        .withRange(0, 1 << 30)
        .withUnit("B")
        .withExample("4096");
inline constexpr WorkerVariable kFullMeshRanks =
    WorkerVariable("HVD_FULL_MESH_RANKS", T::kInt,
                   "up to this many ranks every pair connects at init; beyond, ring neighbours "
                   "at init and others on first use")
        .withRange(1, 1 << 30)
        .withDefault("64")
        .withExample("16");
inline constexpr WorkerVariable kPieceBytes =
    WorkerVariable("HVD_PIECE_BYTES", T::kSize,
                   "bytes of each pipelined piece of a ring collective over shared memory")
        .withRange(64, 1 << 30)
        .withUnit("B")
        .withDefault("262144")
        .withExample("131072");
inline constexpr WorkerVariable kPieceBytesTcp =
    WorkerVariable("HVD_PIECE_BYTES_TCP", T::kSize,
                   "bytes of each pipelined piece of a ring collective over TCP")
        .withRange(64, 1 << 30)
        .withUnit("B")
        .withDefault("1048576")
        .withExample("524288");
inline constexpr WorkerVariable kYieldUs =
    WorkerVariable("HVD_YIELD_US", T::kInt,
                   "microseconds a waiting rank yields its CPU before it sleeps")
        .withRange(0, 10'000'000)
        .withUnit("us")
        .withDefault("2000")
        .withExample("500");
inline constexpr WorkerVariable kSpinUs =
    WorkerVariable("HVD_SPIN_US", T::kInt,
                   "microseconds a waiting rank spins before it yields (default 50, or 0 when "
                   "the host runs more ranks than this process may use CPUs)")
        .withRange(0, 10'000'000)
        .withUnit("us")
        .withDefault("50")
        .withExample("10");

// --- Backends ------------------------------------------------------------------------------
inline constexpr WorkerVariable kGpuBackend =
    WorkerVariable("HVD_GPU_BACKEND", T::kEnum,
                   "device buffers: auto (NCCL if it loads, else staged through host memory), "
                   "nccl or host")
        .withChoices("GPU backend", "auto nccl host")
        .withDefault("auto")
        .withExample("host");
inline constexpr WorkerVariable kCpuBackend =
    WorkerVariable("HVD_CPU_BACKEND", T::kEnum,
                   "host buffers: hvd (its own transports) or mpi (a job mpirun started, with "
                   "libhvd's MPI plugin)")
        .withAlias("HOROVOD_CPU_OPERATIONS")
        .withChoices("CPU backend", "hvd mpi", "gloo=hvd")
        .withDefault("hvd")
        .withExample("mpi");
inline constexpr WorkerVariable kHierarchicalAllreduce =
    WorkerVariable("HVD_HIERARCHICAL_ALLREDUCE", T::kBool,
                   "GPU allreduce as reduce-scatter in each node, allreduce across nodes, "
                   "allgather in each node")
        .withAlias("HOROVOD_HIERARCHICAL_ALLREDUCE")
        .withRange(0, 1)
        .withDefault("0")
        .withExample("1");

// --- The engine ----------------------------------------------------------------------------
inline constexpr WorkerVariable kCycleTime =
    WorkerVariable("HVD_CYCLE_TIME", T::kNumber,
                   "engine: milliseconds between negotiation cycles (fractions allowed)")
        .withAlias("HOROVOD_CYCLE_TIME")
        .withRange(0, 60000)
        .aboveMin()
        .withUnit("ms")
        .withDefault("1")
        .withExample("2.5");
inline constexpr WorkerVariable kCacheCapacity =
    WorkerVariable("HVD_CACHE_CAPACITY", T::kSize,
                   "engine: response cache entries (0 disables the cache)")
        .withAlias("HOROVOD_CACHE_CAPACITY")
        .withRange(0, 1 << 20)
        .withDefault("1024")
        .withExample("7");
inline constexpr WorkerVariable kFusionThreshold =
    WorkerVariable(
        "HVD_FUSION_THRESHOLD", T::kSize,
        "engine: bytes of the buffer ready allreduces are fused into (0 disables fusion)")
        .withAlias("HOROVOD_FUSION_THRESHOLD")
        .withRange(0, double(1LL << 40))
        .withUnit("B")
        .withDefault("134217728")
        .withExample("1048576");
inline constexpr WorkerVariable kStallCheckTime =
    WorkerVariable("HVD_STALL_CHECK_TIME", T::kNumber,
                   "engine: seconds after which ops some ranks submitted and others did not are "
                   "reported (0 disables)")
        .withAlias("HOROVOD_STALL_CHECK_TIME_SECONDS")
        .withRange(0, 1e6)
        .withUnit("s")
        .withDefault("60")
        .withExample("7");
inline constexpr WorkerVariable kStallShutdownTime =
    WorkerVariable("HVD_STALL_SHUTDOWN_TIME", T::kNumber,
                   "engine: seconds of a stall after which the job fails (0 never)")
        .withAlias("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS")
        .withRange(0, 1e6)
        .withUnit("s")
        .withDefault("0")  // Horovod's: a stall is reported, and the job left to the user
        .withExample("9");
inline constexpr WorkerVariable kStallCheckDisable =
    WorkerVariable("HVD_STALL_CHECK_DISABLE", T::kBool,
                   "engine: 1 turns the stall check off, its warnings and its shutdown, whatever "
                   "HVD_STALL_CHECK_TIME says")
        .withAlias("HOROVOD_STALL_CHECK_DISABLE")
        .withRange(0, 1)
        .withDefault("0")
        .withExample("1");
inline constexpr WorkerVariable kTimeline =
    WorkerVariable("HVD_TIMELINE", T::kString,
                   "engine: the file rank 0 writes a Chrome-trace timeline to; DYNAMIC: none "
                   "until the program calls start_timeline()")
        .withAlias("HOROVOD_TIMELINE")
        .withExample("/tmp/timeline.json");
inline constexpr WorkerVariable kProcessSets =
    WorkerVariable("HVD_PROCESS_SETS", T::kString,
                   "process sets fixed at init, ranks comma-separated and sets by ';' (every rank "
                   "gives the same)")
        .withExample("0,1;2,3");
inline constexpr WorkerVariable kDynamicProcessSets =
    WorkerVariable("HVD_DYNAMIC_PROCESS_SETS", T::kBool,
                   "engine: process sets may be added and removed after init")
        .withAlias("HOROVOD_DYNAMIC_PROCESS_SETS")
        .withRange(0, 1)
        .withDefault("0")
        .withExample("1");
inline constexpr WorkerVariable kTimelineMarkCycles =
    WorkerVariable("HVD_TIMELINE_MARK_CYCLES", T::kBool,
                   "engine: mark each negotiation cycle that ran ops in the timeline")
        .withAlias("HOROVOD_TIMELINE_MARK_CYCLES")
        .withRange(0, 1)
        .withDefault("0")
        .withExample("1");
inline constexpr WorkerVariable kAutotune =
    WorkerVariable("HVD_AUTOTUNE", T::kBool,
                   "engine: tune fusion threshold, cycle time, response cache and hierarchical "
                   "allreduce by measured throughput (the knobs set explicitly stay fixed)")
        .withAlias("HOROVOD_AUTOTUNE")
        .withRange(0, 1)
        .withDefault("0")
        .withExample("1");
inline constexpr WorkerVariable kAutotuneLog =
    WorkerVariable("HVD_AUTOTUNE_LOG", T::kString,
                   "engine: the CSV file rank 0 writes autotune's samples and its choice to")
        .withAlias("HOROVOD_AUTOTUNE_LOG")
        .withExample("/tmp/autotune.csv");
inline constexpr WorkerVariable kAutotuneWarmupSamples =
    WorkerVariable("HVD_AUTOTUNE_WARMUP_SAMPLES", T::kInt,
                   "engine: autotune samples discarded before the search starts")
        .withAlias("HOROVOD_AUTOTUNE_WARMUP_SAMPLES")
        .withRange(0, 1000)
        .withDefault("3")
        .withExample("1");
inline constexpr WorkerVariable kAutotuneStepsPerSample =
    WorkerVariable("HVD_AUTOTUNE_STEPS_PER_SAMPLE", T::kInt,
                   "engine: training steps (each gradient reduced once) in one autotune sample "
                   "(0 counts as 1)")
        .withAlias("HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE")
        .withRange(0, 100000)
        .withDefault("10")
        .withExample("4");
inline constexpr WorkerVariable kAutotuneBayesOptMaxSamples =
    WorkerVariable("HVD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", T::kInt,
                   "engine: samples the Bayesian search of fusion threshold and cycle time takes "
                   "(0: none)")
        .withAlias("HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES")
        .withRange(0, 1000)
        .withDefault("20")
        .withExample("8");
inline constexpr WorkerVariable kAutotuneGaussianProcessNoise =
    WorkerVariable("HVD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", T::kNumber,
                   "engine: autotune's noise variance, relative to the spread of the scores, "
                   "0 to 1")
        .withAlias("HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE")
        .withRange(0, 1)
        .withDefault("0.8")
        .withExample("0.3");
inline constexpr WorkerVariable kStragglerWindow =
    WorkerVariable("HVD_STRAGGLER_WINDOW", T::kSize,
                   "engine: ops per straggler check (the ranks compare how long each waited for "
                   "the others; 0 disables)")
        .withRange(0, 1 << 20)
        .withDefault("256")
        .withExample("64");

// --- Read outside the configuration --------------------------------------------------------
inline constexpr WorkerVariable kLogLevel =
    WorkerVariable("HVD_LOG_LEVEL", T::kString,
                   "log level: trace, debug, info, warn, error or off (an unknown name: warn)")
        .readBy(VariableReader::kLogging)
        .withDefault("warn")
        .withExample("debug");
inline constexpr WorkerVariable kLogSubsystems =
    WorkerVariable("HVD_LOG_SUBSYS", T::kString,
                   "the subsystems that log below warn, comma-separated (default all)")
        .readBy(VariableReader::kLogging)
        .withExample("init,store");
inline constexpr WorkerVariable kNcclLibrary =
    WorkerVariable("HVD_NCCL_LIBRARY", T::kString,
                   "the NCCL library to load (default libnccl.so.2 through the loader's search)")
        .readBy(VariableReader::kNccl)
        .withExample("/opt/nccl/lib/libnccl.so.2");

// Every entry, in the order the runtime reads them (so that of two malformed variables the
// first one here is reported). A new constant above goes in here too.
inline constexpr WorkerVariable kAll[] = {
    kSize,
    kRank,
    kLocalSize,
    kLocalRank,
    kCrossSize,
    kCrossRank,
    kJobId,
    kStoreFile,
    kStoreAddr,
    kStoreToken,
    kElastic,
    kElasticRound,
    kWorkerId,
    kElasticTimeout,
    kTimeout,
    kStartTimeout,
    kTransport,
    kDataAddr,
    kDataIface,
    kShmRingBytes,
    kSmallMessageBytes,
    kFullMeshRanks,
    kPieceBytes,
    kPieceBytesTcp,
    kYieldUs,
    kSpinUs,
    kGpuBackend,
    kCpuBackend,
    kHierarchicalAllreduce,
    kCycleTime,
    kCacheCapacity,
    kFusionThreshold,
    kStallCheckTime,
    kStallShutdownTime,
    kStallCheckDisable,
    kTimeline,
    kProcessSets,
    kDynamicProcessSets,
    kTimelineMarkCycles,
    kAutotune,
    kAutotuneLog,
    kAutotuneWarmupSamples,
    kAutotuneStepsPerSample,
    kAutotuneBayesOptMaxSamples,
    kAutotuneGaussianProcessNoise,
    kStragglerWindow,
    kLogLevel,
    kLogSubsystems,
    kNcclLibrary,
};

}  // namespace worker

// The entry whose name or alias is `name`, or null.
constexpr const WorkerVariable* findWorkerVariable(std::string_view name) {
  for (const WorkerVariable& v : worker::kAll) {
    if (name == v.name || (v.alias != nullptr && name == v.alias)) return &v;
  }
  return nullptr;
}

}  // namespace hvd::contract
