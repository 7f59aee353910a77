// The engine's timeline (HVD_TIMELINE=path, hvdrun --timeline-filename): a Chrome trace
// ("Trace Event Format", JSON array form) that opens in Perfetto and chrome://tracing. Each
// tensor is one row (a "process" named after the tensor, like Horovod's timeline), and each
// phase of its op is a duration event on it: NEGOTIATE_<OP>, QUEUE, MEMCPY_IN_FUSION_BUFFER,
// the collective (ALLREDUCE, ALLGATHER, ...), MEMCPY_OUT_FUSION_BUFFER. Markers (CYCLE_START,
// HVD_TIMELINE_MARK_CYCLES) are global instant events on the timeline's own row, pid 0, whose
// metadata also carries "start_time_since_epoch_in_micros" (the wall-clock time of "ts" 0, the
// key Horovod's timeline writes there) so that tools can align traces of several runs.
//
// Written off the hot path: begin()/end() only append to an in-memory buffer under a short
// lock; a writer thread formats and writes it out every kFlushInterval. The file is valid JSON
// after every flush (the writer rewrites the closing bracket after each batch), so a job that
// is interrupted still leaves a trace that parses, missing at most the last interval.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace hvd::engine {

class Timeline {
 public:
  static constexpr std::chrono::milliseconds kFlushInterval{100};
  // Bounded memory (added with the implementation): when this many records wait for the
  // writer, new ones are dropped and counted, and the file gets one instant event
  // (TIMELINE_DROPPED_EVENTS on the timeline's own row, pid 0) saying how many. An end() whose
  // begin() was written is still kept (up to twice the limit), so B/E events pair
  // (an end() dropped past twice the limit leaves its phase open in the file).
  static constexpr std::size_t kMaxPendingRecords = std::size_t{1} << 20;

  // Creates (truncates) `path` and writes the opening of the trace. Throws hvd::BackendError
  // naming the path when it cannot be written. `rank` labels the trace's metadata.
  Timeline(const std::string& path, int rank);
  // The same with another limit than kMaxPendingRecords (added for tests of the drop path).
  Timeline(const std::string& path, int rank, std::size_t maxPendingRecords);
  // Flushes everything and closes the file (valid JSON).
  ~Timeline();
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // A phase of `tensor`'s op starts / ends now. Phases of one tensor nest (begin/end pairs,
  // last begun first ended). Thread-safe; never blocks on I/O. An end() with no open phase on
  // that tensor is ignored.
  void begin(std::string_view tensor, std::string_view activity);
  void end(std::string_view tensor);
  // A point in time on the tensor's row (e.g. a cache hit), for hints and errors.
  void instant(std::string_view tensor, std::string_view what);
  // A point in time across every row (the engine's cycle marks).
  void marker(std::string_view what);

  // The file this timeline writes.
  const std::string& path() const;

  // Writes out everything recorded so far and waits until it is on disk (for tests and
  // shutdown).
  void flush();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hvd::engine
