#include "engine/engine.h"

#include <algorithm>
#include <sstream>

#include "collectives/collectives.h"
#include "collectives/validate.h"
#include "engine/timeline.h"
#include "hvd/error.hpp"
#include "hvd_support/logging.h"

namespace hvd::engine {
namespace {

bool isFloat(DataType t) {
  return t == DataType::kFloat16 || t == DataType::kBFloat16 || t == DataType::kFloat32 ||
         t == DataType::kFloat64;
}

std::string describeOptions(const EngineOptions& o) {
  std::ostringstream out;
  out << "engine: cycle " << static_cast<double>(o.cycleTime.count()) / 1000.0
      << " ms, fusion threshold " << o.fusionThreshold << " B"
      << (o.fusionThreshold == 0 ? " (fusion off)" : "") << ", cache capacity " << o.cacheCapacity
      << (o.cacheCapacity == 0 ? " (cache off)" : "") << ", stall check "
      << static_cast<double>(o.stallCheckTime.count()) / 1000.0 << " s"
      << (o.stallCheckTime.count() == 0 ? " (off)" : "") << ", stall shutdown "
      << static_cast<double>(o.stallShutdownTime.count()) / 1000.0 << " s"
      << (o.stallShutdownTime.count() == 0 ? " (never)" : "") << ", timeline "
      << (o.timelinePath.empty() ? "off" : o.timelinePath)
      << (!o.timelinePath.empty() && o.timelineMarkCycles ? " (cycle marks)" : "");
  if (o.collectives != nullptr) out << ", host data over " << o.collectives->describe();
  if (o.autotune.enabled) {
    out << ", autotune on (" << o.autotune.warmupSamples << " warm-up samples, "
        << o.autotune.stepsPerSample << " steps per sample, at most "
        << o.autotune.bayesOptMaxSamples << " Bayesian samples"
        << (o.autotune.logPath.empty() ? "" : ", log " + o.autotune.logPath) << ")";
  }
  return out.str();
}

void checkName(const std::string& what, const std::string& name) {
  if (name.empty()) throw InvalidArgumentError(what + ": the op name is empty");
  if (name.size() > 60000) {
    throw InvalidArgumentError(what + " '" + name.substr(0, 40) + "...': name longer than 60000");
  }
}

void checkShape(const std::string& what, const Shape& shape, bool needRows) {
  if (shape.size() > 64) {
    throw InvalidArgumentError(what + ": " + std::to_string(shape.size()) +
                               " dimensions (at most 64)");
  }
  if (needRows && shape.empty()) {
    throw InvalidArgumentError(what + ": needs at least one dimension (rows of dimension 0)");
  }
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      throw InvalidArgumentError(what + ": negative dimension in shape " + formatShape(shape));
    if (d != 0 && n > (int64_t{1} << 48) / d) {
      throw InvalidArgumentError(what + ": shape " + formatShape(shape) + " is too large");
    }
    n *= d;
  }
}

std::string deviceText(int device) {
  return device < 0 ? std::string("the host") : "GPU " + std::to_string(device);
}

// Scale factors apply to every type (integers are scaled in float64 and truncated, as in
// Horovod); fp16 compression only to floating point.
void checkScaling(const std::string& what, DataType type, const OpOptions& o) {
  if (o.fp16Compression && !isFloat(type)) {
    throw InvalidArgumentError(what + ": fp16 compression applies to floating-point types only");
  }
}

// Refused at submit, on the rank that made the mistake, rather than in the collective.
void checkAllreduceOp(const std::string& what, DataType type, const OpOptions& o) {
  coll::validateAllreduceOp(what.c_str(), o.op, type);
}

// OpOptions::device, when given, must be where the buffers are.
void checkDevice(const std::string& what, const LocalOp& op, const OpOptions& o) {
  if (o.device >= 0 && op.request.device != o.device) {
    throw InvalidArgumentError(what + ": options.device says GPU " + std::to_string(o.device) +
                               " but the buffers are on " + deviceText(op.request.device));
  }
}

}  // namespace

Engine::Engine(transport::Context& context, EngineOptions options)
    : Engine(context, std::move(options), nullptr) {}

