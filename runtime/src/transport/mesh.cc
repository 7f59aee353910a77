#include "transport/mesh.h"

#include <unistd.h>

#include <algorithm>
#include <boost/asio.hpp>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>

#include "common/syscall_error.h"
#include "hvd/error.hpp"
#include "hvd_support/host.h"
#include "hvd_support/logging.h"
#include "transport/member_links.h"
#include "transport/mesh_links.h"

namespace hvd::transport {
namespace asio = boost::asio;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

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

namespace {

// The keys of one rendezvous (under the init cycle's prefix, core/runtime.cc).
constexpr const char* kArrived = "mesh/arrived";
constexpr const char* kAll = "mesh/all";
constexpr const char* kFullMesh = "mesh/full-mesh-ranks";
constexpr const char* kDisagreement = "mesh/full-mesh-disagreement";
// Beyond this many ranks a rendezvous that times out counts the missing records instead of
// naming them: naming them costs the store a scan of every key for every rank.
constexpr int kMaxNamedMissing = 4096;

// A store key per host: host keys hold '/' and '|', so the key holds their hash.
std::string hostCounterKey(const std::string& hostKey) {
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016zx", std::hash<std::string>{}(hostKey));
  return std::string("mesh/host/") + hex;
}

struct Claim {  // "<HVD_FULL_MESH_RANKS> <rank>" as the agreement keys hold it
  int value = 0;
  int rank = 0;
};

std::string encodeClaim(int value, int rank) {
  return std::to_string(value) + " " + std::to_string(rank);
}

Claim decodeClaim(const std::string& text) {
  Claim claim;
  std::istringstream in(text);
  if (!(in >> claim.value >> claim.rank)) {
    throw InvalidArgumentError("hvd init: a malformed HVD_FULL_MESH_RANKS claim '" + text +
                               "' in the job's store (mixed hvd versions?)");
  }
  return claim;
}

std::string disagreement(int value, int rank, const Claim& other) {
  return "hvd init: HVD_FULL_MESH_RANKS is " + std::to_string(value) + " on rank " +
         std::to_string(rank) + " but " + std::to_string(other.value) + " on rank " +
         std::to_string(other.rank) + "; set it alike on every rank";
}

}  // namespace

Mesh::Mesh(const MeshConfig& config, std::shared_ptr<MeshLinks> links)
    : config_(config), links_(std::move(links)) {}

Mesh::~Mesh() = default;

std::unique_ptr<Mesh> Mesh::join(store::Store& store, const MeshConfig& config,
                                 std::vector<std::string>* hostKeys) {
  const int rank = config.rank;
  const int size = config.size;
  const int fullMeshRanks = config.options.fullMeshRanks;
  const auto deadline = Clock::now() + config.setupTimeout;
  auto remaining = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
        std::max(Clock::duration::zero(), deadline - Clock::now()));
  };
  if (size == 1) {
    if (hostKeys != nullptr) *hostKeys = {config.hostKey};
    return std::unique_ptr<Mesh>(new Mesh(config, nullptr));
  }

  MeshLinksConfig linksConfig;
  linksConfig.rank = rank;
  linksConfig.size = size;
  linksConfig.allowShm = config.allowShm;
  linksConfig.shmRingBytes = config.shmRingBytes;
  linksConfig.shmPeerBudgetBytes = config.shmPeerBudgetBytes;
  linksConfig.processSets = config.processSets;
  auto links =
      MeshLinks::create(linksConfig, config.bindAddress, config.hostKey, config.hostName, store);

  // Arrival is counted, not scanned, and nothing here reads every rank's record: each rank
  // publishes its record, counts itself on its host's counter, claims its HVD_FULL_MESH_RANKS
  // (the first claim stands; a rank that differs says so) and adds one to the arrival counter.
  // The rank that brings that to `size` raises "mesh/all" with the disagreement, if any, so
  // that every rank fails alike. Six requests per rank, whatever the size.
  const std::string hostCounter = hostCounterKey(config.hostKey);
  store.set(peerKey(rank), encodePeer(links->self()));
  store.add(hostCounter, 1);
  const Claim first =
      decodeClaim(store.compareSet(kFullMesh, "", encodeClaim(fullMeshRanks, rank)));
  if (first.value != fullMeshRanks) {
    store.compareSet(kDisagreement, "", encodeClaim(fullMeshRanks, rank));
  }
  if (store.add(kArrived, 1) == size) {
    const std::string other = store.compareSet(kDisagreement, "", "");
    store.set(kAll, other.empty() ? "ok" : other);
  }
  std::string verdict;
  try {
    verdict = store.get(kAll, remaining());
  } catch (const TimeoutError&) {
    std::vector<std::string> keys;
    for (int p = 0; p < size; ++p) keys.push_back(peerKey(p));
    if (size > kMaxNamedMissing) {
      throw TimeoutError("hvd init: not every rank reached the rendezvous within " +
                         std::to_string(config.setupTimeout.count()) +
                         " ms: " + std::to_string(store.add(kArrived, 0)) + " of " +
                         std::to_string(size) + " ranks arrived");
    }
    // Only on failure: which records are missing, for the message, in one request.
    std::string missing;
    try {
      store.wait(keys, std::chrono::milliseconds(0));
    } catch (const TimeoutError& e) {
      missing = e.what();
    }
    const std::string marker = "waiting for keys: ";
    const auto at = missing.find(marker);
    throw TimeoutError("hvd init: not every rank reached the rendezvous: timed out after " +
                       std::to_string(config.setupTimeout.count()) + " ms waiting for keys: " +
                       (at == std::string::npos ? missing : missing.substr(at + marker.size())));
  }
  if (verdict != "ok") {
    const Claim other = decodeClaim(verdict);
    throw InvalidArgumentError(first.value != fullMeshRanks
                                   ? disagreement(fullMeshRanks, rank, first)
                                   : disagreement(fullMeshRanks, rank, other));
  }
  links->setLocalRanks(static_cast<int>(store.add(hostCounter, 0)));
  // The cross ranks from host keys (mpirun) need every record, whatever the size.
  if (hostKeys != nullptr) {
    std::vector<std::string> keys;
    for (int p = 0; p < size; ++p) keys.push_back(peerKey(p));
    const std::vector<std::string> records = store.getMany(keys, remaining());
    hostKeys->clear();
    for (int p = 0; p < size; ++p) {
      PeerInfo info = p == rank ? links->self() : decodePeer(records[p], p);
      hostKeys->push_back(info.hostKey);
      if (p != rank) links->learn(p, std::move(info));
    }
  }
  links->accept();
  return std::unique_ptr<Mesh>(new Mesh(config, std::move(links)));
}

