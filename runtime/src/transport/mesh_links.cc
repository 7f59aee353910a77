#include "transport/mesh_links.h"

#include <unistd.h>

#include <boost/asio.hpp>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "hvd/error.hpp"
#include "hvd_support/logging.h"
#include "transport/shm_link.h"
#include "transport/shm_segment.h"
#include "transport/shm_sizing.h"
#include "transport/tcp_link.h"

namespace hvd::transport {
namespace asio = boost::asio;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

constexpr uint32_t kHelloMagic = 0x68766432;  // "hvd2"

struct Hello {
  uint32_t magic;
  uint32_t rank;
  uint32_t channel;
  uint32_t reserved;
  uint64_t nonce;
};

std::string peerName(int rank, const PeerInfo& info, const char* kind) {
  return "rank " + std::to_string(rank) + " on " + info.hostName + " (" + kind + ", " +
         info.address + ":" + std::to_string(info.port) + ")";
}

std::string rankList(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size() && i < 16; ++i) {
    if (i) out += ", ";
    out += std::to_string(ranks[i]);
  }
  if (ranks.size() > 16) out += ", ...";
  return out;
}

std::string peerAddress(const tcp::socket& socket) {
  boost::system::error_code error;
  const auto endpoint = socket.remote_endpoint(error);
  return error ? std::string("an unknown address") : endpoint.address().to_string();
}

// A connected socket's descriptor on its way from the listener's thread to its channel's:
// closed unless the channel takes it (a channel that goes first drops its queued handlers).
struct HandedFd {
  int fd;
  explicit HandedFd(int f) : fd(f) {}
  HandedFd(const HandedFd&) = delete;
  HandedFd& operator=(const HandedFd&) = delete;
  ~HandedFd() {
    if (fd >= 0) ::close(fd);
  }
  int take() { return std::exchange(fd, -1); }
};

}  // namespace

std::string peerKey(int rank) { return "mesh/" + std::to_string(rank); }

std::string encodePeer(const PeerInfo& p) {
  std::ostringstream out;
  out << "v3\n"
      << p.address << "\n"
      << p.port << "\n"
      << p.hostKey << "\n"
      << p.hostName << "\n"
      << p.nonce << "\n";
  return out.str();
}

PeerInfo decodePeer(const std::string& text, int rank) {
  std::istringstream in(text);
  std::string version, port, nonce;
  PeerInfo p;
  if (!std::getline(in, version) || version != "v3" || !std::getline(in, p.address) ||
      !std::getline(in, port) || !std::getline(in, p.hostKey) || !std::getline(in, p.hostName) ||
      !std::getline(in, nonce)) {
    throw InvalidArgumentError("hvd init: rank " + std::to_string(rank) +
                               " published a malformed mesh record (mixed hvd versions?)");
  }
  try {
    p.port = static_cast<uint16_t>(std::stoul(port));
    p.nonce = std::stoull(nonce);
  } catch (const std::exception&) {
    throw InvalidArgumentError("hvd init: rank " + std::to_string(rank) +
                               " published a malformed mesh record");
  }
  return p;
}

// ---- the listener ---------------------------------------------------------------------------

// Accepts on a thread of its own and reads each connection's hello; a connection that passes
// goes to its channel (MeshLinks::deliver), any other is closed with a warning.
struct MeshLinks::Acceptor {
  struct Incoming {
    tcp::socket socket;
    Hello hello{};
    explicit Incoming(asio::io_context& io) : socket(io) {}
  };

  asio::io_context io;  // first: destroyed last, after the acceptor and every socket
  tcp::acceptor acceptor{io};
  std::thread thread;

  ~Acceptor() { stop(); }
  void stop() {
    io.stop();
    if (thread.joinable()) thread.join();
  }

