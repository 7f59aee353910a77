// The C ABI of hvd_engine.h: the engine's submit calls and handles over hvd/engine.hpp. A
// handle is a heap copy of the C++ Handle (which shares the op's state), so releasing it never
// cancels or waits for the op. Submit calls report their own errors; waits report the op's.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/c_api_support.h"
#include "hvd/engine.hpp"
#include "hvd/hvd.hpp"
#include "hvd/hvd_engine.h"

struct hvd_handle_impl {
  hvd::Handle handle;
};

namespace {

using hvd::capi::dataType;
using hvd::capi::guarded;

constexpr int kMaxDims = 64;  // the engine's own limit, checked here before reading dims

// Reads only the fields the caller's struct has (struct_size), the rest keep their defaults.
hvd::OpOptions opOptions(const hvd_op_options* in) {
  hvd_op_options o;
  hvd_op_options_init(&o);
  if (in != nullptr) {
    if (in->struct_size < sizeof(size_t)) {
      throw hvd::InvalidArgumentError("hvd_op_options.struct_size is " +
                                      std::to_string(in->struct_size) +
                                      ": call hvd_op_options_init() first");
    }
    std::memcpy(&o, in, std::min(in->struct_size, sizeof o));
    o.struct_size = sizeof o;
  }
  hvd::OpOptions out;
  out.op = hvd::capi::reduceOp(o.op);
  out.prescaleFactor = o.prescale_factor;
  out.postscaleFactor = o.postscale_factor;
  out.fp16Compression = o.fp16_compression != 0;
  out.root = o.root;
  out.processSet = o.process_set;
  out.device = o.device;
  if (o.device < -1) {
    throw hvd::InvalidArgumentError("device " + std::to_string(o.device) +
                                    " (valid: -1 for host memory, or a CUDA device index)");
  }
  if (o.stream != nullptr && o.device >= 0) hvd::orderAfterStream(o.device, o.stream);
  return out;
}

// The options struct carries an op for every call (HVD_AVERAGE by default), so only an op that
// says the caller meant a reduction this collective cannot do is refused: Adasum.
void refuseAdasum(const char* what, const hvd::OpOptions& o) {
  if (o.op == hvd::ReduceOp::kAdasum) {
    throw hvd::InvalidArgumentError(std::string(what) +
                                    ": op adasum does not apply (it is a reduction; " + what +
                                    " reduces nothing)");
  }
}

hvd::Shape shapeOf(const int64_t* dims, int ndim) {
  if (ndim < 0 || ndim > kMaxDims) {
    throw hvd::InvalidArgumentError("ndim is " + std::to_string(ndim) + " (valid: 0.." +
                                    std::to_string(kMaxDims) + ")");
  }
  if (ndim > 0 && dims == nullptr) throw hvd::InvalidArgumentError("shape is null");
  return hvd::Shape(dims, dims + ndim);
}

std::string nameOf(const char* name) {
  if (name == nullptr) throw hvd::InvalidArgumentError("the op name is null");
  return name;
}

void handOut(hvd::Handle h, hvd_handle* out) { *out = new hvd_handle_impl{std::move(h)}; }

void checkOut(hvd_handle* out) {
  if (out == nullptr) throw hvd::InvalidArgumentError("the handle pointer is null");
  *out = nullptr;
}

const hvd::Handle& live(hvd_handle h) {
  if (h == nullptr) throw hvd::InvalidArgumentError("the handle is null");
  return h->handle;
}

// Results exist once the op succeeded; asking earlier is the binding's error, not a crash.
const hvd::Handle& finished(hvd_handle h) {
  const hvd::Handle& handle = live(h);
  if (!handle.poll()) {
    throw hvd::InvalidArgumentError("op '" + handle.name() + "' has not finished: wait first");
  }
  handle.wait();  // rethrows the op's failure: there is no result to read
  return handle;
}

template <typename T>
void copyList(const std::vector<T>& from, T* to, int capacity, int* count) {
  if (count == nullptr) throw hvd::InvalidArgumentError("the count pointer is null");
  if (capacity < 0) throw hvd::InvalidArgumentError("capacity is negative");
  if (capacity > 0 && to == nullptr) throw hvd::InvalidArgumentError("the output array is null");
  *count = static_cast<int>(from.size());
  std::copy_n(from.begin(), std::min<size_t>(from.size(), static_cast<size_t>(capacity)), to);
}

}  // namespace

