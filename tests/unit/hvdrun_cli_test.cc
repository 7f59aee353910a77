// hvdrun's command line (launcher/cli.h) and its output renderer (launcher/output.h): the pure
// decisions hvdrun makes before anything runs, and how rank output reaches the user. The host
// checks that live in hvdrun's main() (remote host, two names for this machine) are pinned down
// by running the hvdrun binary itself, which refuses such jobs before starting anything.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "hvd/error.hpp"
#include "launcher/cli.h"
#include "launcher/output.h"

namespace hvd::launcher {
namespace {

using agent::process::Stream;

struct Parsed {
  std::optional<int> code;
  Options options;
  std::string stderrText;
};

Parsed parse(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  Parsed p;
  testing::internal::CaptureStderr();
  p.code = parseCommandLine(static_cast<int>(argv.size()), argv.data(), &p.options);
  p.stderrText = testing::internal::GetCapturedStderr();
  return p;
}

std::string ownHostname() {
  char name[256] = {};
  EXPECT_EQ(::gethostname(name, sizeof(name) - 1), 0);
  return name;
}

std::string readFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs the hvdrun binary with `args` (shell words), returns its exit status and combined output.
std::pair<int, std::string> runHvdrun(const std::string& args) {
  const std::string cmd = std::string(HVDRUN_PATH) + " " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  EXPECT_NE(p, nullptr);
  std::string out;
  char buf[512];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// --- parseSignal ---------------------------------------------------------------------------

TEST(HvdrunCliSignal, NamesWithAndWithoutSigPrefixAnyCase) {
  EXPECT_EQ(parseSignal("TERM"), SIGTERM);
  EXPECT_EQ(parseSignal("SIGTERM"), SIGTERM);
  EXPECT_EQ(parseSignal("sigterm"), SIGTERM);
  EXPECT_EQ(parseSignal("INT"), SIGINT);
  EXPECT_EQ(parseSignal("SigInt"), SIGINT);
  EXPECT_EQ(parseSignal("KILL"), SIGKILL);
  EXPECT_EQ(parseSignal("USR1"), SIGUSR1);
}

TEST(HvdrunCliSignal, DecimalNumbers) {
  EXPECT_EQ(parseSignal("15"), 15);
  EXPECT_EQ(parseSignal("2"), 2);
  EXPECT_EQ(parseSignal("9"), 9);
}

TEST(HvdrunCliSignal, UnknownNamesAndOutOfRangeNumbersAreRejected) {
  EXPECT_EQ(parseSignal(""), std::nullopt);
  EXPECT_EQ(parseSignal("TERMINATE"), std::nullopt);
  EXPECT_EQ(parseSignal("SIG"), std::nullopt);
  EXPECT_EQ(parseSignal("SIGSIGTERM"), std::nullopt);
  EXPECT_EQ(parseSignal("0"), std::nullopt);
  EXPECT_EQ(parseSignal("999"), std::nullopt);
  EXPECT_EQ(parseSignal("-15"), std::nullopt);
  EXPECT_EQ(parseSignal("15x"), std::nullopt);
}

TEST(HvdrunCliSignal, BadStopSignalIsAUsageErrorNamingIt) {
  Parsed p = parse({"hvdrun", "-np", "2", "--stop-signal", "BOGUS", "prog"});
  EXPECT_EQ(p.code, 2);
  EXPECT_NE(p.stderrText.find("--stop-signal: unknown signal 'BOGUS'"), std::string::npos)
      << p.stderrText;
}

TEST(HvdrunCliSignal, StopSignalOptionIsKeptAsGiven) {
  Parsed p = parse({"hvdrun", "-np", "1", "--stop-signal", "SIGINT", "prog"});
  EXPECT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(p.options.stopSignal, "SIGINT");
  EXPECT_EQ(parseSignal(p.options.stopSignal), SIGINT);
}

// --- isLocalHost / resolveHosts ------------------------------------------------------------

TEST(HvdrunCliHosts, LoopbackNamesAndOwnHostnameAreLocal) {
  EXPECT_TRUE(isLocalHost("localhost", "node-a"));
  EXPECT_TRUE(isLocalHost("127.0.0.1", "node-a"));
  EXPECT_TRUE(isLocalHost("::1", "node-a"));
  EXPECT_TRUE(isLocalHost("node-a", "node-a"));
  const std::string self = ownHostname();
  EXPECT_TRUE(isLocalHost(self, self));
}

TEST(HvdrunCliHosts, OtherNamesAreRemote) {
  EXPECT_FALSE(isLocalHost("node-b", "node-a"));
  EXPECT_FALSE(isLocalHost("10.0.0.2", "node-a"));
  EXPECT_FALSE(isLocalHost("LOCALHOST.example", "node-a"));
  // An unknown own hostname must not make the empty host name local.
  EXPECT_FALSE(isLocalHost("", ""));
}

TEST(HvdrunCliHosts, DefaultIsLocalhostWithNpSlots) {
  Options o;
  o.np = 3;
  EXPECT_EQ(resolveHosts(o), (std::vector<HostSlots>{{"localhost", 3}}));
}

TEST(HvdrunCliHosts, HostListGivesHostAndSlots) {
  Options o;
  o.np = 4;
  o.hostList = "localhost:4";
  EXPECT_EQ(resolveHosts(o), (std::vector<HostSlots>{{"localhost", 4}}));
}

TEST(HvdrunCliHosts, HostListAndHostfileTogetherAreRefused) {
  Options o;
  o.np = 1;
  o.hostList = "localhost:1";
  o.hostfile = "/nonexistent";
  try {
    resolveHosts(o);
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("either -H or --hostfile"), std::string::npos);
  }
}

TEST(HvdrunCliHosts, TwoNamesForThisMachineAreRefusedWithExit2) {
  auto [code, out] = runHvdrun("-H localhost:1,127.0.0.1:1 -np 2 true");
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("'localhost' and '127.0.0.1' are both this machine; list it once with its "
                     "slots"),
            std::string::npos)
      << out;
}

TEST(HvdrunCliHosts, RemoteHostIsRefusedWithExit2NamingIt) {
  auto [code, out] = runHvdrun("-H far-away-node.invalid:2 -np 2 true");
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("remote hosts need hvdagent"), std::string::npos) << out;
  EXPECT_NE(out.find("(host 'far-away-node.invalid')"), std::string::npos) << out;
}