  void acceptNext(MeshLinks& mesh) {
    auto incoming = std::make_shared<Incoming>(io);
    acceptor.async_accept(
        incoming->socket, [this, &mesh, incoming](const boost::system::error_code& error) {
          if (error == asio::error::operation_aborted || !acceptor.is_open()) return;
          if (error) {
            // Out of descriptors, say: try again shortly rather than stop accepting for good.
            logging::get("transport")->warn("data-plane listener: {}", error.message());
            auto retry = std::make_shared<asio::steady_timer>(io, std::chrono::milliseconds(50));
            retry->async_wait([this, &mesh, retry](const boost::system::error_code& e) {
              if (!e) acceptNext(mesh);
            });
            return;
          }
          acceptNext(mesh);
          asio::async_read(
              incoming->socket, asio::buffer(&incoming->hello, sizeof(Hello)),
              [&mesh, incoming](const boost::system::error_code& rerr, size_t) {
                const Hello& h = incoming->hello;
                const MeshLinksConfig& c = mesh.config_;
                const int from = static_cast<int>(h.rank);
                const bool valid = !rerr && h.magic == kHelloMagic && h.nonce == mesh.self_.nonce &&
                                   from > c.rank && from < c.size &&
                                   h.channel < uint32_t(c.processSets ? kMaxChannels : c.channels);
                if (!valid) {
                  logging::get("transport")
                      ->warn(
                          "rejected a data-plane connection from {} (not a peer of "
                          "this job)",
                          peerAddress(incoming->socket));
                  return;
                }
                mesh.deliver(static_cast<int>(h.channel), incoming->socket.release(), from);
              });
        });
  }
};

std::shared_ptr<MeshLinks> MeshLinks::create(const MeshLinksConfig& config,
                                             const std::string& bindAddress,
                                             const std::string& hostKey,
                                             const std::string& hostName, store::Store& store) {
  std::shared_ptr<MeshLinks> mesh(new MeshLinks(config, store));
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(bindAddress, ec);
  if (ec) {
    throw InvalidArgumentError("hvd init: data-plane address '" + bindAddress +
                               "' is not an IP address");
  }
  const tcp::endpoint endpoint(address, 0);
  tcp::acceptor& acceptor = mesh->acceptor_->acceptor;
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  // The kernel's largest backlog: beyond the full mesh, many peers may connect at once.
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw BackendError("hvd init: cannot listen on " + bindAddress + ": " + ec.message());
  mesh->self_.address = bindAddress;
  mesh->self_.port = acceptor.local_endpoint().port();
  mesh->self_.hostKey = hostKey;
  mesh->self_.hostName = hostName;
  mesh->self_.nonce = std::random_device{}() * 0x100000001ull ^ std::random_device{}();
  return mesh;
}

MeshLinks::MeshLinks(const MeshLinksConfig& config, store::Store& store)
    : config_(config),
      store_(store),
      acceptor_(std::make_unique<Acceptor>()),
      peers_(config.size) {}

MeshLinks::~MeshLinks() {
  acceptor_->stop();  // joins the listener's thread: nothing is delivered after this
  for (auto& queue : waiting_) {
    for (const Waiting& w : queue.second) ::close(w.fd);
  }
}

void MeshLinks::setLocalRanks(int count) { localPeers_ = std::max(0, count - 1); }

void MeshLinks::learn(int rank, PeerInfo info) {
  std::lock_guard<std::mutex> lock(recordsMutex_);
  peers_.at(rank) = std::move(info);
}

void MeshLinks::accept() {
  if (acceptor_->thread.joinable()) return;
  Acceptor* acceptor = acceptor_.get();
  acceptor->acceptNext(*this);
  acceptor->thread = std::thread([acceptor] {
    try {
      acceptor->io.run();
    } catch (const std::exception& e) {
      logging::get("transport")->error("data-plane listener stopped: {}", e.what());
    }
  });
}

std::vector<PeerInfo> MeshLinks::records(const std::vector<int>& peers,
                                         std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(recordsMutex_);
  std::vector<int> unknown;
  std::vector<std::string> keys;
  for (int p : peers) {
    if (!peers_[p]) {
      unknown.push_back(p);
      keys.push_back(peerKey(p));
    }
  }
  if (!keys.empty()) {
    const std::vector<std::string> texts = store_.getMany(keys, timeout);
    for (size_t i = 0; i < unknown.size(); ++i) {
      peers_[unknown[i]] = decodePeer(texts[i], unknown[i]);
    }
  }
  std::vector<PeerInfo> out;
  out.reserve(peers.size());
  for (int p : peers) out.push_back(*peers_[p]);
  return out;
}

std::unique_ptr<MeshChannel> MeshLinks::channel(int id) {
  if (id < 0 || id >= (config_.processSets ? kMaxChannels : config_.channels)) {
    throw InternalError("mesh: there is no channel " + std::to_string(id));
  }
  std::unique_ptr<MeshChannel> channel(new MeshChannel(shared_from_this(), id));
  attach(id, channel.get());
  return channel;
}

