#include "agent/elastic/script_discovery.h"

#include <unistd.h>

#include <csignal>
#include <mutex>
#include <string_view>

#include "agent/process/posix_spawner.h"
#include "hvd/error.hpp"

namespace hvd::agent::elastic {
namespace {

// A stderr line quoted in an error is cut here: it is there to hint at the cause, not to carry
// a traceback.
constexpr size_t kMaxQuotedBytes = 300;

bool isBlank(std::string_view s) {
  return s.find_first_not_of(" \t\r\n\f\v") == std::string_view::npos;
}

// Collects the script's stdout (bounded) and its last non-blank stderr line. Called from the
// process group's supervisor thread while discover() waits, hence the lock.
class Capture : public process::OutputSink {
 public:
  void line(int, process::Stream which, std::string_view text) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (which == process::Stream::kStdout) {
      if (stdout_.size() + text.size() + 1 > ScriptDiscovery::kMaxOutputBytes) {
        overflow_ = true;
        return;
      }
      stdout_.append(text);
      stdout_ += '\n';
    } else if (!isBlank(text)) {
      lastStderr_ = std::string(text.substr(0, kMaxQuotedBytes));
    }
  }

  std::string stdoutText() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stdout_;
  }
  bool overflow() const {
    std::lock_guard<std::mutex> lock(mu_);
    return overflow_;
  }
  // "; its last stderr line: '...'" or "; it wrote nothing on stderr".
  std::string stderrHint() const {
    std::lock_guard<std::mutex> lock(mu_);
    if (lastStderr_.empty()) return "; it wrote nothing on stderr";
    return "; its last stderr line: '" + lastStderr_ + "'";
  }

 private:
  mutable std::mutex mu_;
  std::string stdout_;
  std::string lastStderr_;
  bool overflow_ = false;
};

std::vector<std::string> ownEnvironment() {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) env.emplace_back(*e);
  return env;
}

}  // namespace

ScriptDiscovery::ScriptDiscovery(std::string script, int defaultSlots,
                                 std::chrono::milliseconds timeout,
                                 std::optional<std::vector<std::string>> env, std::string cwd)
    : script_(std::move(script)),
      defaultSlots_(defaultSlots),
      timeout_(timeout),
      env_(std::move(env)),
      cwd_(std::move(cwd)) {
  if (isBlank(script_)) {
    throw InvalidArgumentError("--host-discovery-script is empty; expected a command to run");
  }
  if (defaultSlots_ < 1) {
    throw InvalidArgumentError("discovery script '" + script_ + "': default slots " +
                               std::to_string(defaultSlots_) + "; expected at least 1");
  }
  if (timeout_.count() <= 0) {
    throw InvalidArgumentError("discovery script '" + script_ + "': timeout " +
                               std::to_string(timeout_.count()) + " ms; expected more than 0");
  }
}

std::vector<DiscoveredHost> ScriptDiscovery::discover() {
  const std::string what = "discovery script '" + script_ + "'";
  Capture capture;  // declared before the group: it must outlive it
  process::PosixSpawner spawner;
  process::SpawnSpec spec{{"/bin/sh", "-c", script_}, env_ ? *env_ : ownEnvironment(), cwd_};
  process::SpawnResult started = spawner.spawn({spec}, &capture, {});
  if (!started.ok()) throw BackendError(what + " could not be started: " + started.error);
  if (!started.group->waitAll(timeout_)) {
    started.group->stop(SIGKILL, std::chrono::milliseconds(0));
    throw TimeoutError(what + " did not finish within " + std::to_string(timeout_.count()) +
                       " ms and was killed" + capture.stderrHint());
  }
  const process::ExitStatus status =
      started.group->exitStatus(0).value_or(process::ExitStatus{0, SIGKILL});
  started.group.reset();  // nothing more reaches the capture from here on
  if (!status.success()) {
    throw BackendError(what + " failed: " + status.describe() + capture.stderrHint());
  }
  if (capture.overflow()) {
    throw InvalidArgumentError(what + " printed more than " +
                               std::to_string(kMaxOutputBytes >> 20) +
                               " MiB on stdout; expected one HOST[:SLOTS] line per host");
  }
  try {
    return parseDiscoveryOutput(capture.stdoutText(), defaultSlots_);
  } catch (const InvalidArgumentError& e) {
    throw InvalidArgumentError(what + " printed output that is not a host list: " + e.what());
  }
}

}  // namespace hvd::agent::elastic
