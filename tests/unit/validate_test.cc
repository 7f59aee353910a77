// The checks at hvdrun's and hvdagent's front door (agent/common/cli_checks.h,
// contract/names.h) and the guard of every thread body (agent/common/thread_guard.h): which
// values each refuses, in which words, and that an escaped exception is logged and answered
// instead of reaching std::terminate.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <sstream>
#include <stdexcept>
#include <string>

#include "agent/common/cli_checks.h"
#include "agent/common/thread_guard.h"
#include "common/captured_log.h"
#include "contract/names.h"
#include "hvd_support/logging.h"

namespace hvd {
namespace {

using ::testing::HasSubstr;

// What CLI11 says for `--opt value` with `check` on a double option: "" when it parsed.
std::string parseError(const CLI::Validator& check, const std::string& value) {
  CLI::App app("test", "test");
  double target = 0;
  app.add_option("--opt", target, "an option")->check(check);
  std::vector<std::string> args = {value, "--opt"};  // CLI11 takes them in reverse order
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

// --- agent/common/cli_checks.h --------------------------------------------------------------

TEST(CliChecks, NonEmptyRefusesEmptyAndBlankValuesQuotingThem) {
  CLI::App app("test", "test");
  std::string path;
  app.add_option("--path", path, "a path")->check(agent::common::nonEmpty());
  for (const std::string bad : {"", "  ", "\t"}) {
    std::vector<std::string> args = {bad, "--path"};
    try {
      app.parse(args);
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const CLI::ValidationError& e) {
      EXPECT_EQ(std::string(e.what()), "--path: '" + bad + "' is empty; expected a value");
    }
    app.clear();
  }
  std::vector<std::string> args = {"/tmp/x", "--path"};
  app.parse(args);
  EXPECT_EQ(path, "/tmp/x");
}

TEST(CliChecks, FiniteRangeRefusesNanInfinitiesJunkAndOutOfRange) {
  const CLI::Validator seconds = agent::common::finiteRange(0, 86400, "seconds");
  const std::string expected = " (expected seconds from 0 to 86400)";
  EXPECT_EQ(parseError(seconds, "nan"), "--opt: 'nan' is not a number" + expected);
  EXPECT_EQ(parseError(seconds, "NaN"), "--opt: 'NaN' is not a number" + expected);
  EXPECT_EQ(parseError(seconds, "inf"), "--opt: 'inf' is not finite" + expected);
  EXPECT_EQ(parseError(seconds, "-inf"), "--opt: '-inf' is not finite" + expected);
  EXPECT_EQ(parseError(seconds, "1e999"), "--opt: '1e999' is not finite" + expected);
  EXPECT_EQ(parseError(seconds, "5s"), "--opt: '5s' is not a number" + expected);
  EXPECT_EQ(parseError(seconds, ""), "--opt: '' is empty" + expected);
  EXPECT_EQ(parseError(seconds, "-1"), "--opt: '-1' is out of range" + expected);
  EXPECT_EQ(parseError(seconds, "86400.5"), "--opt: '86400.5' is out of range" + expected);
  for (const char* good : {"0", "2.5", "86400", "1e3"}) {
    EXPECT_EQ(parseError(seconds, good), "") << good;
  }
  EXPECT_EQ(agent::common::finiteRangeProblem("0.0005", 0.001, 1, "seconds"),
            "'0.0005' is out of range (expected seconds from 0.001 to 1)");
}

TEST(CliChecks, IntegerRangeRefusesFractionsJunkOverflowAndOutOfRange) {
  using agent::common::integerRangeProblem;
  const std::string expected = " (expected a whole number from 1 to 65535)";
  EXPECT_EQ(integerRangeProblem("1.5", 1, 65535), "'1.5' is not a whole number" + expected);
  EXPECT_EQ(integerRangeProblem("80x", 1, 65535), "'80x' is not a whole number" + expected);
  EXPECT_EQ(integerRangeProblem("-", 1, 65535), "'-' is not a whole number" + expected);
  EXPECT_EQ(integerRangeProblem("", 1, 65535), "'' is empty" + expected);
  EXPECT_EQ(integerRangeProblem("0", 1, 65535), "'0' is out of range" + expected);
  EXPECT_EQ(integerRangeProblem("99999999999999999999", 1, 65535),
            "'99999999999999999999' is out of range" + expected);
  EXPECT_EQ(integerRangeProblem("-3", -5, 5), "");
  EXPECT_EQ(integerRangeProblem("65535", 1, 65535), "");
}

// --- agent/common/thread_guard.h ------------------------------------------------------------

// What the thread guard logs (the programs' "thread" subsystem).
class CapturedLog : public test::CapturedLog {
 public:
  CapturedLog() : test::CapturedLog(logging::program("thread")) {}
};

TEST(ThreadGuard, AnEscapedExceptionIsLoggedWithTheRoleAndAnswered) {
  CapturedLog log;
  std::string answered;
  agent::common::runGuarded(
      "stream reader", [] { throw std::runtime_error("bad frame"); },
      [&](const std::string& what) { answered = what; });
  EXPECT_EQ(answered, "bad frame");
  EXPECT_THAT(log.text(), HasSubstr("stream reader: internal error: bad frame"));
}

TEST(ThreadGuard, NonStandardExceptionsAndAFailingRecoveryDoNotEscape) {
  CapturedLog log;
  std::string answered;
  agent::common::runGuarded(
      "watcher", [] { throw 42; },
      [&](const std::string& what) {
        answered = what;
        throw std::logic_error("recovery failed too");
      });
  EXPECT_EQ(answered, "unknown exception");
  const std::string text = log.text();
  EXPECT_THAT(text, HasSubstr("watcher: internal error: unknown exception"));
  EXPECT_THAT(text, HasSubstr("watcher: internal error while recovering: recovery failed too"));
}

TEST(ThreadGuard, ABodyThatReturnsRunsNoRecovery) {
  bool ran = false, answered = false;
  agent::common::runGuarded(
      "quiet", [&] { ran = true; }, [&](const std::string&) { answered = true; });
  EXPECT_TRUE(ran);
  EXPECT_FALSE(answered);
}

// --- contract/names.h --------------------------------------------------------------------

TEST(EnvNames, PosixPortableNamesOnly) {
  for (const char* good : {"A", "_", "_x", "PATH", "a1_B", "HVD_START_TIMEOUT"}) {
    EXPECT_TRUE(contract::isEnvName(good)) << good;
  }
  for (const char* bad : {"", "1A", "A-B", "A B", "A=B", "A.B", "\xc3\xa4", "$A"}) {
    EXPECT_FALSE(contract::isEnvName(bad)) << bad;
  }
}

TEST(EnvNames, SecretsAreRecognisedByTheirNamesButNotTheWorkingDirectory) {
  for (const char* secret :
       {"GITHUB_TOKEN", "github_token", "AWS_SECRET_ACCESS_KEY", "PGPASSWORD", "MYSQL_PWD",
        "REDIS_PASS", "SMTP_PASSWD", "GPG_PASSPHRASE", "SSH_PRIVATE_KEY", "API_KEY", "APIKEY",
        "KEY", "DOCKER_AUTH_CONFIG", "NPM_AUTH", "KRB5CCNAME", "GOOGLE_APPLICATION_CREDENTIALS",
        "HVD_STORE_TOKEN", "SESSION_COOKIE"}) {
    EXPECT_TRUE(contract::isSecretEnvName(secret)) << secret;
  }
  for (const char* plain : {"PWD", "OLDPWD", "PATH", "HOME", "KEYBOARD", "PASSIVE_MODE", "AUTHOR",
                            "CUDA_VISIBLE_DEVICES", "LANG"}) {
    EXPECT_FALSE(contract::isSecretEnvName(plain)) << plain;
  }
}

TEST(HostNames, Rfc1123NamesAndAddressLiteralsAreAccepted) {
  using contract::hostNameProblem;
  const std::string label63(63, 'a');
  // 4 labels of 63 plus 3 dots: 255 characters; with one label shorter by 2, exactly 253.
  const std::string name253 = label63 + "." + label63 + "." + label63 + "." + std::string(61, 'a');
  ASSERT_EQ(name253.size(), 253u);
  for (const std::string& good :
       {std::string("node1"), std::string("node-1.cluster_a.example"), std::string("node1."),
        std::string("1node"), std::string("10.0.0.1"), label63, name253}) {
    EXPECT_EQ(hostNameProblem(good, false), "") << good;
  }
  for (const char* good : {"::1", "fe80::1", "fe80::2%eth0", "2001:db8::7", "10.0.0.1"}) {
    EXPECT_EQ(hostNameProblem(good, true), "") << good;
  }
}

TEST(HostNames, WhatNoResolverAcceptsIsRefusedSayingWhy) {
  using contract::hostNameProblem;
  EXPECT_EQ(hostNameProblem("-node", false), "has a label '-node' that starts with '-'");
  EXPECT_EQ(hostNameProblem("node-.example", false), "has a label 'node-' that ends with '-'");
  EXPECT_EQ(hostNameProblem("a..b", false),
            "has an empty label (two dots, or a leading dot) in its host name");
  EXPECT_EQ(hostNameProblem(".a", false),
            "has an empty label (two dots, or a leading dot) in its host name");
  EXPECT_EQ(hostNameProblem(std::string(64, 'a'), false),
            "has a label of 64 characters (at most 63)");
  const std::string label63(63, 'a');
  const std::string name254 = label63 + "." + label63 + "." + label63 + "." + std::string(62, 'a');
  EXPECT_EQ(hostNameProblem(name254, false), "has a host name of 254 characters (at most 253)");
  EXPECT_THAT(hostNameProblem("h!", false), HasSubstr("has the character '!' in its host name"));
  for (const char* numeric : {"999.1.1.1", "10.0.0", "123", "1.2.3.4.5"}) {
    EXPECT_EQ(hostNameProblem(numeric, false),
              "is neither a host name nor an IPv4 address of four numbers 0-255")
        << numeric;
  }
  EXPECT_EQ(hostNameProblem("zz::1", true),
            "has 'zz::1' in brackets, which is not an IPv6 address");
  EXPECT_EQ(hostNameProblem("fe80::1%", true), "has an empty zone id after '%'");
  EXPECT_EQ(hostNameProblem("fe80::1%e/0", true), "has the character '/' in its zone id");
  EXPECT_EQ(hostNameProblem("", false), "has an empty host name");
}

}  // namespace
}  // namespace hvd
