// Reading one worker variable (contract/worker_variables.h): under its name, else under its
// Horovod alias, the text checked against the entry's type and range, with the error text every
// layer reports. The runtime's parser reads every variable through it, and hvdrun may check a
// value with it exactly as the ranks will.
#pragma once

#include <optional>
#include <string>

#include "contract/env_reader.h"
#include "contract/worker_variables.h"

namespace hvd::contract {

struct WorkerValue {
  std::string from;       // the name it was found under: the variable's, or its alias
  std::string text;       // as given; kEnum: the choice it means ("gloo" under the alias: "hvd")
  long long integer = 0;  // kBool, kInt, kSize
  double number = 0;      // kSeconds, kNumber
};

// The value of `variable` in `getenv`, or nullopt when it is unset (an empty value counts as
// unset). Throws hvd::InvalidArgumentError naming the variable as it was found, quoting the value
// and saying what was expected ("HVD_TRANSPORT='ib' is not a transport (expected auto, shm or
// tcp)").
std::optional<WorkerValue> readWorkerValue(const WorkerVariable& variable, const EnvReader& getenv);

// The same check of a value in hand, found under `from` (the variable's name or its alias).
WorkerValue parseWorkerValue(const WorkerVariable& variable, const std::string& from,
                             const std::string& text);

// The variable's short name for summaries: "HVD_CPU_BACKEND" -> "cpu-backend".
std::string workerVariableLabel(const WorkerVariable& variable);

}  // namespace hvd::contract