Engine::Engine(transport::Context& context, EngineOptions options,
               std::unique_ptr<Timeline> timeline)
    : context_(context),
      options_(std::move(options)),
      rank_(context.rank()),
      size_(context.size()),
      timeline_(context.rank() != 0 ? nullptr
                : timeline          ? std::move(timeline)
                : !options_.timelinePath.empty()
                    ? std::make_unique<Timeline>(options_.timelinePath, context.rank())
                    : nullptr),
      markCycles_(options_.timelineMarkCycles),
      controller_(context.rank(), context.size(), options_.cacheCapacity, options_.jobRanks,
                  options_.scope),
      stall_(options_.stallCheckTime, options_.stallShutdownTime),
      executor_(context, options_.fusionThreshold, counters_, timeline_.get(), options_.devices,
                options_.collectives),
      cycleTime_(options_.cycleTime),
      cacheCapacityOn_(options_.cacheCapacity > 0 ? options_.cacheCapacity : 1024) {
  if (rank_ == 0) logging::get("engine")->info("{}", describeOptions(options_));
  if (rank_ == 0 && options_.autotune.enabled && options_.jobRanks.empty()) {
    TunedParams initial;
    initial.fusionThreshold = options_.fusionThreshold;
    initial.cycleTime = options_.cycleTime;
    initial.cache = options_.cacheCapacity > 0;
    initial.hierarchical = options_.devices != nullptr && options_.devices->hierarchical();
    std::function<bool()> hierarchicalApplies;
    if (options_.devices != nullptr && size_ > 1) {
      gpu::DeviceBackend* devices = options_.devices;
      hierarchicalApplies = [devices] { return devices->hierarchicalAvailable(); };
    }
    tuner_ = std::make_unique<Autotuner>(options_.autotune, initial, hierarchicalApplies);
  }
  if (options_.stragglers.window > 0 && options_.jobRanks.empty() && size_ > 1) {
    stragglers_ = std::make_unique<StragglerDetector>(options_.stragglers);
  }
  if (timeline_) timelinePath_ = timeline_->path();
  thread_ = std::thread([this] { loop(); });
}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopRequested_ = true;
    wake_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Engine::setStopReason(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopReason_.empty()) stopReason_ = reason;
}

Clock::time_point Engine::now() const { return options_.clock ? options_.clock() : Clock::now(); }

EngineStats Engine::stats() const {
  EngineStats s;
  s.cycles = counters_.cycles.load();
  s.negotiations = counters_.negotiations.load();
  s.collectives = counters_.collectives.load();
  s.fusedTensors = counters_.fusedTensors.load();
  s.cacheHits = counters_.cacheHits.load();
  s.responses = counters_.responses.load();
  s.errors = counters_.errors.load();
  s.bytes = counters_.bytes.load();
  return s;
}

// --- the timeline ---------------------------------------------------------------------------

void Engine::startTimeline(const std::string& path, bool markCycles) {
  if (path.empty()) {
    throw InvalidArgumentError(
        "startTimeline: the path is empty (pass the file to write the timeline to; "
        "stopTimeline() stops it)");
  }
  if (rank_ != 0) return;  // rank 0 alone writes the timeline, as in Horovod
  std::lock_guard<std::mutex> control(timelineControl_);
  if (path == timelinePath_) {
    // Horovod keeps writing the file it has open; only the cycle marks change.
    swapTimeline(nullptr, false, markCycles);
    return;
  }
  // Opened here, not on the engine thread: a file that cannot be created is this call's
  // error, and the running timeline (if any) goes on.
  auto fresh = std::make_unique<Timeline>(path, rank_);
  std::unique_ptr<Timeline> replaced = swapTimeline(std::move(fresh), true, markCycles);
  timelinePath_ = path;
  replaced.reset();  // flushes and closes the previous file, under timelineControl_ only
}

void Engine::stopTimeline() {
  if (rank_ != 0) return;
  std::lock_guard<std::mutex> control(timelineControl_);
  if (timelinePath_.empty()) return;
  std::unique_ptr<Timeline> replaced = swapTimeline(nullptr, true, false);
  timelinePath_.clear();
  replaced.reset();  // its destructor writes the rest and the closing bracket, and syncs
}

