// The fixture of the mp tests that drive a real hvdagent through hvdrun's job commands
// (hvdrun_jobs_test, hvdrun_orchestration_test): an agent on 127.0.0.1 with its own key and state
// directory, and helpers for hvdrun submit, status and logs against it. Header-only; the test
// target defines HVDRUN_PATH and HVDAGENT_PATH.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "common/agent_process.h"
#include "common/test_support.h"

#ifndef HVDRUN_PATH
#error "HVDRUN_PATH must name the hvdrun executable"
#endif

namespace hvd::test::agent_process {

using hvd::test::ProcessOptions;
using hvd::test::ProcessResult;
using hvd::test::TempDir;

class AgentJobsTest : public ::testing::Test {
 protected:
  void SetUp() override { startAgent(); }

  // What the agent's environment adds (HVD_FAKE_GPUS=4, say) and its extra options.
  virtual std::vector<std::string> agentEnv() const { return {}; }
  virtual std::vector<std::string> agentArgs() const { return {}; }

  void startAgent() {
    agent_.emplace(dir_.path(), agentArgs(), agentEnv());
    ASSERT_GT(agent_->port, 0) << agent_->agent->output();
  }

  // hvdrun COMMAND --agent-port P --key-file K ARGS...
  std::vector<std::string> argv(const std::string& command, std::vector<std::string> args) const {
    std::vector<std::string> a = {HVDRUN_PATH,    command,
                                  "--agent-port", std::to_string(agent_->port),
                                  "--key-file",   agent_->keyFile.string()};
    a.insert(a.end(), args.begin(), args.end());
    return a;
  }
  static ProcessOptions options() {
    ProcessOptions o;
    o.stdinDevNull = true;
    return o;
  }
  ProcessResult hvdrun(const std::string& command, std::vector<std::string> args,
                       std::chrono::milliseconds timeout = 30s) const {
    return hvd::test::runProcess(argv(command, std::move(args)), timeout, options());
  }

  // `hvdrun submit` of `np` ranks of `sh -c script`; the job id.
  std::string submit(int np, const std::string& script, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"-np", std::to_string(np), "-x",
                                     "DIR=" + dir_.path().string()};
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {"--", "/bin/sh", "-c", script});
    const ProcessResult r = hvdrun("submit", args);
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    std::smatch m;
    const std::regex id("^(hvd-[0-9a-f]{6})\n$");
    EXPECT_TRUE(std::regex_match(r.out, m, id)) << "stdout holds the id alone: '" << r.out << "'";
    return m.size() > 1 ? m[1].str() : "";
  }

  std::string status(const std::string& id) {
    const ProcessResult r = hvdrun("status", {id});
    EXPECT_EQ(r.status, 0) << r.err;
    return r.out;
  }
  // Polls `hvdrun status` until the job is in a final state; its text.
  std::string waitEnded(const std::string& id, std::chrono::milliseconds timeout = 30s) {
    std::string text;
    waitUntil(
        [&] {
          text = status(id);
          for (const char* s : {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "LOST"}) {
            if (text.find(std::string(": ") + s + "\n") != std::string::npos) return true;
          }
          return false;
        },
        timeout);
    return text;
  }
  // The pids in the RANK table of a status text.
  static std::vector<pid_t> rankPids(const std::string& statusText) {
    std::vector<pid_t> pids;
    const std::regex row(R"(\n  (\d+) +(\S+) +(\d+) +)");
    for (auto it = std::sregex_iterator(statusText.begin(), statusText.end(), row);
         it != std::sregex_iterator(); ++it) {
      pids.push_back(std::stoi((*it)[3].str()));
    }
    return pids;
  }
  // The pids the ranks of `kStartsAChild` print ("child PID"), once `count` of them are logged
  // (within 20 s; fewer if they never are).
  std::vector<pid_t> childPids(const std::string& id, size_t count) {
    std::vector<pid_t> pids;
    for (const std::string& pid : logCaptures(id, R"(child (\d+))", count)) {
      pids.push_back(std::stoi(pid));
    }
    return pids;
  }
  // The first group of every match of `pattern` in the job's logs, once there are `count` of
  // them (within 20 s; fewer if they never are).
  std::vector<std::string> logCaptures(const std::string& id, const std::string& pattern,
                                       size_t count) {
    std::vector<std::string> found;
    const std::regex re(pattern);
    waitUntil(
        [&] {
          const ProcessResult logs = hvdrun("logs", {id});
          found.clear();
          for (auto it = std::sregex_iterator(logs.out.begin(), logs.out.end(), re);
               it != std::sregex_iterator(); ++it) {
            found.push_back((*it)[1].str());
          }
          return found.size() >= count;
        },
        20s);
    return found;
  }
  void touch(const std::string& name) { std::ofstream(dir_.path() / name) << "x"; }

  TempDir dir_;
  std::optional<RunningAgent> agent_;
};

}  // namespace hvd::test::agent_process
