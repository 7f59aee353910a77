// A job's output log on its leader agent (issue 6: "per-rank output, written as the job runs
// (appended, flushed line by line), so nothing is lost when the client disconnects").
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
// The writer is bounded (--max-log-mb per job): past the limit lines are counted, not written,
// and the count ends up in the job's record and in one notice line at the end of the log.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/process/spawner.h"

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
  // Opens `path` for appending (created with mode 0600). Throws hvd::InvalidArgumentError naming
  // the file when that fails.
  JobLogWriter(std::string path, uint64_t maxBytes);
  ~JobLogWriter();
  JobLogWriter(const JobLogWriter&) = delete;
  JobLogWriter& operator=(const JobLogWriter&) = delete;

  // Appends one line (one write(2)); false when it was not written: closed, over the limit (then
  // counted in dropped()) or a write error. Thread-safe.
  bool append(int64_t unixMs, int rank, process::Stream stream, std::string_view host,
              std::string_view text, int attempt = 0);
  // Writes the notice for dropped lines, if any, and closes the file; later appends are refused.
  void close();
  uint64_t dropped() const;

 private:
  const std::string path_;
  const uint64_t maxBytes_;
  mutable std::mutex mutex_;
  int fd_ = -1;
  uint64_t bytes_ = 0;
  uint64_t dropped_ = 0;
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