std::unique_ptr<Timeline> Engine::swapTimeline(std::unique_ptr<Timeline> timeline, bool replace,
                                               bool markCycles) {
  std::unique_lock<std::mutex> lock(mutex_);
  timelineSwap_ = TimelineSwap{std::move(timeline), replace, markCycles};
  wake_ = true;
  cv_.notify_all();
  timelineSwapped_.wait(lock, [&] { return !timelineSwap_ || threadExited_; });
  if (timelineSwap_) applyTimelineSwap();  // the engine thread is gone: nobody else records
  return std::move(retiredTimeline_);
}

void Engine::applyTimelineSwap() {
  TimelineSwap swap = std::move(*timelineSwap_);
  timelineSwap_.reset();
  markCycles_ = swap.markCycles;
  if (!swap.replace) return;
  // Between cycles every active op is negotiating (its one open phase): close that phase in
  // the old file and open it in the new one, so that both files pair their B/E events.
  for (LocalOp* op : activeOrder_) {
    if (timeline_) timeline_->end(op->request.name);
    if (swap.timeline) {
      swap.timeline->begin(op->request.name, "NEGOTIATE_" + opTypeUpper(op->request.type));
    }
  }
  retiredTimeline_ = std::move(timeline_);
  timeline_ = std::move(swap.timeline);
  executor_.setTimeline(timeline_.get());
}

void Engine::setPaused(bool paused) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    paused_ = paused;
    wake_ = true;
  }
  cv_.notify_all();
}

// --- submission ---------------------------------------------------------------------------

std::unique_ptr<LocalOp> Engine::makeOp(const std::string& name, OpType type, const void* input,
                                        void* output, const Shape& shape, DataType dtype) const {
  const std::string what = std::string(opTypeName(type)) + " '" + name + "'";
  checkName(opTypeName(type), name);
  dataTypeSize(dtype);  // throws for a value outside the enum
  checkShape(
      what, shape,
      type == OpType::kAllgather || type == OpType::kReducescatter || type == OpType::kAlltoall);
  auto op = std::make_unique<LocalOp>();
  op->request.name = name;
  op->request.type = type;
  op->request.dtype = dtype;
  op->request.shape = shape;
  op->input = input;
  op->output = output;
  if (op->request.elements() > 0 && type != OpType::kBarrier &&
      (input == nullptr || (type == OpType::kAllreduce && output == nullptr))) {
    throw InvalidArgumentError(what + ": null buffer");
  }
  // The device is part of the negotiated metadata: taken from the buffers themselves, so a
  // rank with a GPU tensor and one with a CPU tensor under one name get a mismatch error.
  if (options_.devices != nullptr && input != nullptr && type != OpType::kBarrier) {
    const int in = options_.devices->deviceOf(input);
    const int out = output != nullptr && output != input ? options_.devices->deviceOf(output) : in;
    if (in != out) {
      throw InvalidArgumentError(what + ": the input is on " + deviceText(in) +
                                 " and the output on " + deviceText(out) +
                                 "; both must be in one place");
    }
    op->request.device = in;
  }
  return op;
}

Handle Engine::submit(std::vector<std::unique_ptr<LocalOp>> ops, std::shared_ptr<OpState> state) {
  const Clock::time_point submitted = stragglers_ ? now() : Clock::time_point{};
  for (auto& op : ops) {
    op->state = state;
    op->submitted = submitted;
  }
  std::vector<const std::string*> names;
  for (const auto& op : ops) names.push_back(&op->request.name);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failure_) std::rethrow_exception(failure_);
    if (const std::string* taken = names_->take(names)) {
      throw InvalidArgumentError(std::string(opTypeName(ops.front()->request.type)) + " '" +
                                 *taken + "': an op of this name is already in flight on rank " +
                                 std::to_string(rank_) +
                                 " (a name identifies one op across ranks: synchronize the "
                                 "first before submitting it again)");
    }
    std::vector<std::string> held;
    for (const std::string* name : names) held.push_back(*name);
    state->holdNames(std::make_unique<NameLease>(names_, std::move(held)));
    for (auto& op : ops) incoming_.push_back(std::move(op));
    wake_ = true;
  }
  cv_.notify_all();
  return Handle(std::move(state));
}

