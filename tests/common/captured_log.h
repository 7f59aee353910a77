// The lines one logger writes while a CapturedLog lives, message text only ("%v"), for tests that
// assert what a program logs (hvd_support/logging.h: hvdagent's and hvdrun's subsystems).
#pragma once

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace hvd::test {

class CapturedLog {
 public:
  explicit CapturedLog(std::shared_ptr<spdlog::logger> logger)
      : logger_(std::move(logger)), sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(text_)) {
    sink_->set_pattern("%v");
    logger_->sinks().push_back(sink_);
  }
  ~CapturedLog() { logger_->sinks().pop_back(); }
  CapturedLog(const CapturedLog&) = delete;
  CapturedLog& operator=(const CapturedLog&) = delete;

  std::string text() {
    logger_->flush();
    return text_.str();
  }
  std::vector<std::string> lines() {
    std::vector<std::string> out;
    std::istringstream in(text());
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  }

 private:
  std::shared_ptr<spdlog::logger> logger_;
  std::ostringstream text_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
};

}  // namespace hvd::test
