#include "agent/records/job_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <deque>

#include "hvd/error.hpp"

namespace hvd::agent::records {
namespace {

// Reads up to `size` bytes at `offset`; fewer at the end of the file.
std::string readAt(int fd, uint64_t offset, size_t size) {
  std::string data(size, '\0');
  size_t got = 0;
  while (got < size) {
    const ssize_t n = ::pread(fd, data.data() + got, size - got, static_cast<off_t>(offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  data.resize(got);
  return data;
}

bool nextField(std::string_view* rest, std::string_view* field) {
  const size_t space = rest->find(' ');
  if (space == std::string_view::npos) return false;
  *field = rest->substr(0, space);
  rest->remove_prefix(space + 1);
  return true;
}

template <typename T>
bool toNumber(std::string_view text, T* value) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *value);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

bool LogFilter::matches(const LogLine& line) const {
  if (stderrOnly && line.stream != process::Stream::kStderr) return false;
  if (ranks && (line.rank < ranks->first || line.rank > ranks->second)) return false;
  return true;
}

std::string formatLogLine(int64_t unixMs, int rank, process::Stream stream, std::string_view host,
                          std::string_view text, int attempt) {
  std::string out = std::to_string(unixMs);
  out += ' ';
  out += std::to_string(rank);
  if (attempt > 0) out += '@' + std::to_string(attempt);
  out += stream == process::Stream::kStderr ? " E " : " O ";
  out += host.empty() ? std::string_view("-") : host;
  out += ' ';
  out += text;
  return out;
}

std::optional<LogLine> parseLogLine(std::string_view line) {
  std::string_view ms, rank, stream, host;
  if (!nextField(&line, &ms) || !nextField(&line, &rank) || !nextField(&line, &stream) ||
      !nextField(&line, &host)) {
    return std::nullopt;
  }
  LogLine out;
  if (const size_t at = rank.find('@'); at != std::string_view::npos) {
    if (!toNumber(rank.substr(at + 1), &out.attempt) || out.attempt < 1) return std::nullopt;
    rank = rank.substr(0, at);
  }
  if (!toNumber(ms, &out.unixMs) || !toNumber(rank, &out.rank)) return std::nullopt;
  if (stream == "O") {
    out.stream = process::Stream::kStdout;
  } else if (stream == "E") {
    out.stream = process::Stream::kStderr;
  } else {
    return std::nullopt;
  }
  out.host = host == "-" ? std::string() : std::string(host);
  out.text = std::string(line);
  return out;
}

JobLogWriter::JobLogWriter(std::string path, uint64_t maxBytes, StateSpace* space)
    : path_(std::move(path)), maxBytes_(maxBytes), space_(space) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd_ < 0) {
    const int error = errno;
    throw StateWriteError("cannot open the job log " + path_ + ": " + std::strerror(error), error);
  }
  struct stat st {};
  if (::fstat(fd_, &st) == 0) bytes_ = static_cast<uint64_t>(st.st_size);
}

JobLogWriter::~JobLogWriter() { close(); }

std::string JobLogWriter::notice(uint64_t lines, const std::string& where, const std::string& why) {
  return formatLogLine(
             0, -1, process::Stream::kStderr, "-",
             "[hvd] " + std::to_string(lines) + " line(s) were not logged" + where + ": " + why) +
         "\n";
}

void JobLogWriter::dropForRoom(const std::string& why) {
  ++droppedForRoom_;
  if (gap_.lines++ == 0) {
    gap_.why = why;
    lastRoomWhy_ = why;
  }
}

bool JobLogWriter::writeWhole(const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd_, data.data() + done, data.size() - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    const int error = n == 0 ? ENOSPC : errno;
    // Part of a line must not stay: a reader would take it, and whatever comes next glued to
    // it, for the rank's output. Cut the file back to the last whole line.
    if (done > 0) {
      if (::ftruncate(fd_, static_cast<off_t>(bytes_)) != 0) {
        torn_ = true;
        struct stat st {};
        if (::fstat(fd_, &st) == 0) bytes_ = static_cast<uint64_t>(st.st_size);
      }
    }
    errno = error;
    return false;
  }
  return true;
}

bool JobLogWriter::append(int64_t unixMs, int rank, process::Stream stream, std::string_view host,
                          std::string_view text, int attempt) {
  std::string line = formatLogLine(unixMs, rank, stream, host, text, attempt);
  line += '\n';
  std::lock_guard<std::mutex> lock(mutex_);
  if (fd_ < 0) return false;
  if (bytes_ + line.size() > maxBytes_) {
    ++droppedForLimit_;
    return false;
  }
  // The notice of a gap goes where the lines are missing, with the first line after it.
  std::string out = torn_ ? "\n" : "";
  if (gap_.lines > 0) out += notice(gap_.lines, " here", gap_.why);
  out += line;
  if (space_ != nullptr && !space_->logMayWrite(out.size())) {
    if (gap_.lines == 0) {
      dropForRoom("the file system of the agent's state directory is nearly full: " +
                  space_->describe() + ", kept for the agent's job records");
    } else {
      dropForRoom({});
    }
    return false;
  }
  if (!writeWhole(out)) {
    const int error = errno;
    dropForRoom(isNoSpace(error)
                    ? std::string("the file system of the agent's state directory is "
                                  "full (") +
                          std::strerror(error) + ")"
                    : std::string("writing ") + path_ + " failed (" + std::strerror(error) + ")");
    return false;
  }
  bytes_ += out.size();
  torn_ = false;
  gap_ = {};
  return true;
}

void JobLogWriter::close() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (fd_ < 0) return;
  // Past the limit and into the headroom on purpose: the reader must learn that lines are
  // missing. If even this cannot be written, the job's record still has the count and why.
  std::string out = torn_ ? "\n" : "";
  if (gap_.lines > 0) out += notice(gap_.lines, "", gap_.why);
  if (droppedForLimit_ > 0) {
    out += notice(droppedForLimit_, "",
                  "the job's log reached the agent's --max-log-mb (" +
                      (maxBytes_ % (1 << 20) == 0 ? std::to_string(maxBytes_ >> 20) + " MiB"
                                                  : std::to_string(maxBytes_) + " bytes") +
                      ")");
  }
  if (!out.empty() && writeWhole(out)) gap_ = {};
  ::close(fd_);
  fd_ = -1;
}