Handle Engine::allreduce(const std::string& name, const void* input, void* output,
                         const Shape& shape, DataType type, const OpOptions& options) {
  auto op = makeOp(name, OpType::kAllreduce, input, output, shape, type);
  checkScaling("allreduce '" + name + "'", type, options);
  checkAllreduceOp("allreduce '" + name + "'", type, options);
  op->request.reduceOp = options.op;
  op->request.prescale = options.prescaleFactor;
  op->request.postscale = options.postscaleFactor;
  op->request.fp16 = options.fp16Compression;
  checkDevice("allreduce '" + name + "'", *op, options);
  std::vector<std::unique_ptr<LocalOp>> ops;
  ops.push_back(std::move(op));
  return submit(std::move(ops), std::make_shared<OpState>(name, 1));
}

Handle Engine::groupedAllreduce(const std::vector<std::string>& names,
                                const std::vector<const void*>& inputs,
                                const std::vector<void*>& outputs, const std::vector<Shape>& shapes,
                                DataType type, const OpOptions& options) {
  if (names.empty()) throw InvalidArgumentError("groupedAllreduce: no members");
  if (inputs.size() != names.size() || outputs.size() != names.size() ||
      shapes.size() != names.size()) {
    throw InvalidArgumentError(
        "groupedAllreduce: names, inputs, outputs and shapes differ in "
        "length (" +
        std::to_string(names.size()) + ", " + std::to_string(inputs.size()) + ", " +
        std::to_string(outputs.size()) + ", " + std::to_string(shapes.size()) + ")");
  }
  const uint64_t group = groupIdOf(names);
  std::vector<std::unique_ptr<LocalOp>> ops;
  for (size_t i = 0; i < names.size(); ++i) {
    auto op = makeOp(names[i], OpType::kAllreduce, inputs[i], outputs[i], shapes[i], type);
    checkScaling("allreduce '" + names[i] + "'", type, options);
    checkAllreduceOp("allreduce '" + names[i] + "'", type, options);
    op->request.reduceOp = options.op;
    op->request.prescale = options.prescaleFactor;
    op->request.postscale = options.postscaleFactor;
    op->request.fp16 = options.fp16Compression;
    checkDevice("allreduce '" + names[i] + "'", *op, options);
    op->request.groupId = group;
    op->request.groupSize = static_cast<int32_t>(names.size());
    ops.push_back(std::move(op));
  }
  const std::string label =
      names.size() == 1 ? names[0] : names[0] + " (+" + std::to_string(names.size() - 1) + " more)";
  return submit(std::move(ops), std::make_shared<OpState>(label, static_cast<int>(names.size())));
}

Handle Engine::allgather(const std::string& name, const void* input, const Shape& shape,
                         DataType type) {
  std::vector<std::unique_ptr<LocalOp>> ops;
  ops.push_back(makeOp(name, OpType::kAllgather, input, nullptr, shape, type));
  return submit(std::move(ops), std::make_shared<OpState>(name, 1));
}

Handle Engine::broadcast(const std::string& name, void* buffer, const Shape& shape, DataType type,
                         int root) {
  auto op = makeOp(name, OpType::kBroadcast, buffer, buffer, shape, type);
  if (root < 0 || root >= size_) {
    throw InvalidArgumentError("broadcast '" + name + "': root " + std::to_string(root) +
                               " is not a rank (0.." + std::to_string(size_ - 1) + ")");
  }
  op->request.root = root;
  std::vector<std::unique_ptr<LocalOp>> ops;
  ops.push_back(std::move(op));
  return submit(std::move(ops), std::make_shared<OpState>(name, 1));
}

Handle Engine::reducescatter(const std::string& name, const void* input, const Shape& shape,
                             DataType type, const OpOptions& options) {
  auto op = makeOp(name, OpType::kReducescatter, input, nullptr, shape, type);
  checkScaling("reducescatter '" + name + "'", type, options);
  if (options.fp16Compression) {
    throw InvalidArgumentError("reducescatter '" + name + "': fp16 compression is for allreduce");
  }
  coll::validateOp(("reducescatter '" + name + "'").c_str(), options.op);
  op->request.reduceOp = options.op;
  op->request.prescale = options.prescaleFactor;
  op->request.postscale = options.postscaleFactor;
  std::vector<std::unique_ptr<LocalOp>> ops;
  ops.push_back(std::move(op));
  return submit(std::move(ops), std::make_shared<OpState>(name, 1));
}

