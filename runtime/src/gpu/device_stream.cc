#include "gpu/device_stream.h"

#include <string>

#include "hvd/error.hpp"

namespace hvd::gpu {

int buffersDevice(CudaApi& cuda, const char* op, std::initializer_list<const void*> ptrs,
                  bool allDevice) {
  int device = -1;
  for (const void* p : ptrs) {
    const int d = p != nullptr ? cuda.deviceOf(p) : -1;
    if (d < 0) {
      if (allDevice) {
        throw InvalidArgumentError(std::string(op) +
                                   ": with NCCL, every buffer of a device collective must be "
                                   "device memory (one is host memory)");
      }
      continue;
    }
    if (device >= 0 && d != device) {
      throw InvalidArgumentError(std::string(op) + ": the buffers are on devices " +
                                 std::to_string(device) + " and " + std::to_string(d) +
                                 "; they must share one device");
    }
    device = d;
  }
  return device;
}

DeviceStream::~DeviceStream() { release(); }

void DeviceStream::release() {
  if (ready_ != nullptr) cuda_.destroyEvent(ready_);
  if (stream_ != nullptr) cuda_.destroyStream(stream_);
  ready_ = nullptr;
  stream_ = nullptr;
  device_ = -1;
}

void DeviceStream::enter(int device) {
  cuda_.setDevice(device);
  if (device != device_) {
    release();
    stream_ = cuda_.createStream();
    ready_ = cuda_.createEvent();
    device_ = device;
  }
  cuda_.recordEvent(ready_, nullptr);
  cuda_.streamWaitEvent(stream_, ready_);
}

}  // namespace hvd::gpu