void MeshLinks::attach(int id, MeshChannel* channel) {
  std::lock_guard<std::mutex> lock(channelsMutex_);
  if (!created_.insert(id).second) {
    throw InternalError("mesh: channel " + std::to_string(id) + " asked for twice");
  }
  channels_[id] = channel;
  auto waiting = waiting_.find(id);
  if (waiting != waiting_.end()) {
    for (const Waiting& w : waiting->second) channel->incoming(w.fd, w.from);
    waiting_.erase(waiting);
  }
}

void MeshLinks::detach(int id) {
  std::lock_guard<std::mutex> lock(channelsMutex_);
  channels_.erase(id);
}

void MeshLinks::deliver(int channel, int fd, int from) {
  std::lock_guard<std::mutex> lock(channelsMutex_);
  auto attached = channels_.find(channel);
  if (attached != channels_.end()) {
    attached->second->incoming(fd, from);
  } else if (created_.count(channel) > 0) {
    ::close(fd);  // that channel's context is gone: nobody will use the link
  } else {
    waiting_[channel].push_back(Waiting{fd, from});
  }
}

void MeshLinks::channelComplete(int id) {
  std::lock_guard<std::mutex> lock(channelsMutex_);
  complete_.insert(id);
  // A process set's channel may be created at any time: the listener stays.
  if (config_.processSets) return;
  for (int fixed = 0; fixed < config_.channels; ++fixed) {
    if (complete_.count(fixed) == 0) return;
  }
  // Every channel has every link: no peer will connect again.
  Acceptor* acceptor = acceptor_.get();
  asio::post(acceptor->io, [acceptor] {
    boost::system::error_code ignored;
    acceptor->acceptor.close(ignored);
  });
}

// ---- one channel ----------------------------------------------------------------------------

// One pair's handshake. The higher rank connects (socket, hello out), the lower accepts
// (socket handed over by the listener); `connected` once the hello has gone out or come in.
struct MeshChannel::Pair {
  explicit Pair(asio::io_context& io) : retry(io) {}
  std::optional<tcp::socket> socket;
  asio::steady_timer retry;
  Hello hello{};
  uint32_t nameLength = 0;
  std::string name;
  char ack = 'k';
  std::shared_ptr<RingMemory> ring;
  bool connected = false;
  bool wanted = false;  // in the batch being opened
  bool done = false;
};

// Everything the channel's thread touches; handlers run only inside open(), on that thread.
struct MeshChannel::State {
  State(const MeshLinksConfig& c, const PeerInfo& s, int localPeers, int channel)
      : config(c),
        self(s),
        localPeers(localPeers),
        channel(channel),
        peers(c.size),
        linked(c.size, 0) {}
  ~State() {
    pairs.clear();  // sockets before the io_context
    for (const std::string& name : created) unlinkShm(name);
  }

  asio::io_context io;  // first: destroyed last
  const MeshLinksConfig config;
  const PeerInfo self;
  const int localPeers;
  const int channel;
  std::vector<std::optional<PeerInfo>> peers;  // the records this channel has used
  std::vector<char> linked;                    // per peer: its link has been handed out
  int linkedCount = 0;
  std::map<int, std::unique_ptr<Pair>> pairs;  // handshakes begun, by peer
  std::set<std::string> created;               // segments not unlinked yet
  int outstanding = 0;                         // pairs of the current batch not done

  bool local(int peer) const {
    return config.allowShm && peer != config.rank && peers[peer]->hostKey == self.hostKey;
  }
  Pair& pairFor(int peer) {
    auto& pair = pairs[peer];
    if (!pair) pair = std::make_unique<Pair>(io);
    return *pair;
  }
  ShmRingSize ringSize(int peer) const {
    return shmRingSize(config.rank, peer, config.size, localPeers, config.shmRingBytes,
                       config.shmPeerBudgetBytes);
  }
  void take(int fd, int from);
  void connectTo(int peer);
  void offerShm(int peer);
  void receiveShmName(int peer);
  void finish(int peer) {
    pairFor(peer).done = true;
    --outstanding;
  }
  std::unique_ptr<Link> makeLink(int peer, Pair& pair);
};

MeshChannel::MeshChannel(std::shared_ptr<MeshLinks> mesh, int id)
    : mesh_(std::move(mesh)),
      id_(id),
      state_(std::make_unique<State>(mesh_->config(), mesh_->self(), mesh_->localPeers(), id)) {}

