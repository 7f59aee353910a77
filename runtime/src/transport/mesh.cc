#include "transport/mesh.h"

#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <sstream>

#include "common/host.h"
#include "common/logging.h"
#include "common/syscall_error.h"
#include "hvd/error.hpp"
#include "transport/shm_link.h"
#include "transport/shm_segment.h"
#include "transport/shm_sizing.h"
#include "transport/tcp_link.h"

namespace hvd::transport {
namespace asio = boost::asio;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

constexpr uint32_t kHelloMagic = 0x68766431;  // "hvd1"

// What every rank publishes under "mesh/<rank>".
struct PeerInfo {
  std::string address;
  uint16_t port = 0;
  std::string hostKey;
  std::string hostName;
  uint64_t nonce = 0;  // proves a connecting peer read this rank's record from the job's store
};

std::string encodePeer(const PeerInfo& p) {
  std::ostringstream out;
  out << "v1\n"
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
  if (!std::getline(in, version) || version != "v1" || !std::getline(in, p.address) ||
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

// Drives the io_context until `done()` or the deadline; returns done().
template <typename Done>
bool runUntil(asio::io_context& io, Clock::time_point deadline, Done done) {
  while (!done()) {
    const auto now = Clock::now();
    if (now >= deadline) return false;
    io.restart();
    io.run_one_for(deadline - now);
  }
  return true;
}

std::string peerAddress(const tcp::socket& socket) {
  boost::system::error_code error;
  const auto endpoint = socket.remote_endpoint(error);
  return error ? std::string("an unknown address") : endpoint.address().to_string();
}

std::string readFirstLine(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

std::string localHostKey() {
  char netns[128] = {0};
  const ssize_t n = ::readlink("/proc/self/ns/net", netns, sizeof(netns) - 1);
  if (n > 0) netns[n] = '\0';
  return localHostName() + "|" + readFirstLine("/proc/sys/kernel/random/boot_id") + "|" + netns;
}

std::string localAddressToward(const std::string& host) {
  try {
    asio::io_context io;
    tcp::resolver resolver(io);
    auto results = resolver.resolve(host, "9");
    for (const auto& entry : results) {
      const auto address = entry.endpoint().address();
      if (address.is_loopback()) return address.is_v6() ? "::1" : "127.0.0.1";
      asio::ip::udp::socket probe(io);
      boost::system::error_code ec;
      probe.open(address.is_v6() ? asio::ip::udp::v6() : asio::ip::udp::v4(), ec);
      if (ec) continue;
      probe.connect(asio::ip::udp::endpoint(address, 9), ec);  // sends nothing: routing only
      if (ec) continue;
      return probe.local_endpoint().address().to_string();
    }
  } catch (const std::exception&) {
  }
  return "127.0.0.1";
}

std::unique_ptr<Context> connectMesh(store::Store& store, const MeshConfig& config,
                                     std::vector<std::string>* hostKeys) {
  auto log = logging::get("transport");
  const int rank = config.rank;
  const int size = config.size;
  const auto deadline = Clock::now() + config.setupTimeout;
  auto remaining = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
        std::max(Clock::duration::zero(), deadline - Clock::now()));
  };

  std::vector<std::unique_ptr<Link>> links(size);
  if (size == 1) return std::make_unique<Context>(rank, size, std::move(links), config.options);

  asio::io_context io;
  tcp::acceptor acceptor(io);
  PeerInfo self;
  {
    boost::system::error_code ec;
    const auto address = asio::ip::make_address(config.bindAddress, ec);
    if (ec) {
      throw InvalidArgumentError("hvd init: data-plane address '" + config.bindAddress +
                                 "' is not an IP address");
    }
    const tcp::endpoint endpoint(address, 0);
    acceptor.open(endpoint.protocol(), ec);
    if (!ec) acceptor.bind(endpoint, ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      throw BackendError("hvd init: cannot listen on " + config.bindAddress + ": " + ec.message());
    }
    self.address = config.bindAddress;
    self.port = acceptor.local_endpoint().port();
    self.hostKey = config.hostKey;
    self.hostName = config.hostName;
    self.nonce = std::random_device{}() * 0x100000001ull ^ std::random_device{}();
  }
  // Arrival is counted, not scanned: each rank publishes its record and adds one to a counter,
  // the rank that brings it to `size` raises "mesh/all", and every rank waits on that one key
  // and then fetches the records in one request. Four requests per rank, whatever the size.
  store.set("mesh/" + std::to_string(rank), encodePeer(self));
  if (store.add("mesh/arrived", 1) == size) store.set("mesh/all", "1");
  std::vector<std::string> keys;
  for (int p = 0; p < size; ++p) keys.push_back("mesh/" + std::to_string(p));
  try {
    store.wait({"mesh/all"}, remaining());
  } catch (const TimeoutError&) {
    // Only on failure: which records are missing, for the message (one check each).
    std::vector<std::string> missing;
    for (const auto& key : keys) {
      if (!store.check({key})) missing.push_back(key);
    }
    throw TimeoutError("hvd init: not every rank reached the rendezvous: " +
                       store::timeoutMessage(keys, missing, config.setupTimeout));
  }
  std::vector<PeerInfo> peers(size);
  {
    const std::vector<std::string> records = store.getMany(keys, remaining());
    for (int p = 0; p < size; ++p) peers[p] = decodePeer(records[p], p);
  }
  if (hostKeys != nullptr) {
    hostKeys->clear();
    for (const PeerInfo& p : peers) hostKeys->push_back(p.hostKey);
  }

  // --- one TCP connection per pair: connect to lower ranks, accept higher ones -------------
  std::vector<std::optional<tcp::socket>> sockets(size);
  int pending = size - 1;
  std::vector<char> connected(size, 0);
  std::vector<Hello> outHello(size);
  // Connect side: retry until the deadline (a peer may publish before it accepts).
  std::vector<std::unique_ptr<asio::steady_timer>> retryTimers(size);
  std::function<void(int)> connectTo = [&](int p) {
    sockets[p].emplace(io);
    boost::system::error_code ec;
    const tcp::endpoint endpoint(asio::ip::make_address(peers[p].address, ec), peers[p].port);
    if (ec) {
      throw InvalidArgumentError("hvd init: rank " + std::to_string(p) +
                                 " advertised a bad address '" + peers[p].address + "'");
    }
    sockets[p]->async_connect(endpoint, [&, p](const boost::system::error_code& error) {
      if (error) {
        retryTimers[p] = std::make_unique<asio::steady_timer>(io, std::chrono::milliseconds(20));
        retryTimers[p]->async_wait([&, p](const boost::system::error_code&) { connectTo(p); });
        return;
      }
      outHello[p] = Hello{kHelloMagic, static_cast<uint32_t>(rank), peers[p].nonce};
      asio::async_write(*sockets[p], asio::buffer(&outHello[p], sizeof(Hello)),
                        [&, p](const boost::system::error_code& werr, size_t) {
                          if (werr) {
                            connectTo(p);
                          } else {
                            connected[p] = 1;
                            --pending;
                          }
                        });
    });
  };
  for (int p = 0; p < rank; ++p) connectTo(p);

  // Accept side: read each newcomer's hello and check it names a higher rank of this job.
  struct Incoming {
    tcp::socket socket;
    Hello hello{};
    explicit Incoming(asio::io_context& io) : socket(io) {}
  };
  std::function<void()> acceptNext = [&] {
    auto incoming = std::make_shared<Incoming>(io);
    acceptor.async_accept(incoming->socket, [&, incoming](const boost::system::error_code& error) {
      if (error) return;
      acceptNext();
      asio::async_read(incoming->socket, asio::buffer(&incoming->hello, sizeof(Hello)),
                       [&, incoming](const boost::system::error_code& rerr, size_t) {
                         const Hello& h = incoming->hello;
                         const int from = static_cast<int>(h.rank);
                         if (rerr || h.magic != kHelloMagic || h.nonce != self.nonce ||
                             from <= rank || from >= size || sockets[from]) {
                           log->warn(
                               "rejected a data-plane connection from {} (not a peer of "
                               "this job)",
                               peerAddress(incoming->socket));
                           return;
                         }
                         sockets[from].emplace(std::move(incoming->socket));
                         connected[from] = 1;
                         --pending;
                       });
    });
  };
  if (rank < size - 1) acceptNext();

  if (!runUntil(io, deadline, [&] { return pending == 0; })) {
    std::vector<int> missing;
    for (int p = 0; p < size; ++p) {
      if (p != rank && !connected[p]) missing.push_back(p);
    }
    throw TimeoutError("hvd init: could not connect to rank(s) " + rankList(missing) + " within " +
                       std::to_string(config.setupTimeout.count()) + " ms");
  }
  acceptor.close();
  for (auto& timer : retryTimers) {
    if (timer) timer->cancel();
  }

  // --- shared memory between ranks on the same host --------------------------------------------
  std::vector<std::shared_ptr<RingMemory>> rings(size);
  std::vector<std::string> created;
  auto unlinkCreated = [&] {
    for (auto& name : created) unlinkShm(name);
    created.clear();
  };
  auto local = [&](int p) {
    return config.allowShm && p != rank && peers[p].hostKey == config.hostKey;
  };
  int localPeers = 0;
  for (int p = 0; p < size; ++p) localPeers += local(p) ? 1 : 0;
  auto ringSize = [&](int p) {
    return shmRingSize(rank, p, size, localPeers, config.shmRingBytes, config.shmPeerBudgetBytes);
  };
  try {
    // Phase 1: the lower rank of each local pair creates the segment and sends its name.
    for (int p = rank + 1; p < size; ++p) {
      if (!local(p)) continue;
      const std::string name = "/hvd-" + std::to_string(::getpid()) + "-" + std::to_string(rank) +
                               "-" + std::to_string(p) + "-" +
                               std::to_string(self.nonce % 1000000007ull);
      const ShmRingSize ring = ringSize(p);
      rings[p] = createShmRing(name, ring.capacity, ring.populate);
      created.push_back(name);
      const uint32_t length = static_cast<uint32_t>(name.size());
      std::vector<asio::const_buffer> frame{asio::buffer(&length, 4), asio::buffer(name)};
      asio::write(*sockets[p], frame);
    }
    // Phase 2: the higher rank maps it and acknowledges.
    std::vector<uint32_t> lengths(size);
    std::vector<std::string> names(size);
    int reads = 0;
    for (int p = 0; p < rank; ++p) {
      if (!local(p)) continue;
      ++reads;
      asio::async_read(*sockets[p], asio::buffer(&lengths[p], 4),
                       [&, p](const boost::system::error_code& error, size_t) {
                         if (error || lengths[p] == 0 || lengths[p] > 255) return;
                         names[p].resize(lengths[p]);
                         asio::async_read(*sockets[p], asio::buffer(names[p]),
                                          [&](const boost::system::error_code& e2, size_t) {
                                            if (!e2) --reads;
                                          });
                       });
    }
    if (!runUntil(io, deadline, [&] { return reads == 0; })) {
      throw TimeoutError("hvd init: shared-memory setup with same-host peers timed out");
    }
    for (int p = 0; p < rank; ++p) {
      if (!local(p)) continue;
      rings[p] = openShmRing(names[p], ringSize(p).populate);
      const char ack = 'k';
      asio::write(*sockets[p], asio::buffer(&ack, 1));
    }
    // Phase 3: the creator unlinks once the peer has mapped the segment.
    std::vector<char> acks(size);
    int ackReads = 0;
    for (int p = rank + 1; p < size; ++p) {
      if (!local(p)) continue;
      ++ackReads;
      asio::async_read(*sockets[p], asio::buffer(&acks[p], 1),
                       [&](const boost::system::error_code& error, size_t) {
                         if (!error) --ackReads;
                       });
    }
    if (!runUntil(io, deadline, [&] { return ackReads == 0; })) {
      throw TimeoutError("hvd init: shared-memory setup with same-host peers timed out");
    }
    unlinkCreated();
  } catch (const boost::system::system_error& e) {
    unlinkCreated();
    throw PeerError("hvd init: shared-memory setup failed: " + std::string(e.what()));
  } catch (...) {
    unlinkCreated();
    throw;
  }

  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    const int fd = sockets[p]->release();
    if (rings[p]) {
      configureDataSocket(fd);
      links[p] = std::make_unique<ShmLink>(p, rank < p ? 0 : 1, rings[p], fd,
                                           peerName(p, peers[p], "shm"));
    } else {
      links[p] = std::make_unique<TcpLink>(p, fd, peerName(p, peers[p], "tcp"));
    }
  }
  auto context = std::make_unique<Context>(rank, size, std::move(links), config.options);
  log->debug("connected to {} peers over {}", size - 1, context->describeTransports());
  return context;
}

}  // namespace hvd::transport
