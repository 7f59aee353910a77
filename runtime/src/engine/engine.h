// The engine (docs/architecture.md "Engine"): named ops submitted from any thread, negotiated by a
// background thread on a Context of their own, checked, fused and run. See hvd/engine.hpp for
// the user-visible semantics and controller.h for the negotiation protocol.
//
// Threads: submit calls, join(), stats() and the timeline calls may come from any thread; they
// touch only the submission queue, the join request and a timeline swap request, under
// `mutex_`, and the in-flight names (in_flight_names.h: taken at submit, given back by the
// handle's waiter). Everything
// else — the replicated negotiation state, the ops being negotiated, the fusion buffer, the
// Context — belongs to the engine thread alone. Handles are completed through their OpState's
// own mutex; a waiter that saw its op finish gives the name back and may resubmit it at once.
// Lock order: mutex_ before an OpState's mutex, never the reverse.
//
// Lifetime: the destructor asks every rank to stop (a flag in the next cycle's bit vector) and
// joins the thread; all ranks leave the cycle loop in the same cycle, so no rank is left
// waiting in a collective. In that cycle the ranks also gather why each stopping rank stops
// (setStopReason), so that the ops still pending on the others, and every later submit there,
// fail with a PeerError naming the rank and what it did (shut down, exited) — a peer that went
// away is a failure of the job, not a wrong argument of the caller. Only a removed process set
// is an InvalidArgumentError (submitting to it is the caller's mistake).
// A failing collective (a peer died or timed out) fails every pending op and every later submit
// with that error; a stall shutdown fails them with an hvd::TimeoutError naming the stalled ops.
//
// The timeline belongs to the engine thread, which records into it without a lock of the
// engine's. startTimeline()/stopTimeline() therefore open the new file in the caller's thread,
// post the swap under `mutex_` and wait until the engine thread made it between two cycles (or
// make it themselves once that thread has exited); the replaced timeline comes back to the
// caller, which flushes and closes it after releasing `mutex_`, so submitting threads never
// wait for a file. `timelineControl_` serialises the callers (one swap in flight at a time); the
// engine thread never takes it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "collectives/host_collectives.h"
#include "engine/autotune.h"
#include "engine/controller.h"
#include "engine/executor.h"
#include "engine/in_flight_names.h"
#include "engine/op_state.h"
#include "engine/stall.h"
#include "engine/straggler.h"
#include "gpu/device_backend.h"
#include "hvd/engine.hpp"
#include "transport/context.h"

