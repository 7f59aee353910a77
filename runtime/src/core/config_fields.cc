#include "core/config_fields.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <sstream>

#include "contract/worker_variables.h"
#include "core/process_sets.h"
#include "hvd/error.hpp"

namespace hvd::core {
namespace {

namespace worker = contract::worker;
using contract::WorkerValue;
using std::chrono::microseconds;
using std::chrono::milliseconds;

// A count of `unit`s as the variable spells it in `per` units: 2500 ms per 1000 -> "2.5".
std::string decimal(long long count, double per) {
  std::ostringstream out;
  out.precision(15);
  out << static_cast<double>(count) / per;
  return out.str();
}

std::string flag(bool value) { return value ? "1" : "0"; }

// The printable address of an IPv4 or IPv6 `addr` of interface `name` (a link-local IPv6
// address with the interface as its scope, without which it means nothing); "" otherwise.
std::string printable(const sockaddr* addr, const char* name) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(addr);
    return ::inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text)) != nullptr ? text : "";
  }
  if (addr->sa_family != AF_INET6) return "";
  const auto* in6 = reinterpret_cast<const sockaddr_in6*>(addr);
  if (::inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text)) == nullptr) return "";
  return IN6_IS_ADDR_LINKLOCAL(&in6->sin6_addr) ? std::string(text) + "%" + name : text;
}

// The address HVD_DATA_IFACE names on this host: the interface's first IPv4 address (as Horovod's
// Gloo takes it), else its first IPv6 one. Loopback counts: `lo` is what a one-host job names.
// A missing interface, one that is down or one without an address is an error now, naming what
// the host has: a rank that bound some other address would fail later, further from the cause.
std::string interfaceAddress(const std::string& from, const std::string& name) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) {
    throw BackendError(from + "=" + name +
                       ": cannot list this host's network interfaces: " + std::strerror(errno));
  }
  std::string ipv4, ipv6;
  std::vector<std::string> present;
  bool found = false, up = false;
  for (const ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_name == nullptr) continue;
    const std::string interface = it->ifa_name;
    if (std::find(present.begin(), present.end(), interface) == present.end()) {
      present.push_back(interface);
    }
    if (interface != name) continue;
    found = true;
    up = up || (it->ifa_flags & IFF_UP) != 0;
    if (it->ifa_addr == nullptr || (it->ifa_flags & IFF_UP) == 0) continue;
    const std::string address = printable(it->ifa_addr, it->ifa_name);
    if (it->ifa_addr->sa_family == AF_INET && ipv4.empty()) ipv4 = address;
    if (it->ifa_addr->sa_family == AF_INET6 && ipv6.empty()) ipv6 = address;
  }
  ::freeifaddrs(list);
  if (!ipv4.empty() || !ipv6.empty()) return !ipv4.empty() ? ipv4 : ipv6;
  std::string names;
  for (const std::string& interface : present) names += (names.empty() ? "" : ", ") + interface;
  throw InvalidArgumentError(
      from + "=" + name + ": " +
      (!found ? "this host has no network interface " + name + " (it has: " + names + ")"
       : !up  ? "network interface " + name + " is down"
              : "network interface " + name + " has no IP address"));
}

std::string processSetsText(const std::vector<std::vector<int>>& sets) {
  std::string out;
  for (const std::vector<int>& set : sets) {
    if (!out.empty()) out += ';';
    out += rankList(set);
  }
  return out;
}

