// How hvd's code reads an environment: std::getenv in the programs, a map in the tests. One
// spelling for the runtime, the agent, hvdrun and the contract. Header only (hvd_contract_env).
#pragma once

#include <functional>

namespace hvd::contract {

// The value of `name`, or null when it is unset.
using EnvReader = std::function<const char*(const char* name)>;

}  // namespace hvd::contract
