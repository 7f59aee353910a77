// A Runtime is one initialised libhvd instance: it owns the parsed Config, the connection to
// the job's store, the transport Context every blocking collective runs on, and the engine
// (hvd/engine.hpp) with a second Context of its own (store keys under "engine/"), so async ops
// never interleave with the caller's blocking collectives. The public API (hvd.hpp, hvd.h,
// engine.hpp) is a thin shim over one instance per process; tests create several.
#pragma once

#include <memory>

#include "core/config.h"
#include "engine/engine.h"
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
  engine::Engine& engine() { return *engine_; }

 private:
  Config config_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<store::Store> scoped_;  // this init cycle's key prefix over store_
  std::unique_ptr<transport::FailureBoard> failureBoard_;
  std::unique_ptr<transport::Context> context_;
  std::unique_ptr<store::Store> engineScoped_;  // "engine/" under scoped_
  std::unique_ptr<transport::Context> engineContext_;
  std::unique_ptr<engine::Engine> engine_;  // uses engineContext_: destroyed first
};

// The engine's options from the configuration.
engine::EngineOptions engineOptions(const Config& config);

}  // namespace hvd::core
