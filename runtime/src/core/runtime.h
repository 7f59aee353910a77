// A Runtime is one initialised libhvd instance: it owns the parsed Config, the connection to
// the job's store, and the transport Context every collective runs on. The public API
// (hvd.hpp, hvd.h) is a thin shim over one instance per process; tests create several.
#pragma once

#include <memory>

#include "core/config.h"
#include "store/store.h"
#include "transport/context.h"

namespace hvd::core {

class Runtime {
 public:
  // Connects to the store and to every peer. `generation` counts previous init/shutdown
  // cycles of this process so that a re-init never reads the previous cycle's records.
  Runtime(const Config& config, int generation);
  ~Runtime();

  const Config& config() const { return config_; }
  transport::Context& context() { return *context_; }

 private:
  Config config_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<store::Store> scoped_;  // this init cycle's key prefix over store_
  std::unique_ptr<transport::FailureBoard> failureBoard_;
  std::unique_ptr<transport::Context> context_;
};

}  // namespace hvd::core