Handle Engine::alltoall(const std::string& name, const void* input, const Shape& shape,
                        const std::vector<int64_t>& splits, DataType type) {
  auto op = makeOp(name, OpType::kAlltoall, input, nullptr, shape, type);
  const int64_t rows = shape[0];
  std::vector<int64_t> explicitSplits = splits;
  if (explicitSplits.empty()) {
    if (rows % size_ != 0) {
      throw InvalidArgumentError("alltoall '" + name + "': " + std::to_string(rows) +
                                 " rows do not split equally over " + std::to_string(size_) +
                                 " ranks (pass splits)");
    }
    explicitSplits.assign(size_, rows / size_);
  }
  if (static_cast<int>(explicitSplits.size()) != size_) {
    throw InvalidArgumentError("alltoall '" + name + "': " + std::to_string(explicitSplits.size()) +
                               " splits for " + std::to_string(size_) + " ranks");
  }
  int64_t sum = 0;
  for (int64_t s : explicitSplits) {
    if (s < 0) throw InvalidArgumentError("alltoall '" + name + "': negative split");
    sum += s;
  }
  if (sum != rows) {
    throw InvalidArgumentError("alltoall '" + name + "': splits add up to " + std::to_string(sum) +
                               " rows, the input has " + std::to_string(rows));
  }
  op->request.splits = std::move(explicitSplits);
  std::vector<std::unique_ptr<LocalOp>> ops;
  ops.push_back(std::move(op));
  return submit(std::move(ops), std::make_shared<OpState>(name, 1));
}

Handle Engine::barrier() {
  uint64_t n;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    n = barriers_++;
  }
  const std::string name = "hvd.barrier." + std::to_string(n);
  std::vector<std::unique_ptr<LocalOp>> ops;
  ops.push_back(makeOp(name, OpType::kBarrier, nullptr, nullptr, {}, DataType::kUInt8));
  return submit(std::move(ops), std::make_shared<OpState>(name, 1));
}

int Engine::join() {
  std::shared_ptr<OpState> state;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failure_) std::rethrow_exception(failure_);
    if (joinOp_)
      throw InvalidArgumentError(
          "join: this rank is already joining (from another "
          "thread)");
    joinOp_ = std::make_shared<OpState>("join", 1);
    state = joinOp_;
    wake_ = true;
  }
  cv_.notify_all();
  state->wait();
  return static_cast<int>(state->value());
}

// --- the engine thread --------------------------------------------------------------------

void Engine::loop() {
  auto log = logging::get("engine");
  auto next = Clock::now();
  while (true) {
    bool stop = false;
    bool joined = false;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait_until(lock, next, [&] { return wake_; });
      wake_ = false;
      if (timelineSwap_) {
        applyTimelineSwap();
        timelineSwapped_.notify_all();
      }
      if (!paused_) {
        for (auto& op : incoming_) {
          if (timeline_) {
            timeline_->begin(op->request.name, "NEGOTIATE_" + opTypeUpper(op->request.type));
          }
          activeOrder_.push_back(op.get());
          active_[op->request.name] = std::move(op);
        }
        incoming_.clear();
      }
      stop = stopRequested_;
      if (stop) stopReasonMine_ = stopReason_.empty() ? kStopShutdown : stopReason_;
      joined = joinOp_ != nullptr;
    }
    next = Clock::now() + cycleTime_;
    try {
      if (!cycle(stop, joined)) break;
    } catch (const std::exception& e) {
      // A collective failed (a peer died or timed out), or a protocol error: break the
      // context so that peers fail promptly too, and fail everything here.
      const auto error = std::current_exception();
      if (!context_.broken()) context_.markBroken(e.what());
      const bool pending = !active_.empty();
      if (pending) {
        log->warn("engine stopped: {}", e.what());
      } else {
        log->info("engine stopped: {}", e.what());
      }
      failAll(error);
      break;
    }
  }
  // From here on a timeline call swaps the timeline itself (see swapTimeline).
  std::lock_guard<std::mutex> lock(mutex_);
  threadExited_ = true;
  timelineSwapped_.notify_all();
}

