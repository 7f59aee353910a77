// How each configuration variable of the worker table (contract/worker_variables.h) reaches a
// Config and reads back from it: parseConfig applies the values it reads through these fields,
// and the summary and configValue show them, so the table, the parser and the summary cannot
// drift apart.
#pragma once

#include <string>

#include "contract/worker_values.h"
#include "core/config.h"

namespace hvd::core {

struct ConfigField {
  const char* name;  // the table entry's
  // Sets the Config from the value read. Null for the placement and the store, which
  // parseConfig reads first because their rules span several variables (and srun or mpirun may
  // stand in for them).
  void (*apply)(Config& config, const contract::WorkerValue& value, const EnvReader& getenv);
  // What an unset variable leaves; null: the Config's default stays.
  void (*unset)(Config& config);
  // The value the Config holds, spelled as the variable takes it ("" when it holds none).
  std::string (*show)(const Config& config);
};

// The field of `variable`, or null when the configuration does not read it (the loggers' and
// the NCCL loader's variables).
const ConfigField* configField(const contract::WorkerVariable& variable);

}  // namespace hvd::core
