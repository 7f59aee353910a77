// Stall detection (Horovod's stall inspector), as pure logic over the replicated table so it can
// be tested with a fake clock. Rank 0 inspects every cycle the names that some ranks submitted
// and others did not:
// * older than the check time: logged once per op instance ("stalled ops: 'w7' waits on rank 2;
//   ..."), naming the tensors and the missing ranks;
// * older than the shutdown time: the job is to be shut down. Every rank then fails its pending
//   handles with shutdownMessage(), which every rank builds from its own replicated table (the
//   same names and missing ranks everywhere).
// A check time of 0 disables both; a shutdown time of 0 only the shutdown.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace hvd::engine {

using Clock = std::chrono::steady_clock;

struct WaitingOp {
  std::string name;
  std::vector<int> missingRanks;
  Clock::time_point firstSeen;  // when this rank first saw a request for it
};

class StallInspector {
 public:
  StallInspector(std::chrono::milliseconds checkTime, std::chrono::milliseconds shutdownTime)
      : checkTime_(checkTime), shutdownTime_(shutdownTime) {}

  bool enabled() const { return checkTime_.count() > 0; }

  struct Verdict {
    std::string warning;    // "" when nothing new to report
    bool shutdown = false;  // some op waited longer than the shutdown time
  };
  // `waiting`: the incomplete entries of the table, in table order.
  Verdict inspect(const std::vector<WaitingOp>& waiting, Clock::time_point now);

  // "'w' waits on rank 2; 'v' waits on ranks 1,2" (table order).
  static std::string describe(const std::vector<WaitingOp>& waiting);
  // The error every pending handle gets at a stall shutdown.
  std::string shutdownMessage(const std::vector<WaitingOp>& waiting) const;

 private:
  std::chrono::milliseconds checkTime_;
  std::chrono::milliseconds shutdownTime_;
  // Op instances already reported: name -> firstSeen of the instance.
  std::map<std::string, Clock::time_point> reported_;
};

}  // namespace hvd::engine
