#include "engine/stall.h"

#include <sstream>

#include "engine/mismatch.h"

namespace hvd::engine {
namespace {

std::string seconds(std::chrono::milliseconds ms) {
  std::ostringstream out;
  out << static_cast<double>(ms.count()) / 1000.0 << " s";
  return out.str();
}

}  // namespace

std::string StallInspector::describe(const std::vector<WaitingOp>& waiting) {
  std::ostringstream out;
  for (size_t i = 0; i < waiting.size(); ++i) {
    out << (i ? "; " : "") << "'" << waiting[i].name << "' waits on "
        << describeRanks(waiting[i].missingRanks);
  }
  return out.str();
}

StallInspector::Verdict StallInspector::inspect(const std::vector<WaitingOp>& waiting,
                                                Clock::time_point now) {
  Verdict verdict;
  if (!enabled()) return verdict;
  std::map<std::string, Clock::time_point> stillReported;
  std::vector<WaitingOp> fresh;
  for (const WaitingOp& op : waiting) {
    const auto age = now - op.firstSeen;
    if (age < checkTime_) continue;
    if (shutdownTime_.count() > 0 && age >= shutdownTime_) verdict.shutdown = true;
    auto it = reported_.find(op.name);
    if (it == reported_.end() || it->second != op.firstSeen) fresh.push_back(op);
    stillReported[op.name] = op.firstSeen;
  }
  reported_ = std::move(stillReported);
  if (!fresh.empty()) {
    std::ostringstream out;
    out << "stalled ops: " << describe(fresh) << " (submitted by some ranks but not by others for "
        << seconds(checkTime_) << " or more; ";
    if (shutdownTime_.count() > 0) {
      out << "the job shuts down after " << seconds(shutdownTime_) << ")";
    } else {
      out << "no shutdown: HVD_STALL_SHUTDOWN_TIME is 0)";
    }
    verdict.warning = out.str();
  }
  return verdict;
}

std::string StallInspector::shutdownMessage(const std::vector<WaitingOp>& waiting) const {
  return "stall: ops waited more than " + seconds(shutdownTime_) +
         " (HVD_STALL_SHUTDOWN_TIME) for ranks that never submitted them: " + describe(waiting) +
         "; shutting the job down";
}

}  // namespace hvd::engine
