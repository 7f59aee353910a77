// A Runtime is one initialised libhvd instance: it owns the parsed Config, the connection to
// the job's store, the transport Context every blocking collective runs on, and the engine
// (hvd/engine.hpp) with a second Context of its own (store keys under "engine/"), so async ops
// never interleave with the caller's blocking collectives. The engine starts on the first use
// of engine() (each rank's first async op or join): a program that only uses the blocking
// collectives pays neither for its connections nor for its background cycles. Its connections
// rendezvous like init's, so a rank that never uses the engine makes the others' first async op
// fail after HVD_START_TIMEOUT, naming the ranks that did not arrive. The public API (hvd.hpp,
// hvd.h, engine.hpp) is a thin shim over one instance per process; tests create several.
//
// The CPU collectives of both (collectives(), and the engine's data collectives) run on hvd's
// own transports, or with HVD_CPU_BACKEND=mpi on MPI (mpi/mpi_collectives.h): two
// communicators of their own, duplicated at init, as the caller's thread and the engine's call
// MPI at once. The engine's negotiation always stays on its hvd Context.
//
// Under mpirun with no store given (Config::mpiRendezvous), the job's store comes from MPI:
// rank 0 starts a TCP store server in this process (its first non-loopback IPv4 address, or
// HVD_DATA_ADDR; an ephemeral port; a fresh random token), MPI_Bcast gives every rank its
// address and token, and from there on the ranks use it exactly as a store hvdrun provides.
// At shutdown every rank waits (at most HVD_START_TIMEOUT) in an MPI barrier after closing its
// store connection, so rank 0's server outlives every client. MPI itself stays initialised
// until the process exits (mpi/mpi_api.h).
#pragma once

#include <memory>
#include <mutex>

#include "collectives/host_collectives.h"
#include "core/config.h"
#include "core/process_set_engines.h"
#include "engine/engine.h"
#include "gpu/device_backend.h"
#include "hvd_support/tcp_store_server.h"
#include "mpi/mpi_api.h"
#include "store/store.h"
#include "transport/context.h"
#include "transport/mesh.h"

namespace hvd::core {

class Runtime {
 public:
  // Connects to the store and to every peer. `generation` counts previous init/shutdown
  // cycles of this process so that a re-init never reads the previous cycle's records.
  Runtime(const Config& config, int generation);
  ~Runtime();

  const Config& config() const { return config_; }
  transport::Context& context() { return *context_; }
  // The blocking CPU collectives: over context() or over MPI (HVD_CPU_BACKEND).
  coll::HostCollectives& collectives() { return *collectives_; }
  // Device buffers of the blocking collectives (NCCL or host-staged, chosen on first use).
  gpu::DeviceBackend& devices() { return *devices_; }
  // Starts the engine on first use (thread-safe); throws what connecting its mesh throws.
  engine::Engine& engine();
  // hvd::startTimeline / stopTimeline: forwarded to the engine once it runs; before that, rank
  // 0 opens the file here and hands it to the engine when it starts (neither starts it).
  void startTimeline(const std::string& path, bool markCycles);
  void stopTimeline();
  // The engine's counters; zeros while it has not started (never starts it).
  engine::EngineStats engineStats();
  // Why this rank is about to shut down (engine::kStop*), for the other ranks' errors: given to
  // every engine that runs. Call before destroying the runtime.
  void setStopReason(const std::string& reason);
  // The process sets and their engines (set 0's is engine()).
  ProcessSetEngines& processSets() { return *processSets_; }
  // Horovod's is_homogeneous: every rank's host runs the same number of ranks. Learnt at init,
  // so asking is local.
  bool homogeneous() const { return homogeneous_; }

 private:
  // Rank 0 serves the job's store, every rank learns it through MPI_Bcast (mpiRendezvous).
  void storeFromMpi();
  // The collectives of HVD_CPU_BACKEND=mpi (the caller's and the engine's, each on a
  // communicator of its own), after checking that MPI places this rank as hvd does.
  void mpiCollectives();
  // What init learns from every rank in one small allgather: that they were given the same
  // process sets (else it throws), and whether their hosts run as many ranks each.
  void exchangeInitFacts();
  // The process sets of HVD_PROCESS_SETS / init (every rank has the same: exchangeInitFacts).
  void setUpProcessSets();

  Config config_;
  std::shared_ptr<mpi::Session> mpi_;                   // while anything below may call MPI
  std::unique_ptr<mpi::Comm> bootstrapComm_;            // mpiRendezvous: bcast, last barrier
  std::unique_ptr<store::TcpStoreServer> storeServer_;  // rank 0 of mpiRendezvous: outlives
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<store::Store> scoped_;  // this init cycle's key prefix over store_
  std::unique_ptr<transport::FailureBoard> failureBoard_;
  std::unique_ptr<transport::Context> context_;
  std::unique_ptr<gpu::DeviceBackend> devices_;         // over context_ and scoped_
  std::unique_ptr<coll::HostCollectives> collectives_;  // over context_, or MPI
  transport::MeshConfig mesh_;  // how init connected; the engine's channel connects alike
  // The rendezvous' outcome: this rank's listener and records, by channel (0 for context_,
  // 1 for engineContext_); after the contexts in destruction, before the store.
  std::unique_ptr<transport::Mesh> network_;
  std::mutex engineMutex_;                      // guards the engine's start
  std::unique_ptr<store::Store> engineScoped_;  // "engine/" under scoped_ (NCCL ids)
  std::unique_ptr<transport::Context> engineContext_;
  // The engine's device buffers: NCCL communicators of its own, as its CPU mesh is its own.
  std::unique_ptr<gpu::DeviceBackend> engineDevices_;
  std::unique_ptr<coll::HostCollectives> engineCollectives_;  // MPI only; else the engine's ring
  // A timeline started (or stopped: decided, none pending) before the engine existed.
  std::unique_ptr<engine::Timeline> pendingTimeline_;
  bool timelineDecided_ = false;
  bool pendingMarkCycles_ = false;
  std::unique_ptr<engine::Engine> engine_;  // uses engineContext_: destroyed first
  // Their engines use their own contexts over network_; adding and removing sets uses engine_.
  std::unique_ptr<ProcessSetEngines> processSets_;
  bool homogeneous_ = true;
};

// The GPU backend's options from the configuration. `blockingApi`: the backend of the blocking
// collectives, whose NCCL calls first agree over the Runtime's context (never the engine's).
gpu::DeviceBackendOptions deviceOptions(const Config& config, bool blockingApi);

// The engine's options from the configuration.
engine::EngineOptions engineOptions(const Config& config);

}  // namespace hvd::core