namespace hvd::engine {

class Timeline;

struct EngineOptions {
  std::chrono::microseconds cycleTime{1000};        // HVD_CYCLE_TIME
  size_t cacheCapacity = 1024;                      // HVD_CACHE_CAPACITY (0: off)
  size_t fusionThreshold = size_t{128} << 20;       // HVD_FUSION_THRESHOLD (0: off)
  std::chrono::milliseconds stallCheckTime{60000};  // HVD_STALL_CHECK_TIME (0: off)
  std::chrono::milliseconds stallShutdownTime{0};   // HVD_STALL_SHUTDOWN_TIME (0: never, Horovod's)
  std::string timelinePath;                         // HVD_TIMELINE (rank 0 writes it)
  bool timelineMarkCycles = false;                  // HVD_TIMELINE_MARK_CYCLES
  // Device buffers (gpu/device_backend.h): where an op's device comes from and what runs it.
  // Null: every buffer is host memory and OpOptions::device >= 0 is refused. Not owned.
  gpu::DeviceBackend* devices = nullptr;
  // What the data collectives of host buffers run on (HVD_CPU_BACKEND=mpi: MPI); null: the
  // engine's own Context, as negotiation does. Not owned; used by the engine thread only.
  coll::HostCollectives* collectives = nullptr;
  // Time for stall decisions and table stamps (tests inject a fake one); default steady_clock.
  std::function<Clock::time_point()> clock;
  // A process set's engine (core/process_sets.h): the job rank of each of its ranks, named in
  // every message instead of the set's own ranks, and what the messages call the set
  // ("process set 1 (ranks 0,1)"). Empty: the job's engine.
  std::vector<int> jobRanks;
  std::string scope;
  // Called on rank 0 with each stall warning, besides the log (tests capture it here).
  std::function<void(const std::string&)> onStallWarning;
  // Autotune (engine/autotune.h): rank 0 searches, every rank applies. The job's engine only
  // (a process set's engine keeps the configured knobs).
  AutotuneOptions autotune;
  // Called on every rank when tuned parameters take effect, with the cycle they take effect
  // after (the same cycle on every rank); besides the log (tests capture it here).
  std::function<void(const TunedParams&, uint64_t cycle)> onTuned;
  // Stragglers (engine/straggler.h): every `window` ops the ranks gather their waits and rank 0
  // reports a rank that is consistently last. The job's engine only; window 0: off.
  StragglerOptions stragglers;
  std::string hostName;  // this rank's host, named in straggler reports
  // Called on rank 0 with each straggler found, besides the log and the timeline.
  std::function<void(const StragglerReport&)> onStraggler;
};

// Why a rank's engine stops (Engine::setStopReason), as the other ranks' errors say it after
// "rank N ".
inline constexpr const char* kStopShutdown = "shut hvd down (called shutdown())";
inline constexpr const char* kStopExiting =
    "exited without shutting hvd down (its program ended or raised: see that rank's output)";
inline constexpr const char* kStopRemoved = "removed the process set";

// The counters are public (hvd/engine.hpp); the engine's own name stays for its callers.
using EngineStats = hvd::EngineStats;

class Engine {
 public:
  // `context` must outlive the engine and be used by nothing else. Starts the thread.
  Engine(transport::Context& context, EngineOptions options);
  // `timeline`: one the program started before the engine existed (hvd::startTimeline), used
  // instead of options.timelinePath (rank 0 only; ignored elsewhere).
  Engine(transport::Context& context, EngineOptions options, std::unique_ptr<Timeline> timeline);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  Handle allreduce(const std::string& name, const void* input, void* output, const Shape& shape,
                   DataType type, const OpOptions& options);
  Handle groupedAllreduce(const std::vector<std::string>& names,
                          const std::vector<const void*>& inputs, const std::vector<void*>& outputs,
                          const std::vector<Shape>& shapes, DataType type,
                          const OpOptions& options);
  Handle allgather(const std::string& name, const void* input, const Shape& shape, DataType type);
  Handle broadcast(const std::string& name, void* buffer, const Shape& shape, DataType type,
                   int root);
  Handle reducescatter(const std::string& name, const void* input, const Shape& shape,
                       DataType type, const OpOptions& options);
  Handle alltoall(const std::string& name, const void* input, const Shape& shape,
                  const std::vector<int64_t>& splits, DataType type);
  Handle barrier();
  int join();

  EngineStats stats() const;

  // Why this rank's engine will stop (one of kStop*), said to the other ranks in the stop cycle;
  // call before destroying the engine. The first reason given wins; none: kStopShutdown.
  void setStopReason(const std::string& reason);

  // hvd::startTimeline / hvd::stopTimeline (hvd/engine.hpp); any thread. On ranks other than 0
  // they only check the path.
  void startTimeline(const std::string& path, bool markCycles);
  void stopTimeline();

  // Tests and benchmarks: while paused, submissions queue up but do not enter negotiation
  // (cycles go on), so that a burst of ops is negotiated in one cycle.
  void setPaused(bool paused);

 private:
  Handle submit(std::vector<std::unique_ptr<LocalOp>> ops, std::shared_ptr<OpState> state);
  std::unique_ptr<LocalOp> makeOp(const std::string& name, OpType type, const void* input,
                                  void* output, const Shape& shape, DataType dtype) const;

