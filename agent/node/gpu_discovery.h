// GPU discovery: which GPUs a node has, for `Describe`, default slot counts and GPU binding.
// The agent asks through the GpuDiscovery interface so that the coordinator and the
// environment builder are unit-tested with FakeGpuDiscovery, and only NvmlGpuDiscovery touches a
// driver.
//
// Contract of discover():
//   * returns the node's GPUs in NVML index order (PCI bus order), `index` as NVML numbers them;
//   * never throws for an expected condition: no driver, no NVML library, nvmlInit failing or a
//     device that cannot be queried all yield fewer (possibly zero) GPUs plus an explanation in
//     lastNote(), because a CPU-only node is a normal node, not a broken one;
//   * is not thread-safe; callers serialise (the agent describes itself from one thread).
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "contract/env_reader.h"

namespace hvd::agent::node {

struct GpuInfo {
  int index = 0;             // NVML device index (PCI bus order)
  std::string uuid;          // "GPU-xxxxxxxx-...", stable across reboots and index changes
  std::string name;          // marketing name, e.g. "NVIDIA H100 80GB HBM3"
  std::string pciBusId;      // "00000000:3B:00.0"
  uint64_t memoryBytes = 0;  // total device memory

  bool operator==(const GpuInfo& o) const {
    return index == o.index && uuid == o.uuid && name == o.name && pciBusId == o.pciBusId &&
           memoryBytes == o.memoryBytes;
  }
};

class GpuDiscovery {
 public:
  virtual ~GpuDiscovery() = default;
  virtual std::vector<GpuInfo> discover() = 0;
  // Why the last discover() returned what it did ("no NVML library: ...", "2 GPUs via NVML").
  // Meant for the agent's start-up log and Describe, so an operator can tell "no GPUs" from
  // "GPUs we could not see".
  virtual std::string lastNote() const = 0;
};

// Returns a fixed list; for unit tests of everything that consumes GPU facts.
class FakeGpuDiscovery : public GpuDiscovery {
 public:
  explicit FakeGpuDiscovery(std::vector<GpuInfo> gpus, std::string note = "fake GPU list")
      : gpus_(std::move(gpus)), note_(std::move(note)) {}
  std::vector<GpuInfo> discover() override { return gpus_; }
  std::string lastNote() const override { return note_; }

 private:
  std::vector<GpuInfo> gpus_;
  std::string note_;
};

// Asks `inner` once and answers every later discover() with that list and note. The agent's
// ledger accounts the GPUs found at start-up (GPUs do not come and go under a running agent),
// so Describe reports the same list, without loading and initialising NVML for every job: on
// an 8-GPU node that costs tens to hundreds of milliseconds per call, on every host of a job.
// Thread-safe.
class CachedGpuDiscovery : public GpuDiscovery {
 public:
  explicit CachedGpuDiscovery(GpuDiscovery& inner) : inner_(inner) {}
  std::vector<GpuInfo> discover() override;
  std::string lastNote() const override;

 private:
  GpuDiscovery& inner_;
  mutable std::mutex mutex_;
  bool known_ = false;
  std::vector<GpuInfo> gpus_;
  std::string note_;
};

// TESTING AID. Parses the value of HVD_FAKE_GPUS into a synthetic GPU list, so that GPU binding
// and slot counting can be exercised end to end (multi-process and netns tests, CI) on machines
// without GPUs. Forms:
//   "N"          N GPUs named "Fake GPU 0".."Fake GPU N-1" ("0" forces a GPU-less node);
//   "A,B,..."    one GPU per name, in that order.
// Synthetic GPUs get index i, uuid "GPU-fake-<i>", bus id "00000000:<i+1 as 2 hex>:00.0" and
// 16 GiB. Throws hvd::InvalidArgumentError for an empty value, an empty name, or a count above
// 1024, because a typo in a test set-up should fail loudly rather than look like a CPU node.
std::vector<GpuInfo> parseFakeGpus(const std::string& spec);

// Reads GPUs through NVML, loaded at run time with dlopen: the agent has no link-time dependency
// on the driver, so one binary runs on CPU-only and GPU nodes alike. Each discover() loads NVML,
// initialises it, queries every device and shuts it down again: not holding NVML open means a
// driver upgrade does not need an agent restart. The agent asks once, through
// CachedGpuDiscovery.
//
// If HVD_FAKE_GPUS is set (as seen through `getEnv`), NVML is not consulted at all and the list
// comes from parseFakeGpus(). This is a testing aid only; never set it on a real GPU node.
class NvmlGpuDiscovery : public GpuDiscovery {
 public:
  static constexpr const char* kDefaultLibrary = "libnvidia-ml.so.1";
  static constexpr const char* kFakeGpusEnv = "HVD_FAKE_GPUS";

  // `library` is the name or path given to dlopen; `getEnv` defaults to std::getenv.
  explicit NvmlGpuDiscovery(std::string library = kDefaultLibrary,
                            contract::EnvReader getEnv = nullptr);

  std::vector<GpuInfo> discover() override;
  std::string lastNote() const override { return note_; }

 private:
  std::vector<GpuInfo> discoverWithNvml();

  std::string library_;
  contract::EnvReader getEnv_;  // injected: tests need not change the environment
  std::string note_;
};

}  // namespace hvd::agent::node