bool Engine::cycle(bool stop, bool joined) {
  ++counters_.cycles;
  const auto t = now();
  // Which pending ops hit the response cache, and which must be sent as requests.
  std::vector<size_t> hits;
  std::vector<Request> fresh;
  const auto demoteAfter = options_.stallCheckTime / 2;
  for (LocalOp* op : activeOrder_) {
    if (op->phase == LocalOp::Phase::kSent) continue;
    std::optional<size_t> slot;
    if (cacheable(op->request)) slot = controller_.cache().lookup(op->request);
    // An op waiting on its cache bit for long is sent as a request instead, so that the stall
    // inspector sees it in the table (with the ranks it waits on).
    const bool demote = op->phase == LocalOp::Phase::kCached && stall_.enabled() &&
                        t - op->cachedSince > demoteAfter;
    if (slot && !demote) {
      if (op->phase != LocalOp::Phase::kCached) {
        op->phase = LocalOp::Phase::kCached;
        op->cachedSince = t;
      }
      hits.push_back(*slot);
    } else {
      op->phase = LocalOp::Phase::kSent;
      fresh.push_back(op->request);
    }
  }
  BitFlags flags;
  flags.uncached = !fresh.empty();
  flags.stop = stop;
  flags.stallShutdown = rank_ == 0 && stallShutdownDue_;
  flags.joined = joined;
  flags.retune = tuner_ != nullptr && tuner_->pending();  // rank 0's only
  std::vector<uint8_t> bits = controller_.makeBits(hits, flags);
  AllreduceOptions min;
  min.op = ReduceOp::kMin;
  coll::allreduce(context_, bits.data(), bits.data(), bits.size(), DataType::kUInt8, min);
  const BitFlags any = controller_.applyBits(bits);
  // Autotune's new parameters, from rank 0 to all in this cycle; applied at its end, when no
  // response of this cycle is left to plan or to record in the cache.
  std::optional<TunedParams> tuned;
  if (any.retune) tuned = receiveTuned();

  if (any.stallShutdown) {
    std::string message = stall_.shutdownMessage(controller_.waitingOps());
    if (!options_.scope.empty()) message += " (" + options_.scope + ")";
    logging::get("engine")->error("{}", message);
    failAll(std::make_exception_ptr(TimeoutError(message)));
    return false;
  }
  if (any.uncached) negotiate(fresh);
  const std::vector<Response> responses = controller_.takeResponses();
  // Horovod's cycle markers (HOROVOD_TIMELINE_MARK_CYCLES), only for cycles that did work:
  // with a cycle every millisecond, idle marks would bury everything else.
  if (markCycles_ && timeline_ && !responses.empty()) timeline_->marker("CYCLE_START");
  execute(responses);

  if (any.joined) {
    // Every rank has joined: join() returns the last one everywhere; a new epoch starts.
    std::shared_ptr<OpState> op;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      op = std::move(joinOp_);
      joinOp_.reset();
    }
    if (op) {
      op->setValue(controller_.lastJoined());
      op->finishMember(nullptr);
    }
    controller_.resetJoin();
  }
  if (any.stop) {
    failAll(stopError(stop));
    return false;
  }
  if (tuned) applyTuned(*tuned);
  // Every rank ran the same responses, so every rank reaches a full window in the same cycle.
  if (stragglers_ && windowWaits_.size() >= options_.stragglers.window) exchangeWaits();
  if (rank_ == 0 && stall_.enabled()) checkStalls(t);
  return true;
}

// --- stragglers ----------------------------------------------------------------------------