// One per variable the configuration reads, in no particular order: parseConfig walks the
// table, not this list.
constexpr ConfigField kFields[] = {
    // The placement and the store: read by parseConfig itself (apply is null).
    {worker::kSize.name, nullptr, nullptr, [](const Config& c) { return std::to_string(c.size); }},
    {worker::kRank.name, nullptr, nullptr, [](const Config& c) { return std::to_string(c.rank); }},
    {worker::kLocalSize.name, nullptr, nullptr,
     [](const Config& c) { return std::to_string(c.localSize); }},
    {worker::kLocalRank.name, nullptr, nullptr,
     [](const Config& c) { return std::to_string(c.localRank); }},
    {worker::kCrossSize.name, nullptr, nullptr,
     [](const Config& c) { return std::to_string(c.crossSize); }},
    {worker::kCrossRank.name, nullptr, nullptr,
     [](const Config& c) { return std::to_string(c.crossRank); }},
    {worker::kJobId.name, nullptr, nullptr, [](const Config& c) { return c.jobId; }},
    {worker::kStoreFile.name, nullptr, nullptr, [](const Config& c) { return c.storeFile; }},
    {worker::kStoreAddr.name, nullptr, nullptr, [](const Config& c) { return c.storeAddress; }},
    {worker::kStoreToken.name, nullptr, nullptr, [](const Config& c) { return c.storeToken; }},

    // Transports.
    {worker::kTimeout.name,
     [](Config& c, const WorkerValue& v, const EnvReader&) {
       c.timeout = milliseconds(static_cast<long long>(std::ceil(v.number * 1000)));
     },
     nullptr, [](const Config& c) { return decimal(c.timeout.count(), 1000); }},
    {worker::kStartTimeout.name,
     [](Config& c, const WorkerValue& v, const EnvReader&) {
       c.startTimeout = milliseconds(static_cast<long long>(std::ceil(v.number * 1000)));
     },
     // The rendezvous waits as long as any other wait unless told otherwise.
     [](Config& c) { c.startTimeout = c.timeout; },
     [](const Config& c) { return decimal(c.startTimeout.count(), 1000); }},
    {worker::kTransport.name,
     [](Config& c, const WorkerValue& v, const EnvReader&) {
       // "shm" names what auto does on one host: shared memory where it can.
       c.transport = v.text == "tcp" ? TransportChoice::kTcp : TransportChoice::kAuto;
     },
     nullptr,
     [](const Config& c) {
       return std::string(c.transport == TransportChoice::kTcp ? "tcp" : "auto");
     }},
    {worker::kDataAddr.name,
     [](Config& c, const WorkerValue& v, const EnvReader&) { c.dataAddress = v.text; }, nullptr,
     [](const Config& c) { return c.dataAddress; }},
    {worker::kDataIface.name,
     [](Config& c, const WorkerValue& v, const EnvReader&) {
       c.dataInterface = v.text;
       if (c.dataAddress.empty()) c.dataAddress = interfaceAddress(v.from, v.text);
     },
     nullptr, [](const Config& c) { return c.dataInterface; }},
    {worker::kShmRingBytes.name,
     [](Config& c, const WorkerValue& v, const EnvReader&) {
       c.shmRingBytes = static_cast<size_t>(v.integer);
       // The ring indexes wrap with a mask.
       if ((c.shmRingBytes & (c.shmRingBytes - 1)) != 0) {
         throw InvalidArgumentError(v.from + "=" + std::to_string(c.shmRingBytes) +
                                    " must be a power of two");
       }
     },
     nullptr, [](const Config& c) { return std::to_string(c.shmRingBytes); }},
    {worker::kSmallMessageBytes.name,
     [](Config& c, const WorkerValue& v, const EnvReader&) {
       c.smallMessageBytes = static_cast<size_t>(v.integer);
       c.smallMessageBytesTcp = c.smallMessageBytes;
     },
     nullptr,
     [](const Config& c) {
       // Unset, each transport keeps its own crossover.
       return c.smallMessageBytes == c.smallMessageBytesTcp
                  ? std::to_string(c.smallMessageBytes)
                  : std::to_string(c.smallMessageBytes) + " (tcp " +
                        std::to_string(c.smallMessageBytesTcp) + ")";
     }},
    {worker::kFullMeshRanks.name,
     [](Config& c, const WorkerValue& v, const EnvReader&) {
       c.fullMeshRanks = static_cast<int>(v.integer);
     },
     nullptr, [](const Config& c) { return std::to_string(c.fullMeshRanks); }},
    {worker::kPieceBytes.name,
     [](Config& c, const WorkerValue& v, const EnvReader&) {
       c.pieceBytes = static_cast<size_t>(v.integer);
     },
     nullptr, [](const Config& c) { return std::to_string(c.pieceBytes); }},
    {worker::kPieceBytesTcp.name,
     [](Config& c, const WorkerValue& v, const EnvReader&) {
       c.pieceBytesTcp = static_cast<size_t>(v.integer);
     },
     nullptr, [](const Config& c) { return std::to_string(c.pieceBytesTcp); }},
    {worker::kYieldUs.name,
     [](Config& c, const WorkerValue& v, const EnvReader&) { c.yield = microseconds(v.integer); },
     nullptr, [](const Config& c) { return std::to_string(c.yield.count()); }},
    {worker::kSpinUs.name,
     [](Config& c, const WorkerValue& v, const EnvReader&) {
       c.spin = microseconds(v.integer);
       c.spinFromEnvironment = true;
     },
     nullptr, [](const Config& c) { return std::to_string(c.spin.count()); }},

    // Backends.
    {worker::kGpuBackend.name,
     [](Config& c, const WorkerValue& v, const EnvReader&) {
       c.gpuBackend = v.text == "nccl"   ? gpu::GpuBackendChoice::kNccl
                      : v.text == "host" ? gpu::GpuBackendChoice::kHost
                                         : gpu::GpuBackendChoice::kAuto;
     },
     nullptr, [](const Config& c) { return std::string(gpu::gpuBackendName(c.gpuBackend)); }},
    {worker::kCpuBackend.name,
     [](Config& c, const WorkerValue& v, const EnvReader& getenv) {
       c.cpuBackend = v.text == "mpi" ? CpuBackend::kMpi : CpuBackend::kHvd;
       const char* mpiSize = getenv("OMPI_COMM_WORLD_SIZE");
       if (c.cpuBackend == CpuBackend::kMpi && (mpiSize == nullptr || *mpiSize == '\0')) {
         throw InvalidArgumentError(v.from + "=mpi needs a job started by mpirun, and this " +
                                    "process was not (OMPI_COMM_WORLD_SIZE is not set): start " +
                                    "it with mpirun, or leave " + v.from + " unset for hvd's " +
                                    "own transports");
       }
     },
     nullptr, [](const Config& c) { return std::string(cpuBackendName(c.cpuBackend)); }},
    {worker::kHierarchicalAllreduce.name,
     [](Config& c, const WorkerValue& v, const EnvReader&) {
       c.hierarchicalAllreduce = v.integer == 1;
       c.hierarchicalSet = true;
     },
     nullptr, [](const Config& c) { return flag(c.hierarchicalAllreduce); }},

    // The engine.
    {worker::kCycleTime.name,
     [](Config& c, const WorkerValue& v, const EnvReader&) {
       c.cycleTime = microseconds(std::max<long long>(1, std::llround(v.number * 1000)));
       c.cycleTimeSet = true;
     },
     nullptr, [](const Config& c) { return decimal(c.cycleTime.count(), 1000); }},
    {worker::kCacheCapacity.name,
     [](Config& c, const WorkerValue& v, const EnvReader&) {
       c.cacheCapacity = static_cast<size_t>(v.integer);
       c.cacheCapacitySet = true;
     },
     nullptr, [](const Config& c) { return std::to_string(c.cacheCapacity); }},
    {worker::kFusionThreshold.name,
     [](Config& c, const WorkerValue& v, const EnvReader&) {
       c.fusionThreshold = static_cast<size_t>(v.integer);
       c.fusionThresholdSet = true;
     },
     nullptr, [](const Config& c) { return std::to_string(c.fusionThreshold); }},
    {worker::kStallCheckTime.name,
     [](Config& c, const WorkerValue& v, const EnvReader&) {
       c.stallCheckTime = milliseconds(std::llround(v.number * 1000));
     },
     nullptr, [](const Config& c) { return decimal(c.stallCheckTime.count(), 1000); }},
    {worker::kStallShutdownTime.name,
     [](Config& c, const WorkerValue& v, const EnvReader&) {
       c.stallShutdownTime = milliseconds(std::llround(v.number * 1000));
     },
     nullptr, [](const Config& c) { return decimal(c.stallShutdownTime.count(), 1000); }},
    {worker::kStallCheckDisable.name,
     [](Config& c, const WorkerValue& v, const EnvReader&) {
       // Read after HVD_STALL_CHECK_TIME (the table's order), so it wins over it.
       c.stallCheckDisabled = v.integer == 1;
       if (c.stallCheckDisabled) c.stallCheckTime = milliseconds(0);
     },
     nullptr, [](const Config& c) { return flag(c.stallCheckDisabled); }},
    {worker::kTimeline.name,
     [](Config& c, const WorkerValue& v, const EnvReader&) {
       // Horovod's word for "the program starts it" (hvd.start_timeline), not a file name.
       if (v.text == "DYNAMIC") {
         c.timelineDynamic = true;
       } else {
         c.timelinePath = v.text;
       }
     },
     nullptr,
     [](const Config& c) { return c.timelineDynamic ? std::string("DYNAMIC") : c.timelinePath; }},
    {worker::kProcessSets.name,
     [](Config& c, const WorkerValue& v, const EnvReader&) {
       c.processSets = parseProcessSets(v.text, v.from.c_str());
     },
     nullptr, [](const Config& c) { return processSetsText(c.processSets); }},
    {worker::kDynamicProcessSets.name,
     [](Config& c, const WorkerValue& v, const EnvReader&) {
       c.dynamicProcessSets = v.integer == 1;
     },
     nullptr, [](const Config& c) { return flag(c.dynamicProcessSets); }},
    {worker::kElastic.name,
     [](Config& c, const WorkerValue& v, const EnvReader&) { c.elastic = v.integer == 1; }, nullptr,
     [](const Config& c) { return flag(c.elastic); }},
    {worker::kElasticRound.name,
     [](Config& c, const WorkerValue& v, const EnvReader&) {
       c.elasticRound = static_cast<int>(v.integer);
     },
     nullptr, [](const Config& c) { return std::to_string(c.elasticRound); }},
    {worker::kWorkerId.name,
     [](Config& c, const WorkerValue& v, const EnvReader&) {
       c.workerId = static_cast<int>(v.integer);
     },
     nullptr, [](const Config& c) { return std::to_string(c.workerId); }},
    {worker::kElasticTimeout.name,
     [](Config& c, const WorkerValue& v, const EnvReader&) {
       c.elasticTimeout = milliseconds(static_cast<long long>(std::ceil(v.number * 1000)));
     },
     nullptr, [](const Config& c) { return decimal(c.elasticTimeout.count(), 1000); }},
    {worker::kTimelineMarkCycles.name,
     [](Config& c, const WorkerValue& v, const EnvReader&) {
       c.timelineMarkCycles = v.integer == 1;
     },
     nullptr, [](const Config& c) { return flag(c.timelineMarkCycles); }},
    {worker::kAutotune.name,
     [](Config& c, const WorkerValue& v, const EnvReader&) { c.autotune = v.integer == 1; },
     nullptr, [](const Config& c) { return flag(c.autotune); }},
    {worker::kAutotuneLog.name,
     [](Config& c, const WorkerValue& v, const EnvReader&) { c.autotuneLog = v.text; }, nullptr,
     [](const Config& c) { return c.autotuneLog; }},
    {worker::kAutotuneWarmupSamples.name,
     [](Config& c, const WorkerValue& v, const EnvReader&) {
       c.autotuneWarmupSamples = static_cast<int>(v.integer);
     },
     nullptr, [](const Config& c) { return std::to_string(c.autotuneWarmupSamples); }},
    {worker::kAutotuneStepsPerSample.name,
     [](Config& c, const WorkerValue& v, const EnvReader&) {
       c.autotuneStepsPerSample = static_cast<int>(v.integer);
     },
     nullptr, [](const Config& c) { return std::to_string(c.autotuneStepsPerSample); }},
    {worker::kAutotuneBayesOptMaxSamples.name,
     [](Config& c, const WorkerValue& v, const EnvReader&) {
       c.autotuneBayesOptMaxSamples = static_cast<int>(v.integer);
     },
     nullptr, [](const Config& c) { return std::to_string(c.autotuneBayesOptMaxSamples); }},
    {worker::kAutotuneGaussianProcessNoise.name,
     [](Config& c, const WorkerValue& v, const EnvReader&) { c.autotuneNoise = v.number; }, nullptr,
     [](const Config& c) { return decimal(std::llround(c.autotuneNoise * 1e6), 1e6); }},
    {worker::kStragglerWindow.name,
     [](Config& c, const WorkerValue& v, const EnvReader&) {
       c.stragglerWindow = static_cast<size_t>(v.integer);
     },
     nullptr, [](const Config& c) { return std::to_string(c.stragglerWindow); }},
};

}  // namespace

const ConfigField* configField(const contract::WorkerVariable& variable) {
  for (const ConfigField& field : kFields) {
    if (std::strcmp(field.name, variable.name) == 0) return &field;
  }
  return nullptr;
}

}  // namespace hvd::core
