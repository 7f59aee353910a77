// What the NCCL and the host-staged device collectives share: finding the one device a call's
// buffers live on, and hvd's own stream on that device, ordered after the caller's work.
//
// Ordering: programs without streams of their own (and frameworks' default mode) queue their
// kernels on the legacy default stream. enter() records an event there and makes hvd's stream
// wait for it, so hvd reads its inputs only after they were written; hvd's stream is
// non-blocking, so nothing else waits for it. Not thread-safe: one caller at a time.
#pragma once

#include <initializer_list>

#include "gpu/cuda_api.h"

namespace hvd::gpu {

// The device the buffers of one call (`op`, for messages) live on, -1 when none is device
// memory; null pointers are skipped. Throws hvd::InvalidArgumentError when two buffers are on
// different devices, and, with `allDevice`, when any pointer (null included) is not device
// memory (NCCL reads and writes only device memory).
int buffersDevice(CudaApi& cuda, const char* op, std::initializer_list<const void*> ptrs,
                  bool allDevice);

class DeviceStream {
 public:
  explicit DeviceStream(CudaApi& cuda) : cuda_(cuda) {}
  ~DeviceStream();
  DeviceStream(const DeviceStream&) = delete;
  DeviceStream& operator=(const DeviceStream&) = delete;

  // Makes `device` current on the calling thread; creates the stream and its event on first use
  // (again for another device than last time); makes the stream wait for everything queued so
  // far on the legacy default stream.
  void enter(int device);

  int device() const { return device_; }  // -1 before the first enter()
  CudaStreamHandle stream() const { return stream_; }

 private:
  void release();

  CudaApi& cuda_;
  int device_ = -1;
  CudaStreamHandle stream_ = nullptr;
  CudaEventHandle ready_ = nullptr;
};

}  // namespace hvd::gpu
