#include "core/config.h"

#include <cstdlib>
#include <optional>
#include <sstream>

#include "contract/worker_values.h"
#include "contract/worker_variables.h"
#include "core/config_fields.h"
#include "core/process_sets.h"
#include "core/scheduler_env.h"
#include "hvd/error.hpp"

namespace hvd::core {
namespace {

namespace worker = contract::worker;
using contract::VariableSource;
using contract::WorkerVariable;

// " (hvd::init() expects the worker environment that hvdrun or hvdagent sets: HVD_SIZE, ...)"
std::string launcherHint() {
  std::string names;
  for (const WorkerVariable& v : worker::kAll) {
    // The required ones: those with a default (elastic mode's) are not missing when unset.
    if (v.source != VariableSource::kLauncher || v.defaultValue != nullptr) continue;
    names += (names.empty() ? "" : ", ") + std::string(v.name);
  }
  return " (hvd::init() expects the worker environment that hvdrun or hvdagent sets: " + names +
         "; or srun's SLURM_PROCID/SLURM_NTASKS/... or mpirun's OMPI_COMM_WORLD_*)";
}

std::string required(const EnvReader& getenv, const WorkerVariable& variable) {
  const char* value = getenv(variable.name);
  if (value == nullptr || *value == '\0') {
    throw InvalidArgumentError(std::string(variable.name) + " is not set" + launcherHint());
  }
  return value;
}

// `variable` may be narrowed (withRange) where its bound is another variable's value.
int requiredInt(const EnvReader& getenv, const WorkerVariable& variable) {
  const std::string text = required(getenv, variable);
  return static_cast<int>(contract::parseWorkerValue(variable, variable.name, text).integer);
}

// The rank's place: the HVD_* contract, else what srun or mpirun says.
std::optional<SchedulerPlacement> readPlacement(const EnvReader& getenv, Config& c) {
  const char* hvdRank = getenv(worker::kRank.name);
  std::optional<SchedulerPlacement> scheduler;
  if (hvdRank == nullptr || *hvdRank == '\0') scheduler = placementFromScheduler(getenv);
  if (scheduler) {
    c.placementSource = scheduler->source;
    c.size = scheduler->size;
    c.rank = scheduler->rank;
    c.localSize = scheduler->localSize;
    c.localRank = scheduler->localRank;
    c.crossFromRendezvous = !scheduler->crossRank.has_value();
    c.crossRank = scheduler->crossRank.value_or(0);
    c.crossSize = scheduler->crossSize.value_or(1);
    const char* job = getenv(worker::kJobId.name);
    c.jobId = job != nullptr && *job != '\0' ? job : scheduler->jobId;
  } else {
    c.size = requiredInt(getenv, worker::kSize);
    c.rank = requiredInt(getenv, worker::kRank.withRange(0, c.size - 1));
    c.localSize = requiredInt(getenv, worker::kLocalSize.withRange(1, c.size));
    c.localRank = requiredInt(getenv, worker::kLocalRank.withRange(0, c.localSize - 1));
    c.crossSize = requiredInt(getenv, worker::kCrossSize.withRange(1, c.size));
    c.crossRank = requiredInt(getenv, worker::kCrossRank.withRange(0, c.crossSize - 1));
    c.jobId = required(getenv, worker::kJobId);
  }
  return scheduler;
}

// The rendezvous store: an address with its token, a shared directory, or MPI under mpirun.
void readStore(const EnvReader& getenv, const std::optional<SchedulerPlacement>& scheduler,
               Config& c) {
  if (const auto file = contract::readWorkerValue(worker::kStoreFile, getenv)) {
    c.storeFile = file->text;
  }
  const char* storeAddr = getenv(worker::kStoreAddr.name);
  const bool haveAddr = storeAddr != nullptr && *storeAddr != '\0';
  // Without a store address, a file store (no server, no token: the directory's permissions
  // guard it) when HVD_STORE_FILE names one.
  const bool fileStore = !haveAddr && !c.storeFile.empty();
  if (c.size > 1 && !haveAddr && !fileStore && scheduler && scheduler->source == "mpirun") {
    // The ranks meet through MPI itself (Runtime); a libhvd without MPI says what to set.
    c.mpiRendezvous = true;
  } else if (c.size > 1 && !haveAddr && !fileStore && scheduler) {
    throw InvalidArgumentError("started by " + scheduler->source + " with " +
                               std::to_string(c.size) + " ranks but no rendezvous store: set " +
                               worker::kStoreAddr.name + " (and " + worker::kStoreToken.name +
                               ") to a running store, or " + worker::kStoreFile.name +
                               " to a directory every rank shares");
  } else if (c.size > 1 && !fileStore) {
    c.storeAddress = required(getenv, worker::kStoreAddr);
    c.storeToken = required(getenv, worker::kStoreToken);
  } else if (c.size == 1) {
    const char* address = getenv(worker::kStoreAddr.name);
    const char* token = getenv(worker::kStoreToken.name);
    if (address != nullptr) c.storeAddress = address;
    if (token != nullptr) c.storeToken = token;
  }
}

const ConfigField& fieldOf(const WorkerVariable& variable) {
  const ConfigField* field = configField(variable);
  if (field == nullptr) {
    throw InternalError(std::string(variable.name) +
                        " is a configuration variable of the worker table without a field of "
                        "Config (core/config_fields.cc)");
  }
  return *field;
}

}  // namespace

const char* cpuBackendName(CpuBackend backend) {
  return backend == CpuBackend::kMpi ? "mpi" : "hvd";
}

Config parseConfig(const EnvReader& getenv) {
  Config c;
  const std::optional<SchedulerPlacement> scheduler = readPlacement(getenv, c);
  readStore(getenv, scheduler, c);
  // Every other variable the configuration reads, in the table's order.
  for (const WorkerVariable& variable : worker::kAll) {
    if (variable.reader != contract::VariableReader::kConfig) continue;
    const ConfigField& field = fieldOf(variable);
    if (field.apply == nullptr) continue;  // the placement and the store, read above
    if (const auto value = contract::readWorkerValue(variable, getenv)) {
      field.apply(c, *value, getenv);
    } else if (field.unset != nullptr) {
      field.unset(c);
    }
  }
  return c;
}

std::optional<std::string> configValue(const Config& config,
                                       const contract::WorkerVariable& variable) {
  const ConfigField* field = configField(variable);
  if (field == nullptr) return std::nullopt;
  return field->show(config);
}

std::string requestedCpuBackend(const EnvReader& getenv) {
  try {
    const auto value = contract::readWorkerValue(worker::kCpuBackend, getenv);
    return value ? value->text : worker::kCpuBackend.defaultValue;
  } catch (const InvalidArgumentError&) {
    return "";
  }
}

Config configFromEnvironment() {
  return parseConfig([](const char* name) { return std::getenv(name); });
}

std::string Config::summary() const {
  std::ostringstream out;
  out << "rank " << rank << "/" << size << " local " << localRank << "/" << localSize << " cross "
      << crossRank << "/" << crossSize << (crossFromRendezvous ? " (from rendezvous)" : "")
      << " from " << placementSource
      << (members.empty() ? std::string() : " of launched ranks " + rankList(members)) << " job "
      << jobId << " store "
      << (!storeAddress.empty() ? storeAddress
          : !storeFile.empty()  ? "file " + storeFile
          : mpiRendezvous       ? std::string("<from MPI: rank 0 serves it>")
                                : std::string("-"))
      << " token " << (storeToken.empty() ? "<unset>" : "<set>");
  // Then every knob of the table as its variable spells it, so a value can be copied back.
  for (const WorkerVariable& variable : worker::kAll) {
    const ConfigField* field = configField(variable);
    if (field == nullptr || field->apply == nullptr) continue;
    const std::string value = field->show(*this);
    out << " " << contract::workerVariableLabel(variable) << " "
        << (variable.secret ? "<set>"
            : value.empty() ? "-"
                            : value);
  }
  return out.str();
}

}  // namespace hvd::core
