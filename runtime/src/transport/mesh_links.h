// The links of one rank's mesh, opened pair by pair: the higher rank of a pair connects to the
// lower one's listener and sends a hello (its rank and the nonce of the lower rank's record,
// which proves it read the job's store); a pair on the same host then sets up a shared-memory
// ring pair over that socket (the lower rank creates the segment and sends its name, the
// higher maps it and acknowledges, the lower unlinks it) and keeps the socket for wake-ups and
// liveness; any other pair uses the socket as a TcpLink.
//
// Each pair's handshake runs on its own, asynchronously, so a batch of links completes as soon
// as each of its peers takes part, whatever the others do; connections from peers outside the
// batch are accepted, checked and kept for a later batch (link_source.h says why that cannot
// deadlock). connectMesh (mesh.h) opens every pair at init, or only the ring neighbours beyond
// ContextOptions::fullMeshRanks and leaves this object to the context as its LinkSource.
#pragma once

#include <boost/asio.hpp>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "transport/link_source.h"
#include "transport/shm_link.h"

namespace hvd::transport {

// What every rank publishes under "mesh/<rank>".
struct PeerInfo {
  std::string address;
  uint16_t port = 0;
  std::string hostKey;
  std::string hostName;
  uint64_t nonce = 0;  // proves a connecting peer read this rank's record from the job's store
  // This rank's ContextOptions::fullMeshRanks: the collectives pick their schedule by it, so
  // ranks that disagree would wait on each other in different schedules; init refuses instead.
  int fullMeshRanks = 0;
};

struct MeshLinksConfig {
  int rank = 0;
  int size = 1;
  bool allowShm = true;
  size_t shmRingBytes = 1 << 20;
  size_t shmPeerBudgetBytes = 16 << 20;
  int fullMeshRanks = 64;  // published in self() (PeerInfo::fullMeshRanks)
};

class MeshLinks final : public LinkSource {
 public:
  // Listens on `bindAddress` (any port) at once; self() is this rank's record to publish.
  MeshLinks(const MeshLinksConfig& config, const std::string& bindAddress,
            const std::string& hostKey, const std::string& hostName);
  ~MeshLinks() override;

  const PeerInfo& self() const { return self_; }
  // Every rank's record (index = rank), from the store; before the first open().
  void setPeers(std::vector<PeerInfo> peers);

  const char* kindOf(int peer) const override;
  void open(const std::vector<int>& peers, std::vector<std::unique_ptr<Link>>& links,
            std::chrono::milliseconds timeout, const char* what) override;
  // Stops accepting (a full mesh, once every link is open).
  void closeListener();

 private:
  struct Pair;
  bool local(int peer) const;
  Pair& pairFor(int peer);
  void connectTo(int peer);
  void acceptNext();
  void receiveShmName(int peer);
  void offerShm(int peer);
  void finish(int peer);
  std::unique_ptr<Link> makeLink(int peer, Pair& pair);

  boost::asio::io_context io_;  // first: destroyed last, after every socket and timer
  boost::asio::ip::tcp::acceptor acceptor_;
  MeshLinksConfig config_;
  PeerInfo self_;
  std::vector<PeerInfo> peers_;
  int localPeers_ = 0;
  std::vector<char> linked_;                    // per peer: its link has been handed out
  std::map<int, std::unique_ptr<Pair>> pairs_;  // handshakes begun, by peer
  std::set<std::string> created_;               // segments not unlinked yet
  int outstanding_ = 0;                         // pairs of the current batch not done
  bool accepting_ = false;
};

}  // namespace hvd::transport
