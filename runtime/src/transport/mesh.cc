#include "transport/mesh.h"

#include <unistd.h>

#include <boost/asio.hpp>
#include <fstream>
#include <sstream>

#include "common/host.h"
#include "common/logging.h"
#include "common/syscall_error.h"
#include "hvd/error.hpp"
#include "transport/mesh_links.h"

namespace hvd::transport {
namespace asio = boost::asio;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

std::string encodePeer(const PeerInfo& p) {
  std::ostringstream out;
  out << "v2\n"
      << p.address << "\n"
      << p.port << "\n"
      << p.hostKey << "\n"
      << p.hostName << "\n"
      << p.nonce << "\n"
      << p.fullMeshRanks << "\n";
  return out.str();
}

PeerInfo decodePeer(const std::string& text, int rank) {
  std::istringstream in(text);
  std::string version, port, nonce, fullMesh;
  PeerInfo p;
  if (!std::getline(in, version) || version != "v2" || !std::getline(in, p.address) ||
      !std::getline(in, port) || !std::getline(in, p.hostKey) || !std::getline(in, p.hostName) ||
      !std::getline(in, nonce) || !std::getline(in, fullMesh)) {
    throw InvalidArgumentError("hvd init: rank " + std::to_string(rank) +
                               " published a malformed mesh record (mixed hvd versions?)");
  }
  try {
    p.port = static_cast<uint16_t>(std::stoul(port));
    p.nonce = std::stoull(nonce);
    p.fullMeshRanks = std::stoi(fullMesh);
  } catch (const std::exception&) {
    throw InvalidArgumentError("hvd init: rank " + std::to_string(rank) +
                               " published a malformed mesh record");
  }
  return p;
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

  MeshLinksConfig linksConfig;
  linksConfig.rank = rank;
  linksConfig.size = size;
  linksConfig.allowShm = config.allowShm;
  linksConfig.shmRingBytes = config.shmRingBytes;
  linksConfig.shmPeerBudgetBytes = config.shmPeerBudgetBytes;
  linksConfig.fullMeshRanks = config.options.fullMeshRanks;
  auto mesh =
      std::make_unique<MeshLinks>(linksConfig, config.bindAddress, config.hostKey, config.hostName);
  const PeerInfo& self = mesh->self();
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
  // Every rank checks every record, so each of them fails here rather than some waiting.
  for (int p = 0; p < size; ++p) {
    if (peers[p].fullMeshRanks != self.fullMeshRanks) {
      throw InvalidArgumentError(
          "hvd init: HVD_FULL_MESH_RANKS is " + std::to_string(self.fullMeshRanks) + " on rank " +
          std::to_string(rank) + " but " + std::to_string(peers[p].fullMeshRanks) + " on rank " +
          std::to_string(p) + "; set it alike on every rank");
    }
  }
  if (hostKeys != nullptr) {
    hostKeys->clear();
    for (const PeerInfo& p : peers) hostKeys->push_back(p.hostKey);
  }
  mesh->setPeers(std::move(peers));

  // A full mesh opens every pair now; beyond it, only the ring neighbours (the others open on
  // first use, link_source.h).
  const bool full = size <= config.options.fullMeshRanks;
  std::vector<int> initial;
  if (full) {
    for (int p = 0; p < size; ++p) {
      if (p != rank) initial.push_back(p);
    }
  } else {
    initial.push_back((rank + 1) % size);
    if ((rank + size - 1) % size != initial[0]) initial.push_back((rank + size - 1) % size);
  }
  mesh->open(initial, links, remaining(), "hvd init");
  std::unique_ptr<Context> context;
  if (full) {
    mesh->closeListener();
    context = std::make_unique<Context>(rank, size, std::move(links), config.options);
  } else {
    context =
        std::make_unique<Context>(rank, size, std::move(links), config.options, std::move(mesh));
  }
  log->debug("connected to {} of {} peers over {}", context->openLinkCount(), size - 1,
             context->describeTransports());
  return context;
}

}  // namespace hvd::transport
