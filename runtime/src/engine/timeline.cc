// The timeline's recording side (begin/end/instant: intern, timestamp, append under a short
// lock) and its writer thread (format JSON, write at the end of the array, re-append the
// closing bracket). See timeline.h.
#include "engine/timeline.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/syscall_error.h"
#include "hvd_support/json_text.h"
#include "hvd_support/logging.h"

namespace hvd::engine {

namespace {

// Closes the array; always the last bytes of the file after a write.
constexpr std::string_view kTail = "\n]\n";

// An end() whose begin() was dropped is dropped too (so the file's B/E events still pair);
// this bit marks such entries on a tensor's stack of open phases.
constexpr uint32_t kDroppedBit = 0x80000000u;

enum class Kind : uint8_t { kBegin, kEnd, kInstant, kMarker };

struct Record {
  int64_t ns;         // since the timeline started
  uint32_t tensor;    // index into the tensor names; the row (pid) is tensor + 1 (markers: 0)
  uint32_t activity;  // index into the activity names
  Kind kind;
};

// Tensor and activity names in the file: a byte that is not UTF-8 stays readable as \xHH.
void appendEscaped(std::string& out, std::string_view s) {
  appendJsonEscaped(out, s, InvalidUtf8::kHexEscape);
}

// Nanoseconds as microseconds with three decimals ("ts" is in microseconds).
void appendMicros(std::string& out, int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lld.%03lld", static_cast<long long>(ns / 1000),
                static_cast<long long>(ns % 1000));
  out += buf;
}

// A table of names, each with a small id, for interning on the hot path. The strings live in a
// deque (stable addresses) so the map's keys can be views of them.
class NameTable {
 public:
  uint32_t intern(std::string_view name) {
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    const auto id = static_cast<uint32_t>(names_.size());
    names_.emplace_back(name);
    ids_.emplace(names_.back(), id);
    return id;
  }
  // The id of `name`, or kNone if it was never interned.
  static constexpr uint32_t kNone = 0xffffffffu;
  uint32_t find(std::string_view name) const {
    auto it = ids_.find(name);
    return it == ids_.end() ? kNone : it->second;
  }
  size_t size() const { return names_.size(); }
  const std::string& operator[](size_t i) const { return names_[i]; }

 private:
  std::deque<std::string> names_;
  std::unordered_map<std::string_view, uint32_t> ids_;
};

}  // namespace