extern "C" {

void hvd_op_options_init(hvd_op_options* options) {
  if (options == nullptr) return;
  *options = hvd_op_options{};
  options->struct_size = sizeof(hvd_op_options);
  options->op = HVD_AVERAGE;
  options->prescale_factor = 1.0;
  options->postscale_factor = 1.0;
  options->fp16_compression = 0;
  options->root = 0;
  options->device = -1;
  options->stream = nullptr;
  options->process_set = 0;
}

hvd_status hvd_allreduce_async(const char* name, const void* input, void* output,
                               const int64_t* shape, int ndim, int type,
                               const hvd_op_options* options, hvd_handle* handle) {
  return guarded([&] {
    checkOut(handle);
    handOut(hvd::allreduceAsync(nameOf(name), input, output, shapeOf(shape, ndim), dataType(type),
                                opOptions(options)),
            handle);
  });
}

hvd_status hvd_grouped_allreduce_async(int count, const char* const* names,
                                       const void* const* inputs, void* const* outputs,
                                       const int64_t* const* shapes, const int* ndims, int type,
                                       const hvd_op_options* options, hvd_handle* handle) {
  return guarded([&] {
    checkOut(handle);
    if (count <= 0) {
      throw hvd::InvalidArgumentError("grouped allreduce of " + std::to_string(count) +
                                      " members (at least one)");
    }
    if (names == nullptr || inputs == nullptr || outputs == nullptr || shapes == nullptr ||
        ndims == nullptr) {
      throw hvd::InvalidArgumentError("grouped allreduce: a member array is null");
    }
    std::vector<std::string> n;
    std::vector<const void*> in(inputs, inputs + count);
    std::vector<void*> out(outputs, outputs + count);
    std::vector<hvd::Shape> s;
    for (int i = 0; i < count; ++i) {
      n.push_back(nameOf(names[i]));
      s.push_back(shapeOf(shapes[i], ndims[i]));
    }
    handOut(hvd::groupedAllreduceAsync(n, in, out, s, dataType(type), opOptions(options)), handle);
  });
}

hvd_status hvd_allgather_async(const char* name, const void* input, const int64_t* shape, int ndim,
                               int type, const hvd_op_options* options, hvd_handle* handle) {
  return guarded([&] {
    checkOut(handle);
    const hvd::OpOptions o = opOptions(options);  // validated and stream-ordered like every op's
    refuseAdasum("allgather", o);
    handOut(hvd::allgatherAsync(nameOf(name), input, shapeOf(shape, ndim), dataType(type),
                                o.processSet),
            handle);
  });
}

hvd_status hvd_broadcast_async(const char* name, void* buffer, const int64_t* shape, int ndim,
                               int type, const hvd_op_options* options, hvd_handle* handle) {
  return guarded([&] {
    checkOut(handle);
    const hvd::OpOptions o = opOptions(options);
    refuseAdasum("broadcast", o);
    handOut(hvd::broadcastAsync(nameOf(name), buffer, shapeOf(shape, ndim), dataType(type), o.root,
                                o.processSet),
            handle);
  });
}

hvd_status hvd_reducescatter_async(const char* name, const void* input, const int64_t* shape,
                                   int ndim, int type, const hvd_op_options* options,
                                   hvd_handle* handle) {
  return guarded([&] {
    checkOut(handle);
    handOut(hvd::reducescatterAsync(nameOf(name), input, shapeOf(shape, ndim), dataType(type),
                                    opOptions(options)),
            handle);
  });
}

hvd_status hvd_alltoall_async(const char* name, const void* input, const int64_t* shape, int ndim,
                              const int64_t* splits, int nsplits, int type,
                              const hvd_op_options* options, hvd_handle* handle) {
  return guarded([&] {
    checkOut(handle);
    const hvd::OpOptions o = opOptions(options);
    refuseAdasum("alltoall", o);
    if (nsplits < 0) throw hvd::InvalidArgumentError("nsplits is negative");
    if (nsplits > 0 && splits == nullptr) throw hvd::InvalidArgumentError("splits is null");
    std::vector<int64_t> s(splits, splits + nsplits);
    handOut(hvd::alltoallAsync(nameOf(name), input, shapeOf(shape, ndim), s, dataType(type),
                               o.processSet),
            handle);
  });
}

hvd_status hvd_barrier_async(hvd_handle* handle) {
  return guarded([&] {
    checkOut(handle);
    handOut(hvd::barrierAsync(), handle);
  });
}

hvd_status hvd_process_set_barrier_async(int process_set, hvd_handle* handle) {
  return guarded([&] {
    checkOut(handle);
    handOut(hvd::barrierAsync(process_set), handle);
  });
}

hvd_status hvd_join(int* last_rank) {
  return guarded([&] {
    if (last_rank == nullptr) throw hvd::InvalidArgumentError("last_rank is null");
    *last_rank = hvd::join();
  });
}

int hvd_handle_poll(hvd_handle handle) {
  return handle != nullptr && handle->handle.poll() ? 1 : 0;
}

hvd_status hvd_handle_wait(hvd_handle handle) {
  return guarded([&] { live(handle).wait(); });
}

hvd_status hvd_handle_wait_for(hvd_handle handle, int64_t timeout_ms, int* done) {
  return guarded([&] {
    if (done == nullptr) throw hvd::InvalidArgumentError("done is null");
    if (timeout_ms < 0) throw hvd::InvalidArgumentError("timeout_ms is negative");
    *done = 0;
    *done = live(handle).waitFor(std::chrono::milliseconds(timeout_ms)) ? 1 : 0;
  });
}

hvd_status hvd_handle_output(hvd_handle handle, const void** data, int64_t* bytes) {
  return guarded([&] {
    if (data == nullptr || bytes == nullptr) {
      throw hvd::InvalidArgumentError("data or bytes is null");
    }
    const auto& out = finished(handle).output();
    *data = out.empty() ? nullptr : out.data();
    *bytes = static_cast<int64_t>(out.size());
  });
}

hvd_status hvd_handle_output_shape(hvd_handle handle, int64_t* dims, int capacity, int* ndim) {
  return guarded([&] { copyList(finished(handle).outputShape(), dims, capacity, ndim); });
}

hvd_status hvd_handle_received_splits(hvd_handle handle, int64_t* splits, int capacity,
                                      int* count) {
  return guarded([&] { copyList(finished(handle).receivedSplits(), splits, capacity, count); });
}

const char* hvd_handle_name(hvd_handle handle) {
  return handle == nullptr ? "" : handle->handle.name().c_str();
}

void hvd_handle_release(hvd_handle handle) { delete handle; }

}  // extern "C"