namespace {

// The peers a context opens at once: every one in a full mesh, else its ring neighbours (the
// others open on first use, link_source.h).
std::vector<int> initialPeers(int rank, int size, bool full) {
  std::vector<int> initial;
  if (full) {
    for (int p = 0; p < size; ++p) {
      if (p != rank) initial.push_back(p);
    }
  } else {
    initial.push_back((rank + 1) % size);
    if ((rank + size - 1) % size != initial[0]) initial.push_back((rank + size - 1) % size);
  }
  return initial;
}

// Opens `source`'s initial links and wraps them in a context (keeping the source beyond a full
// mesh, whose other links open on first use).
std::unique_ptr<Context> openContext(int rank, int size, std::unique_ptr<LinkSource> source,
                                     const ContextOptions& options,
                                     std::chrono::milliseconds timeout, int channel) {
  std::vector<std::unique_ptr<Link>> links(size);
  const bool full = size <= options.fullMeshRanks;
  source->open(initialPeers(rank, size, full), links, timeout, "hvd init");
  std::unique_ptr<Context> context;
  if (full) {
    context = std::make_unique<Context>(rank, size, std::move(links), options);
  } else {
    context = std::make_unique<Context>(rank, size, std::move(links), options, std::move(source));
  }
  logging::get("transport")
      ->debug("channel {}: connected to {} of {} peers over {}", channel, context->openLinkCount(),
              size - 1, context->describeTransports());
  return context;
}

}  // namespace

std::unique_ptr<Context> Mesh::connect(int channel, const ContextOptions& options,
                                       std::chrono::milliseconds timeout) {
  const int rank = config_.rank;
  const int size = config_.size;
  if (size == 1) {
    return std::make_unique<Context>(rank, size, std::vector<std::unique_ptr<Link>>(1), options);
  }
  return openContext(rank, size, links_->channel(channel), options, timeout, channel);
}

std::unique_ptr<Context> Mesh::connectMembers(int channel, const std::vector<int>& members,
                                              const ContextOptions& options,
                                              std::chrono::milliseconds timeout) {
  const auto self = std::find(members.begin(), members.end(), config_.rank);
  if (self == members.end()) {
    throw InternalError("mesh: rank " + std::to_string(config_.rank) +
                        " connects a process set it is not a member of");
  }
  const int rank = static_cast<int>(self - members.begin());
  const int size = static_cast<int>(members.size());
  if (size == 1) {
    return std::make_unique<Context>(rank, size, std::vector<std::unique_ptr<Link>>(1), options);
  }
  auto source = std::make_unique<MemberLinks>(links_->channel(channel), members, config_.size);
  return openContext(rank, size, std::move(source), options, timeout, channel);
}

std::unique_ptr<Context> connectMesh(store::Store& store, const MeshConfig& config,
                                     std::vector<std::string>* hostKeys) {
  const auto started = Clock::now();
  auto mesh = Mesh::join(store, config, hostKeys);
  const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started);
  return mesh->connect(0, config.options,
                       std::max(std::chrono::milliseconds(0), config.setupTimeout - spent));
}

}  // namespace hvd::transport