class Timeline::Impl {
 public:
  Impl(const std::string& path, int rank, size_t maxPending)
      : path_(path), maxPending_(maxPending), start_(std::chrono::steady_clock::now()) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) throwSyscall("timeline: cannot open '" + path + "' for writing");
    // The opening of the array and the row of the timeline itself (pid 0, where notes such as
    // dropped events go); every later event is written as ",\n{...}".
    // The wall-clock time of ts 0 goes with it: ts counts from start_ on the steady clock, so
    // the two clocks are read together once.
    const auto sinceEpoch = std::chrono::duration_cast<std::chrono::microseconds>(
        std::chrono::system_clock::now().time_since_epoch());
    std::string head = "[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"args\":{\"name\":";
    head += "\"hvd timeline (rank " + std::to_string(rank) + ")\"";
    head += ",\"start_time_since_epoch_in_micros\":" + std::to_string(sinceEpoch.count()) + "}}";
    head +=
        ",\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":0,\"args\":{\"sort_index\":0}}";
    head += kTail;
    if (!writeAt(head, 0)) {
      const int err = errno;
      ::close(fd_);
      throwSyscall("timeline: cannot write '" + path + "'", err);
    }
    offset_ = static_cast<off_t>(head.size() - kTail.size());
    try {
      writer_ = std::thread([this] { writerLoop(); });
    } catch (...) {
      ::close(fd_);
      throw;
    }
  }

  ~Impl() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    wake_.notify_one();
    writer_.join();
    ::close(fd_);
  }

  void begin(std::string_view tensor, std::string_view activity) {
    std::lock_guard<std::mutex> lock(mu_);
    const uint32_t t = internTensor(tensor);
    const uint32_t a = activities_.intern(activity);
    auto& open = openPhases_[t];
    if (pending_.size() >= maxPending_) {
      ++dropped_;
      open.push_back(a | kDroppedBit);
      return;
    }
    open.push_back(a);
    pending_.push_back(Record{now(), t, a, Kind::kBegin});
  }

  void end(std::string_view tensor) {
    std::lock_guard<std::mutex> lock(mu_);
    const uint32_t t = tensorIds_.find(tensor);
    if (t == NameTable::kNone) return;  // never begun: nothing to close
    auto& open = openPhases_[t];
    if (open.empty()) return;  // an end() without a begin() is ignored
    const uint32_t a = open.back();
    open.pop_back();
    // An end whose begin was written is kept up to twice the limit, so that B/E pair in the file
    // (only open phases can add to the excess, and those are few).
    if ((a & kDroppedBit) != 0 || pending_.size() >= 2 * maxPending_) {
      ++dropped_;
      return;
    }
    pending_.push_back(Record{now(), t, a, Kind::kEnd});
  }

  void instant(std::string_view tensor, std::string_view what) {
    std::lock_guard<std::mutex> lock(mu_);
    const uint32_t t = internTensor(tensor);
    const uint32_t a = activities_.intern(what);
    if (pending_.size() >= maxPending_) {
      ++dropped_;
      return;
    }
    pending_.push_back(Record{now(), t, a, Kind::kInstant});
  }

  void marker(std::string_view what) {
    std::lock_guard<std::mutex> lock(mu_);
    const uint32_t a = activities_.intern(what);
    if (pending_.size() >= maxPending_) {
      ++dropped_;
      return;
    }
    pending_.push_back(Record{now(), 0, a, Kind::kMarker});
  }

  const std::string& path() const { return path_; }

  void flush() {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t ticket = ++flushRequested_;
    wake_.notify_one();
    flushed_.wait(lock, [&] { return flushDone_ >= ticket || writerExited_; });
  }

 private:
  int64_t now() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                                start_)
        .count();
  }

  // Under mu_.
  uint32_t internTensor(std::string_view tensor) {
    const uint32_t id = tensorIds_.intern(tensor);
    if (openPhases_.size() < tensorIds_.size()) openPhases_.emplace_back();
    return id;
  }

  bool writeAt(std::string_view data, off_t offset) {
    while (!data.empty()) {
      const ssize_t n = ::pwrite(fd_, data.data(), data.size(), offset);
      if (n < 0) {
        if (errno == EINTR) continue;
        return false;
      }
      if (n == 0) {
        errno = EIO;
        return false;
      }
      data.remove_prefix(static_cast<size_t>(n));
      offset += n;
    }
    return true;
  }

  void writerLoop() {
    std::vector<Record> batch;
    std::vector<std::string> newTensors;
    std::vector<std::string> newActivities;
    std::string out;
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      wake_.wait_for(lock, kFlushInterval, [&] { return stop_ || flushRequested_ > flushDone_; });
      const bool stopping = stop_;
      const uint64_t ticket = flushRequested_;
      // An explicit flush (or the last write) also waits for the data to reach the disk.
      const bool sync = stopping || ticket > flushDone_;
      batch.clear();
      batch.swap(pending_);
      const uint64_t dropped = dropped_;
      dropped_ = 0;
      const int64_t takenAt = now();  // after every record of the batch, before any later one
      newTensors.clear();
      for (size_t i = tensorsWritten_; i < tensorIds_.size(); ++i) {
        newTensors.push_back(tensorIds_[i]);
      }
      const size_t firstNewTensor = tensorsWritten_;
      tensorsWritten_ = tensorIds_.size();
      for (size_t i = activityNames_.size(); i < activities_.size(); ++i) {
        newActivities.push_back(activities_[i]);
      }
      for (auto& a : newActivities) activityNames_.push_back(std::move(a));
      newActivities.clear();
      lock.unlock();

      out.clear();
      format(batch, newTensors, firstNewTensor, dropped, takenAt, out);
      // A big buffer left over from a burst is given back.
      if (batch.capacity() > (size_t{1} << 16)) std::vector<Record>().swap(batch);
      writeOut(out, sync);
      if (out.capacity() > (size_t{1} << 22)) std::string().swap(out);

      lock.lock();
      if (ticket > flushDone_) flushDone_ = ticket;
      flushed_.notify_all();
      if (stopping) {
        writerExited_ = true;
        return;
      }
    }
  }

  void format(const std::vector<Record>& batch, const std::vector<std::string>& newTensors,
              size_t firstNewTensor, uint64_t dropped, int64_t takenAt, std::string& out) {
    for (size_t i = 0; i < newTensors.size(); ++i) {
      const std::string pid = std::to_string(firstNewTensor + i + 1);
      out += ",\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":";
      out += pid;
      out += ",\"args\":{\"name\":\"";
      appendEscaped(out, newTensors[i]);
      out += "\"}},\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":";
      out += pid;
      out += ",\"args\":{\"sort_index\":";
      out += pid;
      out += "}}";
    }
    for (const Record& r : batch) {
      out += ",\n{\"name\":\"";
      appendEscaped(out, activityNames_[r.activity]);
      out += "\",\"ph\":\"";
      switch (r.kind) {
        case Kind::kBegin:
          out += "B\",\"ts\":";
          break;
        case Kind::kEnd:
          out += "E\",\"ts\":";
          break;
        case Kind::kInstant:
          out += "i\",\"s\":\"t\",\"ts\":";  // thread scope: the tensor's row
          break;
        case Kind::kMarker:
          out += "i\",\"s\":\"g\",\"ts\":";  // global scope: a line across every row
          break;
      }
      appendMicros(out, r.ns);
      out += ",\"pid\":";
      out += std::to_string(r.kind == Kind::kMarker ? 0 : r.tensor + 1);
      out += ",\"tid\":0}";
    }
    if (dropped > 0) {
      const std::string n = std::to_string(dropped);
      out += ",\n{\"name\":\"TIMELINE_DROPPED_EVENTS\",\"ph\":\"i\",\"s\":\"p\",\"ts\":";
      // When the batch was taken, not now(): records of the next batch may be older than
      // now(), and row 0 (markers too) must not go back in time.
      appendMicros(out, takenAt);
      out += ",\"pid\":0,\"tid\":0,\"args\":{\"dropped\":" + n +
             ",\"reason\":\"the timeline writer fell behind\"}}";
    }
  }

  // Writes `body` where the closing bracket was and the closing bracket after it, in one
  // write, so the file is valid JSON again as soon as the write returns. (Not atomic against
  // power loss, and a SIGKILL landing inside a write of several pages can stop the kernel's copy
  // at a page boundary; a write takes microseconds per kFlushInterval, so in practice a killed
  // job leaves the file as of its last write.)
  void writeOut(std::string& body, bool sync) {
    if (failed_) return;
    const size_t bodySize = body.size();
    if (bodySize == 0 && !sync) return;
    body += kTail;
    if (bodySize != 0 && !writeAt(body, offset_)) {
      failed_ = true;
      logging::get("engine")->error("timeline: cannot write '{}': {}; the timeline stops here",
                                    path_, errnoText(errno));
      return;
    }
    offset_ += static_cast<off_t>(bodySize);
    if (sync) ::fdatasync(fd_);
  }

  const std::string path_;
  const size_t maxPending_;
  const std::chrono::steady_clock::time_point start_;
  int fd_ = -1;
  std::thread writer_;

  // Recording side, under mu_.
  std::mutex mu_;
  std::condition_variable wake_;     // the writer: a flush was requested, or stop
  std::condition_variable flushed_;  // flush(): the writer finished a write
  std::vector<Record> pending_;
  NameTable tensorIds_;
  NameTable activities_;
  std::vector<std::vector<uint32_t>> openPhases_;  // per tensor: activity ids of open phases
  uint64_t dropped_ = 0;
  uint64_t flushRequested_ = 0;
  uint64_t flushDone_ = 0;
  size_t tensorsWritten_ = 0;  // tensors whose metadata events the writer has formatted
  bool stop_ = false;
  bool writerExited_ = false;

  // Writer thread only.
  std::vector<std::string> activityNames_;  // a copy of activities_, for formatting unlocked
  off_t offset_ = 0;                        // where the closing bracket starts
  bool failed_ = false;
};

Timeline::Timeline(const std::string& path, int rank) : Timeline(path, rank, kMaxPendingRecords) {}

Timeline::Timeline(const std::string& path, int rank, size_t maxPendingRecords)
    : impl_(std::make_unique<Impl>(path, rank, maxPendingRecords == 0 ? 1 : maxPendingRecords)) {}

Timeline::~Timeline() = default;

void Timeline::begin(std::string_view tensor, std::string_view activity) {
  impl_->begin(tensor, activity);
}

void Timeline::end(std::string_view tensor) { impl_->end(tensor); }

void Timeline::instant(std::string_view tensor, std::string_view what) {
  impl_->instant(tensor, what);
}

void Timeline::marker(std::string_view what) { impl_->marker(what); }

const std::string& Timeline::path() const { return impl_->path(); }

void Timeline::flush() { impl_->flush(); }

}  // namespace hvd::engine
