#include "launcher/output.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "hvd/error.hpp"

namespace hvd::launcher {

using agent::coordinator::JobResult;
using agent::process::Stream;

OutputRenderer::OutputRenderer(int np, bool tagOutput, const std::string& outputDir)
    : tagOutput_(tagOutput) {
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
  if (tagOutput_) {
    text = "[" + std::to_string(rank) + "]" +
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

}  // namespace hvd::launcher