  void loop();
  // One negotiation cycle; false when the engine stops (shutdown, stall shutdown).
  bool cycle(bool stop, bool joined);
  void negotiate(const std::vector<Request>& fresh);
  void execute(const std::vector<Response>& responses);
  LocalOp* localOp(const std::string& name);
  void complete(LocalOp* op, std::exception_ptr error);
  // Fails every pending op (and join) with `error`; later submits throw it.
  void failAll(std::exception_ptr error);
  // The stop cycle: gathers every rank's reason and builds the error the pending ops get.
  std::exception_ptr stopError(bool stopping);
  void checkStalls(Clock::time_point now);
  // Autotune: every rank applies what rank 0's tuner decided, broadcast in the flagged cycle.
  TunedParams receiveTuned();
  void applyTuned(const TunedParams& params);
  // Stragglers: every rank's waits for the window's ops, gathered; rank 0 analyses them.
  void exchangeWaits();
  Clock::time_point now() const;
  // Posts a timeline change and waits until it took effect; returns the timeline it replaced.
  // `replace` false: only markCycles changes. Under timelineControl_, not mutex_.
  std::unique_ptr<Timeline> swapTimeline(std::unique_ptr<Timeline> timeline, bool replace,
                                         bool markCycles);
  // Makes the posted change: the engine thread between cycles, or the caller once the engine
  // thread has exited. Under mutex_.
  void applyTimelineSwap();

  transport::Context& context_;
  const EngineOptions options_;
  const int rank_;
  const int size_;

  // Shared with submitting threads.
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<LocalOp>> incoming_;
  const std::shared_ptr<InFlightNames> names_ = std::make_shared<InFlightNames>();
  std::shared_ptr<OpState> joinOp_;
  std::exception_ptr failure_;  // set once the engine stopped: later submits throw it
  bool stopRequested_ = false;
  std::string stopReason_;  // setStopReason; copied to stopReasonMine_ by the engine thread
  bool paused_ = false;
  bool wake_ = false;  // something for the engine thread: start a cycle now
  uint64_t barriers_ = 0;
  struct TimelineSwap {
    std::unique_ptr<Timeline> timeline;
    bool replace = false;
    bool markCycles = false;
  };
  std::optional<TimelineSwap> timelineSwap_;   // posted by a timeline call, taken by the thread
  std::unique_ptr<Timeline> retiredTimeline_;  // what the swap replaced, for its caller
  std::condition_variable timelineSwapped_;
  bool threadExited_ = false;  // the engine thread left its loop: callers swap themselves

  // The timeline calls, serialised (never taken by the engine thread).
  std::mutex timelineControl_;
  std::string timelinePath_;  // under timelineControl_: the file rank 0 writes, "" for none

  // Engine thread only.
  std::unique_ptr<Timeline> timeline_;
  bool markCycles_ = false;  // a CYCLE_START marker per cycle that ran responses
  Controller controller_;
  StallInspector stall_;
  EngineCounters counters_;
  Executor executor_;
  std::map<std::string, std::unique_ptr<LocalOp>> active_;
  std::vector<LocalOp*> activeOrder_;  // submission order
  bool stallShutdownDue_ = false;
  std::string stopReasonMine_;  // this rank's reason, once it asked to stop
  std::chrono::microseconds cycleTime_;
  size_t cacheCapacityOn_;            // the response cache's capacity when autotune turns it on
  std::unique_ptr<Autotuner> tuner_;  // rank 0 of the job's engine, with autotune on
  std::unique_ptr<StragglerDetector> stragglers_;  // the job's engine with a window, else null
  std::vector<float> windowWaits_;  // this rank's wait (us) per op of the window; -1: none here
  std::vector<std::string> hosts_;  // rank 0: each rank's host, from the first exchange

  std::thread thread_;
};

}  // namespace hvd::engine
