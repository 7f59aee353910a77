#include "launcher/output.h"

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <system_error>

#include "hvd/error.hpp"

namespace hvd::launcher {

using agent::coordinator::JobResult;
using agent::process::Stream;

OutputRenderer::OutputRenderer(int np, bool tagOutput, const std::string& outputDir,
                               bool timestampOutput)
    : tagOutput_(tagOutput), timestampOutput_(timestampOutput) {
  if (outputDir.empty()) return;
  for (int r = 0; r < np; ++r) {
    const std::filesystem::path dir =
        std::filesystem::path(outputDir) / ("rank." + std::to_string(r));
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      throw InvalidArgumentError("--output-filename: cannot create " + dir.string() + ": " +
                                 ec.message());
    }
    for (const char* name : {"stdout", "stderr"}) {
      const std::string path = (dir / name).string();
      File f(std::fopen(path.c_str(), "w"));
      if (!f) {
        throw InvalidArgumentError("--output-filename: cannot open " + path + ": " +
                                   std::strerror(errno));
      }
      (std::strcmp(name, "stdout") == 0 ? stdoutFiles_ : stderrFiles_).push_back(std::move(f));
    }
  }
}

OutputRenderer::~OutputRenderer() = default;

void OutputRenderer::onOutput(int rank, const std::string& /*host*/, Stream stream,
                              std::string_view line) {
  std::string text;
  if (timestampOutput_) text = formatTimestamp(std::chrono::system_clock::now());
  if (tagOutput_) {
    text += "[" + std::to_string(rank) + "]" +
            (stream == Stream::kStdout ? "<stdout>: " : "<stderr>: ");
  }
  text.append(line);
  text.push_back('\n');
  std::lock_guard<std::mutex> lock(mutex_);
  std::FILE* out = stream == Stream::kStdout ? stdout : stderr;
  std::fwrite(text.data(), 1, text.size(), out);
  // Flushed per line: a user watching a long job sees progress, and lines of stdout and stderr
  // reach a shared terminal in the order the ranks wrote them.
  std::fflush(out);
  std::vector<File>& files = stream == Stream::kStdout ? stdoutFiles_ : stderrFiles_;
  if (rank >= 0 && rank < static_cast<int>(files.size())) {
    // The files hold the rank's own output, untagged, as the rank wrote it.
    std::fwrite(line.data(), 1, line.size(), files[rank].get());
    std::fputc('\n', files[rank].get());
    std::fflush(files[rank].get());
  }
}

void OutputRenderer::onJobEnd(const JobResult& result) {
  std::lock_guard<std::mutex> lock(mutex_);
  result_ = result;
}

std::optional<JobResult> OutputRenderer::result() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return result_;
}

std::string formatTimestamp(std::chrono::system_clock::time_point t) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(t);
  const long long millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count() % 1000;
  std::tm local = {};
  ::localtime_r(&seconds, &local);
  char buf[64];
  const size_t n = std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &local);
  std::snprintf(buf + n, sizeof(buf) - n, ".%03lld ", millis);
  return buf;
}

std::string formatRestart(const std::string& jobId, int restart, int maxRestarts,
                          const std::string& reason) {
  std::string out = "hvdrun: restarting job " + jobId + " (restart " + std::to_string(restart) +
                    " of " + std::to_string(maxRestarts) + ")";
  if (!reason.empty()) {
    out += " after: ";
    out += reason.rfind("hvdrun: ", 0) == 0 ? reason.substr(8) : reason;
  }
  return out + "\n";
}

std::string formatFailure(const JobResult& result) {
  std::string text = result.summary + "\n";
  if (result.rank >= 0 && !result.stderrTail.empty()) {
    text += "hvdrun: last " + std::to_string(result.stderrTail.size()) + " line(s) of rank " +
            std::to_string(result.rank) + "'s stderr:\n";
    for (const std::string& line : result.stderrTail) text += "  " + line + "\n";
  }
  if (!result.unreportedRanks.empty()) {
    text += "hvdrun: " + std::to_string(result.unreportedRanks.size()) +
            " rank(s) did not report their exit in time\n";
  }
  return text;
}

}  // namespace hvd::launcher
