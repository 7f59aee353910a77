// Builds a Context for one rank of a job: every rank publishes its data-plane address through
// the job's store and waits for every rank to arrive (seven store requests per rank, none that
// reads every rank's record), then pairs of ranks open their links (mesh_links.h): every pair
// at init up to ContextOptions::fullMeshRanks ranks; beyond it only the ring neighbours, and
// the others on first use, each reading its peer's record from the store as it opens. Pairs on the
// same host (same host key) use a shared-memory ring pair and keep the socket only for wake-ups and
// liveness; other pairs use the socket as a TcpLink.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "store/store.h"
#include "transport/context.h"

namespace hvd::transport {

struct MeshConfig {
  int rank = 0;
  int size = 1;
  // Identifies the machine (hostname, boot id, network namespace): equal keys may share memory.
  std::string hostKey;
  std::string hostName;  // for messages
  // Address the data-plane listener binds and advertises.
  std::string bindAddress = "127.0.0.1";
  bool allowShm = true;
  // Ring bytes per direction between ring neighbours; the other same-host pairs share
  // shmPeerBudgetBytes per rank (transport/shm_sizing.h).
  size_t shmRingBytes = 1 << 20;
  size_t shmPeerBudgetBytes = 16 << 20;
  // Process sets may be used (mesh_links.h: their channels may open at any time).
  bool processSets = false;
  // Deadline for the whole setup (every rank must arrive within it).
  std::chrono::milliseconds setupTimeout{60000};
  ContextOptions options;
};

class MeshLinks;

// This rank's place in the job's data plane once the rendezvous is done: its listener and the
// records it has read. Contexts come from it by channel (mesh_links.h): the runtime's
// collectives use channel 0, the engine channel 1; each context's links are its own.
class Mesh {
 public:
  // The rendezvous: every rank of the job calls it. `hostKeys`, when given, receives every
  // rank's host key as it published it (the runtime derives the cross ranks from them when
  // the launcher named no node: mpirun); only then does every rank read every record.
  static std::unique_ptr<Mesh> join(store::Store& store, const MeshConfig& config,
                                    std::vector<std::string>* hostKeys = nullptr);
  ~Mesh();

  // The context of `channel` (each at most once; every rank connects the same channels): a
  // full mesh opens every link now, beyond it the ring neighbours now and the others on first
  // use. The links opened now must be up within `timeout`.
  std::unique_ptr<Context> connect(int channel, const ContextOptions& options,
                                   std::chrono::milliseconds timeout);
  // The context of a process set: `members` (ascending job ranks, this rank among them) on
  // `channel` (>= the fixed channels; MeshConfig::processSets). Its ranks are the members'
  // indexes; its links are opened between members only, as connect() opens a job's, and its
  // links name the peers by job rank. Every member connects the same channel with the same
  // members.
  std::unique_ptr<Context> connectMembers(int channel, const std::vector<int>& members,
                                          const ContextOptions& options,
                                          std::chrono::milliseconds timeout);

 private:
  Mesh(const MeshConfig& config, std::shared_ptr<MeshLinks> links);
  MeshConfig config_;
  std::shared_ptr<MeshLinks> links_;  // null for a job of one rank
};

// join, then connect channel 0 within what is left of config.setupTimeout.
std::unique_ptr<Context> connectMesh(store::Store& store, const MeshConfig& config,
                                     std::vector<std::string>* hostKeys = nullptr);

// Host identity used for MeshConfig::hostKey: hostname, kernel boot id and network namespace.
std::string localHostKey();

}  // namespace hvd::transport