MeshChannel::~MeshChannel() {
  mesh_->detach(id_);  // no connection is handed to this channel from here on
  state_.reset();
}

LinkKinds MeshChannel::kinds() const {
  const MeshLinksConfig& c = mesh_->config();
  LinkKinds kinds;
  kinds.shm = c.allowShm && mesh_->localPeers() > 0;
  kinds.tcp = c.size - 1 > (c.allowShm ? mesh_->localPeers() : 0);
  return kinds;
}

void MeshChannel::incoming(int fd, int from) {
  auto handed = std::make_shared<HandedFd>(fd);
  State* state = state_.get();
  asio::post(state->io, [state, handed, from] { state->take(handed->take(), from); });
}

void MeshChannel::State::take(int fd, int from) {
  tcp::socket socket(io);
  boost::system::error_code ec;
  socket.assign(asio::ip::make_address(self.address).is_v6() ? tcp::v6() : tcp::v4(), fd, ec);
  if (ec) {
    ::close(fd);
    return;
  }
  if (linked[from] || pairFor(from).connected) {
    logging::get("transport")
        ->warn("rejected a second data-plane connection from rank {} on channel {}", from, channel);
    return;
  }
  Pair& pair = pairFor(from);
  pair.socket.emplace(std::move(socket));
  pair.connected = true;
  if (pair.wanted) local(from) ? offerShm(from) : finish(from);
}

void MeshChannel::open(const std::vector<int>& peers, std::vector<std::unique_ptr<Link>>& links,
                       std::chrono::milliseconds timeout, const char* what) {
  State& s = *state_;
  const auto deadline = Clock::now() + timeout;
  for (int p : peers) {
    if (p < 0 || p >= s.config.size || p == s.config.rank || s.linked[p]) {
      throw InternalError(std::string(what) + ": asked to open a link to rank " +
                          std::to_string(p));
    }
  }
  try {
    const std::vector<PeerInfo> records = mesh_->records(peers, timeout);
    for (size_t i = 0; i < peers.size(); ++i) s.peers[peers[i]] = records[i];
  } catch (const TimeoutError& e) {
    throw TimeoutError(std::string(what) + ": could not read the records of rank(s) " +
                       rankList(peers) + " from the job's store: " + e.what());
  }
  s.outstanding = 0;
  for (int p : peers) {
    Pair& pair = s.pairFor(p);
    pair.wanted = true;
    ++s.outstanding;
    if (p < s.config.rank) {
      s.connectTo(p);
    } else if (pair.connected) {
      // It connected while this rank was busy: carry on where the handshake stopped.
      s.local(p) ? s.offerShm(p) : s.finish(p);
    }
  }
  // Connections reach this channel as handlers the listener posts: without this guard an
  // io_context with nothing else pending would return at once instead of waiting for them.
  const auto guard = asio::make_work_guard(s.io);
  while (s.outstanding > 0) {
    const auto now = Clock::now();
    if (now >= deadline) {
      std::vector<int> missing;
      for (int p : peers) {
        if (!s.pairs[p]->done) missing.push_back(p);
      }
      throw TimeoutError(std::string(what) + ": could not connect to rank(s) " + rankList(missing) +
                         " within " + std::to_string(timeout.count()) + " ms");
    }
    s.io.restart();
    s.io.run_one_for(deadline - now);
  }
  for (int p : peers) {
    auto found = s.pairs.find(p);
    found->second->retry.cancel();
    links[p] = s.makeLink(p, *found->second);
    s.linked[p] = 1;
    ++s.linkedCount;
    s.pairs.erase(found);
  }
  auto log = logging::get("transport");
  if (log->should_log(spdlog::level::debug)) {
    log->debug("{}: opened links to rank(s) {} on channel {}", what, rankList(peers), id_);
  }
  if (s.linkedCount == s.config.size - 1) mesh_->channelComplete(id_);
}

