// Elastic host discovery (agent/elastic): the "host[:slots]" lines a discovery script prints,
// fixed host lists, and real scripts run with a deadline.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>

#include "agent/elastic/discovery.h"
#include "agent/elastic/script_discovery.h"
#include "common/test_support.h"
#include "hvd/error.hpp"

namespace hvd::agent::elastic {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

// The message of the InvalidArgumentError that parsing `text` throws ("" if none).
std::string parseError(const std::string& text, int defaultSlots = 1) {
  try {
    parseDiscoveryOutput(text, defaultSlots);
  } catch (const InvalidArgumentError& e) {
    return e.what();
  }
  return "";
}

TEST(ParseDiscoveryOutput, HostsInLineOrderWithDefaultSlots) {
  EXPECT_THAT(parseDiscoveryOutput("node2:4\nnode1\n  [fe80::1]:2  \n\n10.0.0.5:1\n\t[::1]\n", 3),
              ElementsAre(DiscoveredHost{"node2", 4}, DiscoveredHost{"node1", 3},
                          DiscoveredHost{"fe80::1", 2}, DiscoveredHost{"10.0.0.5", 1},
                          DiscoveredHost{"::1", 3}));
}

TEST(ParseDiscoveryOutput, CarriageReturnsAndSpacesAroundTheColonAreStripped) {
  EXPECT_THAT(parseDiscoveryOutput("a : 2\r\nb\r\n", 1),
              ElementsAre(DiscoveredHost{"a", 2}, DiscoveredHost{"b", 1}));
}

TEST(ParseDiscoveryOutput, EmptyOutputMeansNoHostIsAvailable) {
  EXPECT_TRUE(parseDiscoveryOutput("", 1).empty());
  EXPECT_TRUE(parseDiscoveryOutput("\n  \n\t\n", 1).empty());
}

TEST(ParseDiscoveryOutput, ARepeatedHostWithTheSameSlotsCountsOnceAsInHorovodsSet) {
  EXPECT_THAT(parseDiscoveryOutput("a:2\nb\na:2\nA:2\nb:5\n", 5),
              ElementsAre(DiscoveredHost{"a", 2}, DiscoveredHost{"b", 5}));
}

TEST(ParseDiscoveryOutput, AHostWithZeroSlotsIsLeftOut) {
  EXPECT_THAT(parseDiscoveryOutput("a:0\nb:1\n", 1), ElementsAre(DiscoveredHost{"b", 1}));
}

TEST(ParseDiscoveryOutput, EachBadLineIsNamedWithWhatWasExpected) {
  EXPECT_EQ(parseError("ok\nnode1:x\n"),
            "line 2: 'node1:x' has a slot count 'x' that is not a whole number >= 0 (expected "
            "HOST or HOST:SLOTS per line, e.g. node1:4)");
  EXPECT_THAT(parseError("node1:-1"), HasSubstr("line 1: 'node1:-1' has a slot count '-1'"));
  EXPECT_THAT(parseError("node1:"), HasSubstr("line 1: 'node1:' has no slot count after ':'"));
  EXPECT_THAT(parseError("\n:4"), HasSubstr("line 2: ':4' has an empty host name"));
  EXPECT_THAT(parseError("a:2\n\na:3"),
              HasSubstr("line 3: 'a:3' gives host 'a' 3 slots, but line 1 gave it 2"));
  EXPECT_THAT(parseError("a:2\nA"), HasSubstr("line 2: 'A' gives host 'A' 1 slots, but line 1"));
  EXPECT_THAT(parseError("fe80::1:2"), HasSubstr("line 1: 'fe80::1:2' has more than one ':'"));
  EXPECT_THAT(parseError("[::1"), HasSubstr("has no closing ']'"));
  EXPECT_THAT(parseError("[::1]x"), HasSubstr("has unexpected text after ']'"));
  EXPECT_THAT(parseError("node1:9999999"), HasSubstr("above the limit of 1000000 per host"));
  EXPECT_THAT(parseError("hello world"), HasSubstr("line 1: 'hello world' "));
  EXPECT_THAT(parseError("bad-:2"), HasSubstr("line 1: 'bad-:2' has a label 'bad-'"));
  EXPECT_THAT(parseError("a", 0), HasSubstr("default slots per discovered host is 0"));
}

TEST(FixedHosts, GivesItsListAndRefusesDuplicatesAndEmptyHosts) {
  FixedHosts fixed({{"a", 2}, {"b", 1}});
  EXPECT_THAT(fixed.discover(), ElementsAre(DiscoveredHost{"a", 2}, DiscoveredHost{"b", 1}));
  EXPECT_THROW(FixedHosts({{"a", 2}, {"A", 1}}), InvalidArgumentError);
  EXPECT_THROW(FixedHosts({{"a", 0}}), InvalidArgumentError);
}

// Scripts written to a fresh directory, executable.
struct ScriptDiscoveryTest : ::testing::Test {
  test::TempDir dir{"hvd-elastic"};

  std::string script(const std::string& name, const std::string& body) {
    const std::string path = dir.file(name);
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    ::chmod(path.c_str(), 0755);
    return path;
  }

