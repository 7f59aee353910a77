// A job's output log on its leader agent: every rank's output, written as the job runs (appended,
// a line at a time), so nothing is lost when the client disconnects.
//
// One file per job, <state-dir>/jobs/<id>/output.log, one line per output line of any rank, in
// the order the leader received them:
//
//   <unix ms> <rank>[@<attempt>] <O|E> <host> <the line's bytes>\n
//
// The attempt (a restart's number: HVD_RESTART_COUNT) is written only from the first restart on,
// so the lines of a job that never restarted read as they always did.
// A line never holds '\n' (process supervision splits on it), so the file needs no escaping, and
// every line is one write(2) on a file opened O_APPEND: readers never see two lines merged, and a
// reader that catches a write half done keeps the incomplete tail for its next read. Hosts are
// the names the user gave (-H), which hold no spaces.
//
// The writer is bounded (--max-log-mb per job, counted in the file's bytes, prefixes included):
// past the limit lines are counted, not written, and the count ends up in the job's record and in
// one notice line at the end of the log. It also yields to the agent's records when the state
// directory's file system fills up (state_space.h): lines are dropped rather than written into the
// headroom kept for records, a write that fails (a full disk, an I/O error) is rolled back to the
// last whole line, and a notice line marks where lines are missing and why.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/process/spawner.h"
#include "agent/records/state_space.h"

namespace hvd::agent::records {

struct LogLine {
  int64_t unixMs = 0;
  int rank = 0;
  process::Stream stream = process::Stream::kStdout;
  std::string host;
  std::string text;
  int attempt = 0;  // the attempt of the job that printed it (0: the first)
};

// Which lines a reader wants (hvdrun logs --rank R|R1-R2 --stderr).
struct LogFilter {
  std::optional<std::pair<int, int>> ranks;  // inclusive
  bool stderrOnly = false;

  bool matches(const LogLine& line) const;
};

class JobLogWriter {
 public:
  // Opens `path` for appending (created with mode 0600). Throws StateWriteError naming the file
  // when that fails. `space` (may be null: no file-system checks) outlives the writer.
  JobLogWriter(std::string path, uint64_t maxBytes, StateSpace* space = nullptr);
  ~JobLogWriter();
  JobLogWriter(const JobLogWriter&) = delete;
  JobLogWriter& operator=(const JobLogWriter&) = delete;

  // Appends one line (one write(2)); false when it was not written: closed, over the limit, no
  // room left or a write error (then counted in dropped()). A line after lines dropped for want
  // of room is preceded by a notice that says how many and why. Thread-safe.
  bool append(int64_t unixMs, int rank, process::Stream stream, std::string_view host,
              std::string_view text, int attempt = 0);
  // Writes the notices for dropped lines not yet told, if any, and closes the file; later
  // appends are refused.
  void close();
  uint64_t dropped() const;
  // Why lines were dropped, for the job's record ("" when none were): "the agent's --max-log-mb",
  // the file system's state, or both.
  std::string dropReasons() const;

 private:
  // Lines lost for want of room or to a failed write since the last notice.
  struct Gap {
    uint64_t lines = 0;
    std::string why;  // of the first loss of the gap
  };
  void dropForRoom(const std::string& why);  // under mutex_
  bool writeWhole(const std::string& data);  // under mutex_: all of it, or nothing (errno set)
  static std::string notice(uint64_t lines, const std::string& where, const std::string& why);

  const std::string path_;
  const uint64_t maxBytes_;
  StateSpace* const space_;
  mutable std::mutex mutex_;
  int fd_ = -1;
  uint64_t bytes_ = 0;
  uint64_t droppedForLimit_ = 0;
  uint64_t droppedForRoom_ = 0;  // no room, or a failed write
  std::string lastRoomWhy_;
  Gap gap_;
  bool torn_ = false;  // a failed write could not be rolled back: start the next on a new line
};

// One log line as written, without the '\n'; nullopt when it does not parse.
std::optional<LogLine> parseLogLine(std::string_view line);
std::string formatLogLine(int64_t unixMs, int rank, process::Stream stream, std::string_view host,
                          std::string_view text, int attempt = 0);

// The size of the log now (0 when it does not exist yet).
uint64_t logSize(const std::string& path);

// Reads the complete lines from `*offset` on, at most about `maxBytes` of them, and advances
// `*offset` past what it consumed; an incomplete last line is left for the next call. Lines that
// do not parse are skipped. Only lines matching `filter` are returned.
std::vector<LogLine> readLogLines(const std::string& path, uint64_t* offset,
                                  const LogFilter& filter, size_t maxBytes = size_t{4} << 20);

// The last `count` matching lines of the complete ones; `*endOffset` gets the offset after them
// (where a follower goes on).
std::vector<LogLine> tailLogLines(const std::string& path, size_t count, const LogFilter& filter,
                                  uint64_t* endOffset);

}  // namespace hvd::agent::records