void Engine::exchangeWaits() {
  const size_t n = windowWaits_.size();
  if (hosts_.empty()) {
    // Once: every rank's host, for rank 0's reports.
    const std::string& mine = options_.hostName;
    const std::vector<size_t> counts = coll::allgatherCounts(context_, mine.size());
    size_t total = 0;
    for (size_t c : counts) total += c;
    std::vector<char> all(total + 1);
    coll::allgather(context_, mine.data(), mine.size(), all.data(), counts, DataType::kUInt8);
    size_t offset = 0;
    for (size_t c : counts) {
      hosts_.emplace_back(all.data() + offset, c);
      offset += c;
    }
  }
  std::vector<float> all(n * static_cast<size_t>(size_));
  coll::allgather(context_, windowWaits_.data(), n, all.data(),
                  std::vector<size_t>(static_cast<size_t>(size_), n), DataType::kFloat32);
  windowWaits_.clear();
  if (rank_ != 0) return;
  std::vector<std::vector<float>> waits(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) {
    waits[r].assign(all.begin() + static_cast<std::ptrdiff_t>(r * n),
                    all.begin() + static_cast<std::ptrdiff_t>((r + 1) * n));
  }
  std::optional<StragglerReport> report = stragglers_->analyze(waits);
  if (!report) return;
  report->host = hosts_[report->rank];
  const std::string text = "straggler: " + report->describe();
  logging::get("engine")->warn("{}", text);
  if (timeline_) timeline_->marker("STRAGGLER rank " + std::to_string(report->rank));
  if (options_.onStraggler) options_.onStraggler(*report);
}

// --- autotune -------------------------------------------------------------------------------

TunedParams Engine::receiveTuned() {
  int64_t block[4] = {0, 0, 0, 0};
  if (rank_ == 0) {
    const TunedParams& next = tuner_->current();  // pending: what every rank applies next
    block[0] = static_cast<int64_t>(next.fusionThreshold);
    block[1] = next.cycleTime.count();
    block[2] = next.cache ? 1 : 0;
    block[3] = next.hierarchical ? 1 : 0;
  }
  coll::broadcast(context_, block, 4, DataType::kInt64, BroadcastOptions{0});
  TunedParams p;
  p.fusionThreshold = static_cast<size_t>(block[0]);
  p.cycleTime = std::chrono::microseconds(block[1]);
  p.cache = block[2] != 0;
  p.hierarchical = block[3] != 0;
  return p;
}

void Engine::applyTuned(const TunedParams& params) {
  const uint64_t cycle = counters_.cycles.load();
  executor_.setFusionThreshold(params.fusionThreshold);
  cycleTime_ = params.cycleTime;
  if (params.cache != (controller_.cache().capacity() > 0)) {
    controller_.setCacheCapacity(params.cache ? cacheCapacityOn_ : 0);
  }
  if (options_.devices != nullptr) options_.devices->setHierarchical(params.hierarchical);
  logging::get("engine")->info("autotune: after cycle {}: {}", cycle, describe(params));
  if (options_.onTuned) options_.onTuned(params, cycle);
  if (tuner_) tuner_->applied(now());
}

void Engine::negotiate(const std::vector<Request>& fresh) {
  ++counters_.negotiations;
  const std::string mine = serializeRequests(fresh);
  const std::vector<size_t> counts = coll::allgatherCounts(context_, mine.size());
  size_t total = 0;
  for (size_t c : counts) total += c;
  std::vector<uint8_t> all(total);
  coll::allgather(context_, mine.data(), mine.size(), all.data(), counts, DataType::kUInt8);
  std::vector<std::vector<Request>> batches;
  size_t offset = 0;
  for (size_t c : counts) {
    batches.push_back(parseRequests(all.data() + offset, c));
    offset += c;
  }
  controller_.applyRequests(batches, now());
}

LocalOp* Engine::localOp(const std::string& name) {
  auto it = active_.find(name);
  return it == active_.end() ? nullptr : it->second.get();
}

