// The links of one rank's mesh, opened pair by pair: the higher rank of a pair connects to the
// lower one's listener and sends a hello (its rank, the channel, and the nonce of the lower
// rank's record, which proves it read the job's store); a pair on the same host then sets up a
// shared-memory ring pair over that socket (the lower rank creates the segment and sends its
// name, the higher maps it and acknowledges, the lower unlinks it) and keeps the socket for
// wake-ups and liveness; any other pair uses the socket as a TcpLink.
//
// One rank has one listener and one record, and its links come in channels: channel 0 for the
// runtime's collectives, channel 1 for the engine's. Each channel's links are its own sockets
// (the two are used by different threads at once, so one stream cannot serve both without
// serialising them), opened on that channel's thread; the listener runs on a thread of its
// own, reads each connection's hello and hands the connection to its channel, so a peer never
// waits on a rank that is busy elsewhere.
//
// Each pair's handshake runs on its own, asynchronously, so a batch of links completes as soon
// as each of its peers takes part, whatever the others do; connections from peers outside the
// batch are kept for a later batch (link_source.h says why that cannot deadlock). A peer's
// record is read from the job's store when a link to it is first opened (the records of a
// batch in one request), so a rank reads only the records of the peers it talks to.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "store/store.h"
#include "transport/link_source.h"

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

// Channel ids a peer may name in its hello (process sets included).
constexpr int kMaxChannels = 1 << 20;

struct MeshLinksConfig {
  int rank = 0;
  int size = 1;
  // Channels 0..channels-1 are the runtime's and the engine's. With processSets, channels from
  // `channels` up are those of process sets (their ids are agreed by every rank): the listener
  // then stays open for the whole job, as a set may be added at any time.
  int channels = 2;
  bool processSets = false;
  bool allowShm = true;
  size_t shmRingBytes = 1 << 20;
  size_t shmPeerBudgetBytes = 16 << 20;
};

class MeshChannel;

class MeshLinks : public std::enable_shared_from_this<MeshLinks> {
 public:
  // Listens on `bindAddress` (any port) at once; self() is this rank's record to publish.
  // Records not given to learn() are read from `store` (not owned; it outlives this object and
  // every channel).
  static std::shared_ptr<MeshLinks> create(const MeshLinksConfig& config,
                                           const std::string& bindAddress,
                                           const std::string& hostKey, const std::string& hostName,
                                           store::Store& store);
  ~MeshLinks();

  const PeerInfo& self() const { return self_; }
  const MeshLinksConfig& config() const { return config_; }
  // How many ranks of the job share this rank's host (itself included); before accept().
  void setLocalRanks(int count);
  int localPeers() const { return localPeers_; }
  // A record already read from the store, so that no channel need read it.
  void learn(int rank, PeerInfo info);
  // Starts handing accepted connections to their channels (after setLocalRanks).
  void accept();

  // Channel `id` (< config().channels, or any id below kMaxChannels with processSets), at most
  // once per id; it keeps this object alive.
  std::unique_ptr<MeshChannel> channel(int id);

 private:
  friend class MeshChannel;
  struct Acceptor;
  MeshLinks(const MeshLinksConfig& config, store::Store& store);

  // The records of `peers` (read from the store where not known yet).
  std::vector<PeerInfo> records(const std::vector<int>& peers, std::chrono::milliseconds timeout);
  // A channel says it exists (so its connections reach it) and goes; its pending connections
  // are handed over on attach.
  void attach(int id, MeshChannel* channel);
  void detach(int id);
  // Channel `id` has linked every peer: once every channel has, the listener closes.
  void channelComplete(int id);
  // From the listener's thread: a connection whose hello passed the checks.
  void deliver(int channel, int fd, int from);

  MeshLinksConfig config_;
  store::Store& store_;
  PeerInfo self_;
  int localPeers_ = 0;
  std::unique_ptr<Acceptor> acceptor_;

  std::mutex recordsMutex_;
  std::vector<std::optional<PeerInfo>> peers_;  // per rank: its record, once read

  std::mutex channelsMutex_;
  struct Waiting {
    int fd;
    int from;
  };
  std::map<int, MeshChannel*> channels_;         // by id: attached, or null
  std::map<int, std::vector<Waiting>> waiting_;  // by id: connections before it attached
  std::set<int> created_;                        // ids channel() was called for
  std::set<int> complete_;                       // ids that linked every peer once
};

// The links of one channel, for one context: a LinkSource used from one thread at a time.
class MeshChannel final : public LinkSource {
 public:
  ~MeshChannel() override;
  LinkKinds kinds() const override;
  void open(const std::vector<int>& peers, std::vector<std::unique_ptr<Link>>& links,
            std::chrono::milliseconds timeout, const char* what) override;

 private:
  friend class MeshLinks;
  struct Pair;
  struct State;
  MeshChannel(std::shared_ptr<MeshLinks> mesh, int id);
  // From the listener's thread (under MeshLinks::channelsMutex_).
  void incoming(int fd, int from);

  std::shared_ptr<MeshLinks> mesh_;
  int id_;
  std::unique_ptr<State> state_;
};

}  // namespace hvd::transport
