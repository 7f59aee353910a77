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
//
// A peer's record is read from the job's store when its link is first opened (the records of
// a batch in one request), so a rank reads only the records of the peers it talks to.
#pragma once

#include <boost/asio.hpp>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "store/store.h"
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
};

// The store key of `rank`'s record, and the record's text (versioned: ranks of mixed hvd
// versions fail at init, naming the rank).
std::string peerKey(int rank);
std::string encodePeer(const PeerInfo& info);
PeerInfo decodePeer(const std::string& text, int rank);

struct MeshLinksConfig {
  int rank = 0;
  int size = 1;
  bool allowShm = true;
  size_t shmRingBytes = 1 << 20;
  size_t shmPeerBudgetBytes = 16 << 20;
};

class MeshLinks final : public LinkSource {
 public:
  // Listens on `bindAddress` (any port) at once; self() is this rank's record to publish.
  // Records not given to learn() are read from `store` (not owned; it outlives this object).
  MeshLinks(const MeshLinksConfig& config, const std::string& bindAddress,
            const std::string& hostKey, const std::string& hostName, store::Store& store);
  ~MeshLinks() override;

  const PeerInfo& self() const { return self_; }
  // How many ranks of the job share this rank's host (itself included); before the first
  // open().
  void setLocalRanks(int count);
  // A record already read from the store (index = rank), so that open() need not read it.
  void learn(int rank, PeerInfo info);

  LinkKinds kinds() const override;
  void open(const std::vector<int>& peers, std::vector<std::unique_ptr<Link>>& links,
            std::chrono::milliseconds timeout, const char* what) override;
  // Stops accepting (a full mesh, once every link is open).
  void closeListener();

 private:
  struct Pair;
  void fetchRecords(const std::vector<int>& peers, std::chrono::milliseconds timeout);
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
  store::Store& store_;
  PeerInfo self_;
  std::vector<std::optional<PeerInfo>> peers_;  // per rank: its record, once read
  int localPeers_ = 0;
  std::vector<char> linked_;                    // per peer: its link has been handed out
  std::map<int, std::unique_ptr<Pair>> pairs_;  // handshakes begun, by peer
  std::set<std::string> created_;               // segments not unlinked yet
  int outstanding_ = 0;                         // pairs of the current batch not done
  bool accepting_ = false;
};

}  // namespace hvd::transport