void Engine::execute(const std::vector<Response>& responses) {
  // Every rank had submitted these by now (what the straggler check measures waits against).
  const Clock::time_point ready = stragglers_ ? now() : Clock::time_point{};
  for (const auto& [begin, end] : executor_.plan(responses)) {
    if (responses[begin].kind == Response::Kind::kError) {
      ++counters_.errors;
      if (LocalOp* op = localOp(responses[begin].request.name)) {
        if (timeline_) {
          timeline_->end(op->request.name);
          timeline_->instant(op->request.name, "ERROR");
        }
        complete(op, std::make_exception_ptr(InvalidArgumentError(responses[begin].error)));
      }
      continue;
    }
    std::vector<LocalOp*> locals;
    for (size_t i = begin; i < end; ++i) {
      LocalOp* op = localOp(responses[i].request.name);
      if (op && timeline_) timeline_->end(op->request.name);  // NEGOTIATE_*
      locals.push_back(op);
    }
    const uint64_t before = counters_.bytes.load();
    executor_.run(responses, begin, end, locals);
    // Rank 0's tuner counts steps by the names that ran (a change it decides waits in it until
    // the next cycle broadcasts it).
    if (tuner_ && !tuner_->done() && !tuner_->pending()) {
      std::vector<std::string> names;
      for (size_t i = begin; i < end; ++i) names.push_back(responses[i].request.name);
      tuner_->observe(names, counters_.bytes.load() - before, now());
    }
    for (size_t i = begin; i < end; ++i) {
      if (stragglers_) {
        // -1: this rank had joined, so it did not submit the op.
        const LocalOp* op = locals[i - begin];
        windowWaits_.push_back(op == nullptr
                                   ? -1.0f
                                   : static_cast<float>(std::max<int64_t>(
                                         0, std::chrono::duration_cast<std::chrono::microseconds>(
                                                ready - op->submitted)
                                                .count())));
      }
      controller_.recordSuccess(responses[i]);
      ++counters_.responses;
      if (responses[i].cacheSlot >= 0) ++counters_.cacheHits;
      if (locals[i - begin] != nullptr) complete(locals[i - begin], nullptr);
    }
  }
}

void Engine::complete(LocalOp* op, std::exception_ptr error) {
  const std::string name = op->request.name;
  std::shared_ptr<OpState> state = op->state;
  activeOrder_.erase(std::find(activeOrder_.begin(), activeOrder_.end(), op));
  active_.erase(name);  // destroys *op
  state->finishMember(error);
}

void Engine::failAll(std::exception_ptr error) {
  std::vector<std::shared_ptr<OpState>> states;
  for (auto& [name, op] : active_) states.push_back(op->state);
  active_.clear();
  activeOrder_.clear();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!failure_) failure_ = error;
    for (auto& op : incoming_) states.push_back(op->state);
    incoming_.clear();
    if (joinOp_) states.push_back(std::move(joinOp_));
    joinOp_.reset();
  }
  for (auto& state : states) state->fail(error);
}

std::exception_ptr Engine::stopError(bool stopping) {
  // Every rank is in this cycle (the stop bit reached all of them at once), so one more
  // allgather is safe; it costs nothing but at the end.
  const std::string mine = stopping ? stopReasonMine_ : std::string();
  const std::vector<size_t> counts = coll::allgatherCounts(context_, mine.size());
  size_t total = 0;
  for (size_t c : counts) total += c;
  std::vector<char> all(total);
  coll::allgather(context_, mine.data(), mine.size(), all.data(), counts, DataType::kUInt8);
  std::string who;
  bool removed = false;
  size_t offset = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    const std::string reason(all.data() + offset, counts[r]);
    offset += counts[r];
    if (reason.empty()) continue;
    removed = removed || reason == kStopRemoved;
    const int jobRank = options_.jobRanks.empty() ? static_cast<int>(r) : options_.jobRanks[r];
    if (!who.empty()) who += "; ";
    who += "rank " + std::to_string(jobRank) +
           (static_cast<int>(r) == rank_ ? " (this rank) " : " ") + reason;
  }
  const std::string tail = ": the engine stopped before this op ran";
  if (removed && !options_.scope.empty()) {
    return std::make_exception_ptr(InvalidArgumentError(options_.scope + " was removed" + tail));
  }
  return std::make_exception_ptr(
      PeerError((options_.scope.empty() ? who : options_.scope + ": " + who) + tail));
}

void Engine::checkStalls(Clock::time_point t) {
  auto verdict = stall_.inspect(controller_.waitingOps(), t);
  if (!verdict.warning.empty()) {
    if (!options_.scope.empty()) verdict.warning = options_.scope + ": " + verdict.warning;
    logging::get("engine")->warn("{}", verdict.warning);
    if (options_.onStallWarning) options_.onStallWarning(verdict.warning);
  }
  if (verdict.shutdown) stallShutdownDue_ = true;
}

}  // namespace hvd::engine