void MeshChannel::State::connectTo(int p) {
  Pair& pair = pairFor(p);
  pair.socket.emplace(io);
  boost::system::error_code ec;
  const PeerInfo& info = *peers[p];
  const tcp::endpoint endpoint(asio::ip::make_address(info.address, ec), info.port);
  if (ec) {
    throw InvalidArgumentError("hvd init: rank " + std::to_string(p) +
                               " advertised a bad address '" + info.address + "'");
  }
  pair.socket->async_connect(endpoint, [this, p](const boost::system::error_code& error) {
    Pair& pair = pairFor(p);
    if (error) {
      // The peer may publish before it accepts: retry until the deadline.
      pair.retry.expires_after(std::chrono::milliseconds(20));
      pair.retry.async_wait([this, p](const boost::system::error_code& e) {
        if (!e) connectTo(p);
      });
      return;
    }
    pair.hello = Hello{kHelloMagic, static_cast<uint32_t>(config.rank),
                       static_cast<uint32_t>(channel), 0, peers[p]->nonce};
    asio::async_write(*pair.socket, asio::buffer(&pair.hello, sizeof(Hello)),
                      [this, p](const boost::system::error_code& werr, size_t) {
                        if (werr) {
                          connectTo(p);
                          return;
                        }
                        pairFor(p).connected = true;
                        local(p) ? receiveShmName(p) : finish(p);
                      });
  });
}

void MeshChannel::State::offerShm(int p) {
  Pair& pair = pairFor(p);
  pair.name = "/hvd-" + std::to_string(::getpid()) + "-" + std::to_string(config.rank) + "-" +
              std::to_string(p) + "-c" + std::to_string(channel) + "-" +
              std::to_string(self.nonce % 1000000007ull);
  const ShmRingSize size = ringSize(p);
  pair.ring = createShmRing(pair.name, size.capacity, size.populate);
  created.insert(pair.name);
  pair.nameLength = static_cast<uint32_t>(pair.name.size());
  std::vector<asio::const_buffer> frame{asio::buffer(&pair.nameLength, 4), asio::buffer(pair.name)};
  asio::async_write(*pair.socket, frame, [this, p](const boost::system::error_code& error, size_t) {
    if (error) {
      throw PeerError("hvd: shared-memory setup with rank " + std::to_string(p) +
                      " failed: " + error.message());
    }
    Pair& pair = pairFor(p);
    asio::async_read(*pair.socket, asio::buffer(&pair.ack, 1),
                     [this, p](const boost::system::error_code& rerr, size_t) {
                       if (rerr) {
                         throw PeerError("hvd: shared-memory setup with rank " + std::to_string(p) +
                                         " failed: " + rerr.message());
                       }
                       // The peer has mapped it: the name can go (nothing is left behind
                       // in /dev/shm if either of us crashes from here on).
                       Pair& pair = pairFor(p);
                       unlinkShm(pair.name);
                       created.erase(pair.name);
                       finish(p);
                     });
  });
}

void MeshChannel::State::receiveShmName(int p) {
  Pair& pair = pairFor(p);
  asio::async_read(
      *pair.socket, asio::buffer(&pair.nameLength, 4),
      [this, p](const boost::system::error_code& error, size_t) {
        Pair& pair = pairFor(p);
        if (error || pair.nameLength == 0 || pair.nameLength > 255) {
          throw PeerError("hvd: shared-memory setup with rank " + std::to_string(p) +
                          " failed: " + (error ? error.message() : std::string("bad name")));
        }
        pair.name.resize(pair.nameLength);
        asio::async_read(*pair.socket, asio::buffer(pair.name),
                         [this, p](const boost::system::error_code& e2, size_t) {
                           if (e2) {
                             throw PeerError("hvd: shared-memory setup with rank " +
                                             std::to_string(p) + " failed: " + e2.message());
                           }
                           Pair& pair = pairFor(p);
                           pair.ring = openShmRing(pair.name, ringSize(p).populate);
                           asio::async_write(
                               *pair.socket, asio::buffer(&pair.ack, 1),
                               [this, p](const boost::system::error_code& werr, size_t) {
                                 if (werr) {
                                   throw PeerError("hvd: shared-memory setup with rank " +
                                                   std::to_string(p) +
                                                   " failed: " + werr.message());
                                 }
                                 finish(p);
                               });
                         });
      });
}

std::unique_ptr<Link> MeshChannel::State::makeLink(int p, Pair& pair) {
  const int fd = pair.socket->release();
  if (pair.ring) {
    configureDataSocket(fd);
    return std::make_unique<ShmLink>(p, config.rank < p ? 0 : 1, pair.ring, fd,
                                     peerName(p, *peers[p], "shm"));
  }
  return std::make_unique<TcpLink>(p, fd, peerName(p, *peers[p], "tcp"));
}

}  // namespace hvd::transport