uint64_t JobLogWriter::dropped() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return droppedForLimit_ + droppedForRoom_;
}

std::string JobLogWriter::dropReasons() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out;
  if (droppedForLimit_ > 0) out = "the agent's --max-log-mb";
  if (droppedForRoom_ > 0) out += (out.empty() ? "" : "; ") + lastRoomWhy_;
  return out;
}

uint64_t logSize(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

std::vector<LogLine> readLogLines(const std::string& path, uint64_t* offset,
                                  const LogFilter& filter, size_t maxBytes) {
  std::vector<LogLine> lines;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return lines;
  // A line longer than maxBytes still has to come through whole: grow until it ends.
  std::string data;
  size_t end = std::string::npos;
  for (size_t want = maxBytes; end == std::string::npos; want *= 2) {
    data = readAt(fd, *offset, want);
    end = data.rfind('\n');
    if (data.size() < want) break;  // the end of the file
  }
  ::close(fd);
  if (end == std::string::npos) return lines;
  std::string_view view(data.data(), end + 1);
  while (!view.empty()) {
    const size_t nl = view.find('\n');
    if (std::optional<LogLine> line = parseLogLine(view.substr(0, nl))) {
      if (filter.matches(*line)) lines.push_back(std::move(*line));
    }
    view.remove_prefix(nl + 1);
  }
  *offset += end + 1;
  return lines;
}

std::vector<LogLine> tailLogLines(const std::string& path, size_t count, const LogFilter& filter,
                                  uint64_t* endOffset) {
  std::deque<LogLine> tail;
  uint64_t offset = 0;
  for (;;) {
    const uint64_t before = offset;
    std::vector<LogLine> lines = readLogLines(path, &offset, filter);
    for (LogLine& line : lines) {
      tail.push_back(std::move(line));
      if (tail.size() > count) tail.pop_front();
    }
    if (offset == before) break;
  }
  *endOffset = offset;
  return {std::make_move_iterator(tail.begin()), std::make_move_iterator(tail.end())};
}

}  // namespace hvd::agent::records