// --- forwardedEnvironment ------------------------------------------------------------------

TEST(HvdrunCliEnvironment, WholeCallerEnvironmentIsForwarded) {
  const std::vector<std::string> caller = {"PATH=/usr/bin", "HOME=/home/u", "EMPTY="};
  EXPECT_EQ(forwardedEnvironment(caller, {}), caller);
}

TEST(HvdrunCliEnvironment, NameValueOverridesInPlaceOrAppends) {
  const std::vector<std::string> caller = {"PATH=/usr/bin", "FOO=old", "HOME=/h"};
  EXPECT_EQ(forwardedEnvironment(caller, {"FOO=new", "BAR=1=2"}),
            (std::vector<std::string>{"PATH=/usr/bin", "FOO=new", "HOME=/h", "BAR=1=2"}));
}

TEST(HvdrunCliEnvironment, LaterExportWins) {
  EXPECT_EQ(forwardedEnvironment({}, {"A=1", "A=2"}), (std::vector<std::string>{"A=2"}));
}

TEST(HvdrunCliEnvironment, BareNameForwardsTheCallersValue) {
  ASSERT_EQ(::setenv("HVD_CLI_TEST_FWD", "forwarded value", 1), 0);
  EXPECT_EQ(forwardedEnvironment({"X=1"}, {"HVD_CLI_TEST_FWD"}),
            (std::vector<std::string>{"X=1", "HVD_CLI_TEST_FWD=forwarded value"}));
  // Already in the caller's environment: the entry stays where it was, not duplicated.
  EXPECT_EQ(forwardedEnvironment({"HVD_CLI_TEST_FWD=forwarded value", "X=1"}, {"HVD_CLI_TEST_FWD"}),
            (std::vector<std::string>{"HVD_CLI_TEST_FWD=forwarded value", "X=1"}));
  ::unsetenv("HVD_CLI_TEST_FWD");
}