  // The hvd::Error that discover() throws, as "kind: message" ("" if none).
  static std::string failure(ScriptDiscovery& discovery) {
    try {
      discovery.discover();
    } catch (const Error& e) {
      return std::string(errorKindName(e.kind())) + ": " + e.what();
    }
    return "";
  }
};

TEST_F(ScriptDiscoveryTest, ReadsTheHostsTheScriptPrints) {
  ScriptDiscovery discovery(script("ok.sh", "echo h1:2; echo h2; echo diagnostics >&2"), 4, 10s);
  EXPECT_THAT(discovery.discover(), ElementsAre(DiscoveredHost{"h1", 2}, DiscoveredHost{"h2", 4}));
  // Every call runs the script again.
  EXPECT_THAT(discovery.discover(), ElementsAre(DiscoveredHost{"h1", 2}, DiscoveredHost{"h2", 4}));
}

TEST_F(ScriptDiscoveryTest, TheValueIsAShellCommandAsInHorovod) {
  // Arguments, and a path relative to the given working directory.
  script("args.sh", "echo \"$1:$2\"");
  ScriptDiscovery discovery("./args.sh node7 3", 1, 10s, std::nullopt, dir.path().string());
  EXPECT_THAT(discovery.discover(), ElementsAre(DiscoveredHost{"node7", 3}));
}

TEST_F(ScriptDiscoveryTest, RunsWithTheGivenEnvironment) {
  ScriptDiscovery discovery(script("env.sh", "echo \"$HOSTS_FROM_ENV\""), 1, 10s,
                            std::vector<std::string>{"HOSTS_FROM_ENV=x1:5", "PATH=/usr/bin:/bin"});
  EXPECT_THAT(discovery.discover(), ElementsAre(DiscoveredHost{"x1", 5}));
}

TEST_F(ScriptDiscoveryTest, ANonZeroExitNamesTheScriptCodeAndLastStderrLine) {
  const std::string path =
      script("fail.sh", "echo h1; echo first >&2; echo 'last words' >&2; exit 3");
  ScriptDiscovery discovery(path, 1, 10s);
  EXPECT_EQ(failure(discovery), "backend error: discovery script '" + path +
                                    "' failed: exit code 3; its last stderr line: 'last words'");
}

TEST_F(ScriptDiscoveryTest, DeathBySignalAndAMissingScriptAreFailures) {
  // The script runs under /bin/sh, which reports its death as a shell does: 128 + 9.
  ScriptDiscovery killed(script("killed.sh", "kill -9 $$"), 1, 10s);
  EXPECT_THAT(failure(killed), HasSubstr("failed: exit code 137"));
  // The shell itself killed: the signal.
  ScriptDiscovery shellKilled("kill -9 $$", 1, 10s);
  EXPECT_EQ(failure(shellKilled),
            "backend error: discovery script 'kill -9 $$' failed: signal 9 (Killed); it wrote "
            "nothing on stderr");

  ScriptDiscovery missing(dir.file("missing.sh"), 1, 10s);
  const std::string error = failure(missing);
  EXPECT_THAT(error, HasSubstr("backend error: discovery script '" + dir.file("missing.sh") +
                               "' failed: exit code 127; its last stderr line: '"));
  EXPECT_THAT(error, HasSubstr("not found"));
}

TEST_F(ScriptDiscoveryTest, AScriptPastItsTimeoutIsKilled) {
  ScriptDiscovery discovery(script("slow.sh", "echo waiting >&2; sleep 30; echo h1"), 1, 300ms);
  const auto start = std::chrono::steady_clock::now();
  const std::string error = failure(discovery);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_THAT(error, HasSubstr("timeout: discovery script '"));
  EXPECT_THAT(error,
              HasSubstr("' did not finish within 300 ms and was killed; its last stderr line: "
                        "'waiting'"));
}

TEST_F(ScriptDiscoveryTest, WhatTheScriptLeftRunningDoesNotHoldDiscoveryUp) {
  ScriptDiscovery discovery(script("background.sh", "sleep 30 & echo h1"), 1, 10s);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THAT(discovery.discover(), ElementsAre(DiscoveredHost{"h1", 1}));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST_F(ScriptDiscoveryTest, GarbageOutputNamesTheLine) {
  const std::string path = script("garbage.sh", "echo h1; echo 'Traceback (most recent call'");
  ScriptDiscovery discovery(path, 1, 10s);
  EXPECT_THAT(failure(discovery),
              HasSubstr("invalid argument: discovery script '" + path +
                        "' printed output that is not a host list: line 2: 'Traceback (most "
                        "recent call' "));
}

TEST_F(ScriptDiscoveryTest, OutputBeyondTheBoundIsRefused) {
  ScriptDiscovery discovery(script("flood.sh", "seq 1 300000 | sed 's/^/host/'"), 1, 30s);
  EXPECT_THAT(failure(discovery), HasSubstr("printed more than 1 MiB on stdout"));
}

TEST_F(ScriptDiscoveryTest, BadSettingsAreRefused) {
  EXPECT_THROW(ScriptDiscovery(" ", 1, 1s), InvalidArgumentError);
  EXPECT_THROW(ScriptDiscovery("x", 0, 1s), InvalidArgumentError);
  EXPECT_THROW(ScriptDiscovery("x", 1, 0s), InvalidArgumentError);
}

}  // namespace
}  // namespace hvd::agent::elastic
