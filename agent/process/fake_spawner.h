// A Spawner for unit tests of the layers above (job coordinator, output forwarding, exit-code
// mapping): it starts nothing, records what it was asked to start, and lets the test play the
// ranks' part: emit output lines and exits, and see the stop requests.
//
// Differences from the real one: callbacks run synchronously on the thread that calls emit*()
// (not on a supervisor thread), and a stop does not end the ranks unless the test asks for that
// with exitOnStop (then every rank still running "dies" of the stop signal at once, as an
// obedient worker would).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agent/process/spawner.h"

namespace hvd::agent::process {

// The test's handle on one fake group. It stays valid after the group itself is destroyed
// (destroyed() then says so, and emit*() does nothing).
class FakeGroupControl {
 public:
  struct StopRequest {
    int signal;
    std::chrono::milliseconds grace;
    bool wait;
  };

  // Delivers a line or an exit to the group's sink / callback, as the real supervisor would.
  // An exit is reported once per rank; a second one for the same rank is ignored.
  void emitLine(int rank, Stream which, std::string_view text);
  void emitExit(int rank, ExitStatus status);

  std::vector<SpawnSpec> specs() const;
  std::vector<StopRequest> stopRequests() const;
  bool destroyed() const;

 private:
  friend class FakeProcessGroup;
  friend class FakeSpawner;

  mutable std::mutex mu_;
  std::vector<SpawnSpec> specs_;
  OutputSink* sink_ = nullptr;
  ExitCallback onExit_;
  std::vector<std::optional<ExitStatus>> statuses_;
  std::vector<StopRequest> stops_;
  bool exitOnStop_ = true;
  bool destroyed_ = false;
  pid_t firstPid_ = 0;
};

class FakeSpawner : public Spawner {
 public:
  SpawnResult spawn(const std::vector<SpawnSpec>& ranks, OutputSink* sink,
                    ExitCallback onExit) override;

  // The next spawn() fails with this message (once) instead of starting anything.
  void failNextSpawn(std::string error);
  // Whether a stop ends the running ranks with the stop signal (default true).
  void setExitOnStop(bool exitOnStop);

  // Every successful spawn, in order.
  size_t groupCount() const;
  std::shared_ptr<FakeGroupControl> group(size_t index) const;

 private:
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<FakeGroupControl>> groups_;
  std::string nextError_;
  bool exitOnStop_ = true;
  pid_t nextPid_ = 1000;  // fake pids, unique per spawner, never real processes
};

}  // namespace hvd::agent::process