TEST(HvdrunCliEnvironment, BareNameThatIsUnsetIsAnErrorNamingIt) {
  ::unsetenv("HVD_CLI_TEST_UNSET");
  try {
    forwardedEnvironment({}, {"HVD_CLI_TEST_UNSET"});
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "-x HVD_CLI_TEST_UNSET: HVD_CLI_TEST_UNSET is not set in hvdrun's environment"),
              std::string::npos)
        << e.what();
  }
}

TEST(HvdrunCliEnvironment, EmptyOrNamelessExportIsAnError) {
  EXPECT_THROW(forwardedEnvironment({}, {""}), InvalidArgumentError);
  try {
    forwardedEnvironment({}, {"=value"});
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("-x '=value': expected NAME[=VALUE]"), std::string::npos)
        << e.what();
  }
}

// --- parseCommandLine ----------------------------------------------------------------------

TEST(HvdrunCliParse, NpRewriteAndProgramArgumentsLeftUntouched) {
  Parsed p = parse({"hvdrun", "-np", "2", "prog", "-np", "5", "--x"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(p.options.np, 2);
  EXPECT_EQ(p.options.command, (std::vector<std::string>{"prog", "-np", "5", "--x"}));
}

TEST(HvdrunCliParse, DoubleDashEndsOptions) {
  Parsed p = parse({"hvdrun", "--np", "3", "--", "-prog", "--np", "1"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(p.options.np, 3);
  EXPECT_EQ(p.options.command, (std::vector<std::string>{"-prog", "--np", "1"}));
}

TEST(HvdrunCliParse, OptionsWithValuesBeforeProgram) {
  Parsed p =
      parse({"hvdrun", "-np", "4", "-H", "localhost:4", "-x", "A=1", "-x", "B", "--grace", "2.5",
             "--output-filename", "/tmp/out", "--no-tag-output", "--oversubscribe", "prog", "arg"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(p.options.np, 4);
  EXPECT_EQ(p.options.hostList, "localhost:4");
  EXPECT_EQ(p.options.exports, (std::vector<std::string>{"A=1", "B"}));
  EXPECT_DOUBLE_EQ(p.options.graceSeconds, 2.5);
  EXPECT_EQ(p.options.outputDir, "/tmp/out");
  EXPECT_FALSE(p.options.tagOutput);
  EXPECT_TRUE(p.options.oversubscribe);
  EXPECT_EQ(p.options.command, (std::vector<std::string>{"prog", "arg"}));
}

TEST(HvdrunCliParse, DefaultsWhenOnlyNpAndProgramGiven) {
  Parsed p = parse({"hvdrun", "-np", "1", "prog"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(p.options.stopSignal, "TERM");
  EXPECT_DOUBLE_EQ(p.options.graceSeconds, 10.0);
  EXPECT_TRUE(p.options.tagOutput);
  EXPECT_FALSE(p.options.oversubscribe);
  EXPECT_TRUE(p.options.hostList.empty());
  EXPECT_TRUE(p.options.exports.empty());
}

TEST(HvdrunCliParse, MissingNpIsAUsageError) {
  Parsed p = parse({"hvdrun", "prog"});
  EXPECT_EQ(p.code, 2);
  EXPECT_NE(p.stderrText.find("np"), std::string::npos) << p.stderrText;
}

TEST(HvdrunCliParse, MissingProgramIsAUsageError) {
  Parsed p = parse({"hvdrun", "-np", "2"});
  EXPECT_EQ(p.code, 2);
  EXPECT_NE(p.stderrText.find("hvdrun: no PROGRAM to run"), std::string::npos) << p.stderrText;
}

TEST(HvdrunCliParse, NpOutOfRangeIsAUsageError) {
  EXPECT_EQ(parse({"hvdrun", "-np", "0", "prog"}).code, 2);
  EXPECT_EQ(parse({"hvdrun", "-np", "two", "prog"}).code, 2);
}

TEST(HvdrunCliParse, UnknownOptionIsAUsageError) {
  Parsed p = parse({"hvdrun", "-np", "2", "--no-such-option", "prog"});
  EXPECT_EQ(p.code, 2);
  EXPECT_NE(p.stderrText.find("--no-such-option"), std::string::npos) << p.stderrText;
}

// --- OutputRenderer ------------------------------------------------------------------------

TEST(HvdrunCliOutputRenderer, TaggedLinesGoToTheMatchingStream) {
  OutputRenderer r(4, /*tagOutput=*/true, "");
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  r.onOutput(3, "localhost", Stream::kStdout, "text");
  r.onOutput(1, "localhost", Stream::kStderr, "oops");
  r.onOutput(0, "localhost", Stream::kStdout, "");
  const std::string err = testing::internal::GetCapturedStderr();
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(out, "[3]<stdout>: text\n[0]<stdout>: \n");
  EXPECT_EQ(err, "[1]<stderr>: oops\n");
}

TEST(HvdrunCliOutputRenderer, UntaggedLinesAreWrittenAsIs) {
  OutputRenderer r(2, /*tagOutput=*/false, "");
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  r.onOutput(1, "localhost", Stream::kStdout, "plain");
  r.onOutput(1, "localhost", Stream::kStderr, "warn");
  const std::string err = testing::internal::GetCapturedStderr();
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(out, "plain\n");
  EXPECT_EQ(err, "warn\n");
}

TEST(HvdrunCliOutputRenderer, OutputFilenameWritesEachRanksUntaggedLines) {
  char tmpl[] = "/tmp/hvdrun_cli_test.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::filesystem::path dir = std::filesystem::path(tmpl) / "out";
  {
    OutputRenderer r(2, /*tagOutput=*/true, dir.string());
    for (int rank : {0, 1}) {
      for (const char* name : {"stdout", "stderr"}) {
        EXPECT_TRUE(std::filesystem::is_regular_file(dir / ("rank." + std::to_string(rank)) / name))
            << rank << " " << name;
      }
    }
    testing::internal::CaptureStdout();
    testing::internal::CaptureStderr();
    r.onOutput(0, "localhost", Stream::kStdout, "a");
    r.onOutput(1, "localhost", Stream::kStderr, "b");
    r.onOutput(0, "localhost", Stream::kStdout, "c");
    r.onOutput(7, "localhost", Stream::kStdout, "out of range");  // terminal only
    const std::string err = testing::internal::GetCapturedStderr();
    const std::string out = testing::internal::GetCapturedStdout();
    EXPECT_EQ(out, "[0]<stdout>: a\n[0]<stdout>: c\n[7]<stdout>: out of range\n");
    EXPECT_EQ(err, "[1]<stderr>: b\n");
  }
  EXPECT_EQ(readFile(dir / "rank.0" / "stdout"), "a\nc\n");
  EXPECT_EQ(readFile(dir / "rank.0" / "stderr"), "");
  EXPECT_EQ(readFile(dir / "rank.1" / "stdout"), "");
  EXPECT_EQ(readFile(dir / "rank.1" / "stderr"), "b\n");
  EXPECT_FALSE(std::filesystem::exists(dir / "rank.2"));
  std::filesystem::remove_all(tmpl);
}

TEST(HvdrunCliOutputRenderer, UncreatableOutputDirIsAnErrorNamingThePath) {
  char tmpl[] = "/tmp/hvdrun_cli_test.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::filesystem::path file = std::filesystem::path(tmpl) / "plain-file";
  std::ofstream(file) << "x";
  try {
    OutputRenderer r(1, true, file.string());
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--output-filename: cannot create"), std::string::npos) << what;
    EXPECT_NE(what.find((file / "rank.0").string()), std::string::npos) << what;
  }
  std::filesystem::remove_all(tmpl);
}

TEST(HvdrunCliOutputRenderer, ResultIsEmptyUntilJobEnd) {
  OutputRenderer r(1, true, "");
  EXPECT_EQ(r.result(), std::nullopt);
  agent::coordinator::JobResult result;
  result.jobId = "job-1";
  result.exitCode = 3;
  result.rank = 0;
  r.onJobEnd(result);
  ASSERT_TRUE(r.result().has_value());
  EXPECT_EQ(r.result()->jobId, "job-1");
  EXPECT_EQ(r.result()->exitCode, 3);
  EXPECT_EQ(r.result()->rank, 0);
}

}  // namespace
}  // namespace hvd::launcher
