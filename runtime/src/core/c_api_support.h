// What the C ABI's shims (c_api.cc: hvd.h, c_engine_api.cc: hvd_engine.h) share: the calling
// thread's last error, the exception-to-status guard every entry point runs its body in, and
// the checks that turn a binding's raw ints into the C++ API's types.
#pragma once

#include <cstdint>
#include <string>

#include "hvd/error.hpp"
#include "hvd/hvd.h"
#include "hvd/types.hpp"

namespace hvd::capi {

// The message hvd_last_error() returns on this thread.
std::string& lastError();

hvd_status statusOf(ErrorKind kind);

// Runs `body`; an exception becomes its status and the thread's last error, success clears it.
// Nothing escapes: this is the boundary a binding's interpreter sits behind.
template <typename F>
hvd_status guarded(F&& body) {
  try {
    body();
    lastError().clear();
    return HVD_OK;
  } catch (const Error& e) {
    lastError() = e.what();
    return statusOf(e.kind());
  } catch (const std::bad_alloc&) {
    lastError() = "out of memory";
    return HVD_ERR_BACKEND;
  } catch (const std::exception& e) {
    lastError() = e.what();
    return HVD_ERR_INTERNAL;
  } catch (...) {
    lastError() = "unknown error";
    return HVD_ERR_INTERNAL;
  }
}

// A count from a binding; negative is an InvalidArgumentError naming `what`.
size_t checkedCount(const std::string& what, int64_t count);
// hvd_datatype / hvd_reduce_op values; out of range is an InvalidArgumentError.
DataType dataType(int type);
ReduceOp reduceOp(int op);

}  // namespace hvd::capi
