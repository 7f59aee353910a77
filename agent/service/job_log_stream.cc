#include "agent/service/job_log_stream.h"

#include <chrono>
#include <memory>
#include <optional>

#include "agent/records/job_history.h"
#include "agent/rpc/convert.h"

namespace hvd::agent::service {

bool streamJobLog(const jobs::LedJobs& led, const std::string& jobId,
                  const records::LogFilter& filter, uint64_t* offset, bool follow,
                  const std::function<bool()>& cancelled,
                  const std::function<bool(const std::vector<records::LogLine>&)>& emitLines,
                  const std::function<bool(const v1::JobEnd&)>& emitEnd,
                  const std::function<bool(const v1::JobInfo&)>& onRecord) {
  const std::optional<std::string> path = led.history()->logPath(jobId);
  if (!path) return true;
  const std::shared_ptr<const jobs::ChangeSignal> changed = led.changedOf(jobId);
  for (;;) {
    const uint64_t seen = changed->current();
    // The state first, then the lines: the log is complete once the record is final.
    const std::optional<v1::JobInfo> info = led.history()->get(jobId);
    const bool ended = !info || rpc::isFinalState(info->state());
    if (info && onRecord && !onRecord(*info)) return false;
    for (;;) {
      const uint64_t before = *offset;
      const std::vector<records::LogLine> lines = records::readLogLines(*path, offset, filter);
      if (!lines.empty() && !emitLines(lines)) return false;
      if (*offset == before) break;
    }
    if (ended) return info && info->has_end() ? emitEnd(info->end()) : true;
    if (!follow) return true;
    if (cancelled()) return false;
    changed->waitPast(seen, std::chrono::milliseconds(150));
  }
}

}  // namespace hvd::agent::service