extern "C" {

hvd_status hvd_start_timeline(const char* path, int mark_cycles) {
  return guarded([&] {
    if (path == nullptr) throw hvd::InvalidArgumentError("start_timeline: the path is null");
    hvd::startTimeline(path, mark_cycles != 0);
  });
}

hvd_status hvd_stop_timeline(void) {
  return guarded([] { hvd::stopTimeline(); });
}

hvd_status hvd_get_engine_stats(hvd_engine_stats* stats) {
  return guarded([&] {
    if (stats == nullptr || stats->struct_size < sizeof(size_t)) {
      throw hvd::InvalidArgumentError(
          "engine stats: null, or struct_size not set (set it to sizeof(hvd_engine_stats))");
    }
    const hvd::EngineStats s = hvd::engineStats();
    hvd_engine_stats out{};
    out.struct_size = sizeof out;
    out.cycles = s.cycles;
    out.negotiations = s.negotiations;
    out.collectives = s.collectives;
    out.fused_tensors = s.fusedTensors;
    out.cache_hits = s.cacheHits;
    out.responses = s.responses;
    out.errors = s.errors;
    out.bytes = s.bytes;
    // An older caller's shorter struct gets the fields it has.
    const size_t n = std::min(stats->struct_size, sizeof out);
    std::memcpy(stats, &out, n);
    stats->struct_size = n;
  });
}

}  // extern "C"
