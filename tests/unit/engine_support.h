// Engine tests with ranks as threads: one Engine per rank over in-process contexts
// (transport/local_fabric.h), typed buffers of small integers, and a fake clock.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/element.h"
#include "common/half.h"
#include "engine/engine.h"
#include "transport/local_fabric.h"

namespace hvd::enginetest {

using engine::Engine;
using engine::EngineOptions;
using engine::EngineStats;

inline transport::ContextOptions contextOptions() {
  transport::ContextOptions options;
  options.timeout = std::chrono::seconds(30);
  options.spin = std::chrono::microseconds(20);
  options.yield = std::chrono::microseconds(200);
  return options;
}

// A steady clock the test can move forward.
class FakeClock {
 public:
  engine::Clock::time_point now() const {
    return engine::Clock::now() + std::chrono::milliseconds(offsetMs_.load());
  }
  void advance(std::chrono::milliseconds ms) { offsetMs_ += ms.count(); }
  std::function<engine::Clock::time_point()> function() {
    return [this] { return now(); };
  }

 private:
  std::atomic<int64_t> offsetMs_{0};
};

// np engines over in-process links. Destroying the cluster stops every engine (in step).
class Cluster {
 public:
  explicit Cluster(int np, EngineOptions options = {})
      : Cluster(np, [&options](int) { return options; }) {}
  // Each rank's engine with options of its own (a callback that knows its rank, say).
  Cluster(int np, const std::function<EngineOptions(int rank)>& optionsOf) {
    contexts_ = transport::makeLocalContexts(np, transport::LocalLinkKind::kShm, contextOptions(),
                                             64 << 10);
    for (int r = 0; r < np; ++r) {
      engines_.push_back(std::make_unique<Engine>(*contexts_[r], optionsOf(r)));
    }
  }
  ~Cluster() { engines_.clear(); }  // (a destroyed rank's slot is null: clear skips nothing)

  int size() const { return static_cast<int>(engines_.size()); }
  Engine& engine(int rank) { return *engines_[rank]; }
  // Destroys one rank's engine (after `reason`, if given): every rank's engine stops with it.
  void destroy(int rank, const std::string& reason = "") {
    if (!reason.empty()) engines_[rank]->setStopReason(reason);
    engines_[rank].reset();
  }

  // Runs body(rank, engine) on one thread per rank; fails the test with each rank's exception.
  void run(const std::function<void(int, Engine&)>& body) {
    std::vector<std::exception_ptr> errors(engines_.size());
    std::vector<std::thread> threads;
    for (size_t r = 0; r < engines_.size(); ++r) {
      threads.emplace_back([&, r] {
        try {
          body(static_cast<int>(r), *engines_[r]);
        } catch (...) {
          errors[r] = std::current_exception();
        }
      });
    }
    for (auto& t : threads) t.join();
    for (size_t r = 0; r < errors.size(); ++r) {
      if (!errors[r]) continue;
      try {
        std::rethrow_exception(errors[r]);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << r << ": " << e.what();
      }
    }
  }

 private:
  std::vector<std::unique_ptr<transport::Context>> contexts_;
  std::vector<std::unique_ptr<Engine>> engines_;
};

inline std::vector<uint8_t> buffer(DataType type, size_t count,
                                   const std::function<double(size_t)>& value) {
  std::vector<uint8_t> b(count * dataTypeSize(type) + 1);  // +1: never a null data() pointer
  for (size_t i = 0; i < count; ++i) storeElement(type, b.data(), i, value(i));
  return b;
}

inline bool isFloat(DataType t) {
  return t == DataType::kFloat16 || t == DataType::kBFloat16 || t == DataType::kFloat32 ||
         t == DataType::kFloat64;
}

// |a - b| within `ulps` units in the last place of the type (exact for integers).
inline bool closeUlps(DataType type, double got, double want, int ulps) {
  if (got == want) return true;
  if (!isFloat(type)) return false;
  const int mantissa = type == DataType::kFloat16    ? 10
                       : type == DataType::kBFloat16 ? 7
                       : type == DataType::kFloat32  ? 23
                                                     : 52;
  const double scale = std::max(std::fabs(want), 1e-30);
  const double ulp = std::ldexp(1.0, std::ilogb(scale) - mantissa);
  return std::fabs(got - want) <= ulps * ulp;
}

inline std::string errorOf(const Handle& h) {
  try {
    h.wait();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace hvd::enginetest
