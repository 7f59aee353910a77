#include "transport/mesh_links.h"

#include <unistd.h>

#include <random>
#include <sstream>

#include "common/logging.h"
#include "hvd/error.hpp"
#include "transport/shm_segment.h"
#include "transport/shm_sizing.h"
#include "transport/tcp_link.h"

namespace hvd::transport {
namespace asio = boost::asio;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

constexpr uint32_t kHelloMagic = 0x68766431;  // "hvd1"

struct Hello {
  uint32_t magic;
  uint32_t rank;
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

// A connection accepted but not yet identified by its hello.
struct Incoming {
  tcp::socket socket;
  Hello hello{};
  explicit Incoming(asio::io_context& io) : socket(io) {}
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

// One pair's handshake. The higher rank connects (socket, hello out), the lower accepts
// (socket, hello in); `connected` once the hello has gone out or come in and passed its checks.
struct MeshLinks::Pair {
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

MeshLinks::MeshLinks(const MeshLinksConfig& config, const std::string& bindAddress,
                     const std::string& hostKey, const std::string& hostName,
                     store::Store& store)
    : acceptor_(io_), config_(config), store_(store), peers_(config.size), linked_(config.size) {
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(bindAddress, ec);
  if (ec) {
    throw InvalidArgumentError("hvd init: data-plane address '" + bindAddress +
                               "' is not an IP address");
  }
  const tcp::endpoint endpoint(address, 0);
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  // The kernel's largest backlog: beyond the full mesh, peers connect while this rank is busy
  // elsewhere and wait there until it accepts.
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw BackendError("hvd init: cannot listen on " + bindAddress + ": " + ec.message());
  self_.address = bindAddress;
  self_.port = acceptor_.local_endpoint().port();
  self_.hostKey = hostKey;
  self_.hostName = hostName;
  self_.nonce = std::random_device{}() * 0x100000001ull ^ std::random_device{}();
}

MeshLinks::~MeshLinks() {
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  for (const std::string& name : created_) unlinkShm(name);
}

void MeshLinks::setLocalRanks(int count) { localPeers_ = std::max(0, count - 1); }

void MeshLinks::learn(int rank, PeerInfo info) { peers_.at(rank) = std::move(info); }

void MeshLinks::fetchRecords(const std::vector<int>& peers, std::chrono::milliseconds timeout) {
  std::vector<int> unknown;
  std::vector<std::string> keys;
  for (int p : peers) {
    if (!peers_[p]) {
      unknown.push_back(p);
      keys.push_back(peerKey(p));
    }
  }
  if (keys.empty()) return;
  const std::vector<std::string> records = store_.getMany(keys, timeout);
  for (size_t i = 0; i < unknown.size(); ++i) {
    peers_[unknown[i]] = decodePeer(records[i], unknown[i]);
  }
}

bool MeshLinks::local(int peer) const {
  return config_.allowShm && peer != config_.rank && peers_[peer]->hostKey == self_.hostKey;
}

LinkKinds MeshLinks::kinds() const {
  LinkKinds kinds;
  kinds.shm = config_.allowShm && localPeers_ > 0;
  kinds.tcp = config_.size - 1 > (config_.allowShm ? localPeers_ : 0);
  return kinds;
}

MeshLinks::Pair& MeshLinks::pairFor(int peer) {
  auto& pair = pairs_[peer];
  if (!pair) pair = std::make_unique<Pair>(io_);
  return *pair;
}

void MeshLinks::closeListener() {
  boost::system::error_code ignored;
  acceptor_.close(ignored);
}

void MeshLinks::open(const std::vector<int>& peers, std::vector<std::unique_ptr<Link>>& links,
                     std::chrono::milliseconds timeout, const char* what) {
  const auto deadline = Clock::now() + timeout;
  outstanding_ = 0;
  for (int p : peers) {
    if (p < 0 || p >= config_.size || p == config_.rank || linked_[p]) {
      throw InternalError(std::string(what) + ": asked to open a link to rank " +
                          std::to_string(p));
    }
  }
  try {
    fetchRecords(peers, timeout);
  } catch (const TimeoutError& e) {
    throw TimeoutError(std::string(what) + ": could not read the records of rank(s) " +
                       rankList(peers) + " from the job's store: " + e.what());
  }
  for (int p : peers) {
    Pair& pair = pairFor(p);
    pair.wanted = true;
    ++outstanding_;
    if (p < config_.rank) {
      connectTo(p);
    } else if (pair.connected) {
      // It connected while this rank was busy: carry on where the handshake stopped.
      local(p) ? offerShm(p) : finish(p);
    }
  }
  if (!accepting_ &&
      std::any_of(peers.begin(), peers.end(), [&](int p) { return p > config_.rank; })) {
    acceptNext();
  }
  while (outstanding_ > 0) {
    const auto now = Clock::now();
    if (now >= deadline) {
      std::vector<int> missing;
      for (int p : peers) {
        if (!pairs_[p]->done) missing.push_back(p);
      }
      throw TimeoutError(std::string(what) + ": could not connect to rank(s) " + rankList(missing) +
                         " within " + std::to_string(timeout.count()) + " ms");
    }
    io_.restart();
    io_.run_one_for(deadline - now);
  }
  for (int p : peers) {
    auto found = pairs_.find(p);
    found->second->retry.cancel();
    links[p] = makeLink(p, *found->second);
    linked_[p] = 1;
    pairs_.erase(found);
  }
  auto log = logging::get("transport");
  if (log->should_log(spdlog::level::debug)) {
    log->debug("{}: opened links to rank(s) {}", what, rankList(peers));
  }
}

void MeshLinks::connectTo(int p) {
  Pair& pair = pairFor(p);
  pair.socket.emplace(io_);
  boost::system::error_code ec;
  const PeerInfo& info = *peers_[p];
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
    pair.hello = Hello{kHelloMagic, static_cast<uint32_t>(config_.rank), peers_[p]->nonce};
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

void MeshLinks::acceptNext() {
  accepting_ = true;
  auto incoming = std::make_shared<Incoming>(io_);
  acceptor_.async_accept(
      incoming->socket, [this, incoming](const boost::system::error_code& error) {
        if (error) {
          accepting_ = false;  // closed, or out of descriptors: the next batch tries again
          return;
        }
        acceptNext();
        asio::async_read(
            incoming->socket, asio::buffer(&incoming->hello, sizeof(Hello)),
            [this, incoming](const boost::system::error_code& rerr, size_t) {
              const Hello& h = incoming->hello;
              const int from = static_cast<int>(h.rank);
              const bool valid = !rerr && h.magic == kHelloMagic && h.nonce == self_.nonce &&
                                 from > config_.rank && from < config_.size && !linked_[from];
              if (!valid || pairFor(from).connected) {
                logging::get("transport")
                    ->warn("rejected a data-plane connection from {} (not a peer of this job)",
                           peerAddress(incoming->socket));
                return;
              }
              Pair& pair = pairFor(from);
              pair.socket.emplace(std::move(incoming->socket));
              pair.connected = true;
              if (pair.wanted) local(from) ? offerShm(from) : finish(from);
            });
      });
}

void MeshLinks::offerShm(int p) {
  Pair& pair = pairFor(p);
  const int rank = config_.rank;
  pair.name = "/hvd-" + std::to_string(::getpid()) + "-" + std::to_string(rank) + "-" +
              std::to_string(p) + "-" + std::to_string(self_.nonce % 1000000007ull);
  const ShmRingSize size = shmRingSize(rank, p, config_.size, localPeers_, config_.shmRingBytes,
                                       config_.shmPeerBudgetBytes);
  pair.ring = createShmRing(pair.name, size.capacity, size.populate);
  created_.insert(pair.name);
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
                       created_.erase(pair.name);
                       finish(p);
                     });
  });
}

void MeshLinks::receiveShmName(int p) {
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
                           const ShmRingSize size =
                               shmRingSize(config_.rank, p, config_.size, localPeers_,
                                           config_.shmRingBytes, config_.shmPeerBudgetBytes);
                           pair.ring = openShmRing(pair.name, size.populate);
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

void MeshLinks::finish(int p) {
  Pair& pair = pairFor(p);
  pair.done = true;
  --outstanding_;
}

std::unique_ptr<Link> MeshLinks::makeLink(int p, Pair& pair) {
  const int fd = pair.socket->release();
  if (pair.ring) {
    configureDataSocket(fd);
    return std::make_unique<ShmLink>(p, config_.rank < p ? 0 : 1, pair.ring, fd,
                                     peerName(p, *peers_[p], "shm"));
  }
  return std::make_unique<TcpLink>(p, fd, peerName(p, *peers_[p], "tcp"));
}

}  // namespace hvd::transport
