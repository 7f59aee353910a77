// hvdrun's command line (launcher/cli.h, and the hosts, environment and option values decided
// from it) and its output renderer (launcher/output.h): the pure decisions hvdrun makes before
// anything runs, and how rank output reaches the user. The host
// checks that live in hvdrun's main() (remote host, two names for this machine) are pinned down
// by running the hvdrun binary itself, which refuses such jobs before starting anything. Also
// the commands that run no job: --version, --check-build and keygen.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "agent/auth/cluster_key.h"
#include "common/test_support.h"
#include "contract/worker_variables.h"
#include "hvd/error.hpp"
#include "hvdrun_parse.h"
#include "launcher/build_info.h"
#include "launcher/cli.h"
#include "launcher/hosts.h"
#include "launcher/job_environment.h"
#include "launcher/job_spec.h"
#include "launcher/keygen.h"
#include "launcher/option_values.h"
#include "launcher/output.h"

namespace hvd::launcher {
namespace {

using agent::process::Stream;

using cli_test::parse;
using cli_test::Parsed;

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
  EXPECT_EQ(resolveHosts(o), (std::vector<contract::HostSlots>{{"localhost", 3}}));
}

TEST(HvdrunCliHosts, HostListGivesHostAndSlots) {
  Options o;
  o.np = 4;
  o.hostList = "localhost:4";
  EXPECT_EQ(resolveHosts(o), (std::vector<contract::HostSlots>{{"localhost", 4}}));
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

TEST(HvdrunCliHosts, RemoteHostWithoutKeyFileIsAUsageErrorNamingTheFileAndTheFix) {
  auto [code, out] =
      runHvdrun("-H far-away-node.invalid:2 -np 2 --key-file /nonexistent/hvd-cli-test.key true");
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("'/nonexistent/hvd-cli-test.key'"), std::string::npos) << out;
  EXPECT_NE(out.find("hvdrun keygen"), std::string::npos) << out;
}

TEST(HvdrunCliHosts, UsesAgentsForRemoteHostsOrAnExplicitAgentPort) {
  Options o;
  EXPECT_FALSE(usesAgents(o, {{"localhost", 2}}, "node-a"));
  EXPECT_FALSE(usesAgents(o, {{"node-a", 2}}, "node-a"));
  EXPECT_TRUE(usesAgents(o, {{"node-a", 2}, {"node-b", 2}}, "node-a"));
  o.agentPortGiven = true;
  EXPECT_TRUE(usesAgents(o, {{"localhost", 2}}, "node-a"));
}

TEST(HvdrunCliHosts, AgentAddressBracketsIpv6AndPinsLocalhostToIpv4Loopback) {
  EXPECT_EQ(agentAddress("node-b", 7475), "node-b:7475");
  EXPECT_EQ(agentAddress("10.0.0.2", 9), "10.0.0.2:9");
  EXPECT_EQ(agentAddress("fe80::2", 7475), "[fe80::2]:7475");
  EXPECT_EQ(agentAddress("::1", 7475), "[::1]:7475");
  EXPECT_EQ(agentAddress("localhost", 7475), "127.0.0.1:7475");
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

TEST(HvdrunCliParse, RemoteOptionsAreParsed) {
  Parsed p = parse({"hvdrun",    "-np",
                    "2",         "--agent-port",
                    "9000",      "--key-file",
                    "/k",        "--tls-cert",
                    "c.pem",     "--tls-key",
                    "k.pem",     "--tls-ca",
                    "ca.pem",    "--start-timeout",
                    "2.5",       "--gpu-bind",
                    "visible",   "--timestamp-output",
                    "--verbose", "prog"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(p.options.action, Action::kRun);
  EXPECT_EQ(p.options.agentPort, 9000);
  EXPECT_TRUE(p.options.agentPortGiven);
  EXPECT_EQ(p.options.keyFile, "/k");
  EXPECT_EQ(p.options.tlsCert, "c.pem");
  EXPECT_EQ(p.options.tlsKey, "k.pem");
  EXPECT_EQ(p.options.tlsCa, "ca.pem");
  EXPECT_DOUBLE_EQ(p.options.startTimeoutSeconds, 2.5);
  EXPECT_TRUE(p.options.startTimeoutGiven);
  EXPECT_EQ(p.options.gpuBind, "visible");
  EXPECT_TRUE(p.options.timestampOutput);
  EXPECT_TRUE(p.options.verbose);
  EXPECT_EQ(p.options.command, (std::vector<std::string>{"prog"}));
}

TEST(HvdrunCliParse, RemoteOptionDefaults) {
  ASSERT_EQ(::setenv("HVD_KEY_FILE", "/etc/hvd/test.key", 1), 0);
  Parsed p = parse({"hvdrun", "-np", "1", "prog"});
  ::unsetenv("HVD_KEY_FILE");
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(p.options.agentPort, 7475);
  EXPECT_FALSE(p.options.agentPortGiven);
  EXPECT_EQ(p.options.keyFile, "/etc/hvd/test.key");
  EXPECT_DOUBLE_EQ(p.options.startTimeoutSeconds, kDefaultStartTimeoutSeconds);
  EXPECT_FALSE(p.options.startTimeoutGiven);
  EXPECT_EQ(p.options.gpuBind, "none");
  EXPECT_FALSE(p.options.timestampOutput);
  EXPECT_FALSE(p.options.verbose);
  EXPECT_TRUE(p.options.tlsCert.empty() && p.options.tlsKey.empty() && p.options.tlsCa.empty());
}

TEST(HvdrunCliParse, BadGpuBindIsAUsageErrorNamingTheToken) {
  Parsed p = parse({"hvdrun", "-np", "1", "--gpu-bind", "all", "prog"});
  EXPECT_EQ(p.code, 2);
  EXPECT_NE(p.stderrText.find("--gpu-bind: unknown value 'all' (expected none or visible)"),
            std::string::npos)
      << p.stderrText;
  EXPECT_EQ(parseGpuBind("none"), agent::node::GpuBind::kNone);
  EXPECT_EQ(parseGpuBind("visible"), agent::node::GpuBind::kVisible);
  EXPECT_EQ(parseGpuBind("Visible"), std::nullopt);
}

TEST(HvdrunCliParse, AgentPortAndStartTimeoutOutOfRangeAreUsageErrors) {
  EXPECT_EQ(parse({"hvdrun", "-np", "1", "--agent-port", "0", "prog"}).code, 2);
  EXPECT_EQ(parse({"hvdrun", "-np", "1", "--agent-port", "65536", "prog"}).code, 2);
  EXPECT_EQ(parse({"hvdrun", "-np", "1", "--start-timeout", "0", "prog"}).code, 2);
  EXPECT_EQ(parse({"hvdrun", "-np", "1", "--start-timeout", "soon", "prog"}).code, 2);
}

TEST(HvdrunCliParse, VersionAndCheckBuildNeedNoNpOrProgram) {
  Parsed v = parse({"hvdrun", "--version"});
  ASSERT_EQ(v.code, std::nullopt) << v.stderrText;
  EXPECT_EQ(v.options.action, Action::kVersion);
  Parsed c = parse({"hvdrun", "--check-build"});
  ASSERT_EQ(c.code, std::nullopt) << c.stderrText;
  EXPECT_EQ(c.options.action, Action::kCheckBuild);
  EXPECT_EQ(versionText(), "hvdrun " HVD_TEST_PROJECT_VERSION "\n");
  const std::string build = checkBuildText();
  EXPECT_EQ(build.rfind(versionText(), 0), 0u) << build;
  EXPECT_NE(build.find("transports: tcp shm\n"), std::string::npos) << build;
  EXPECT_NE(build.find(HVD_TEST_HAVE_NCCL ? "\nNCCL: yes (built against NCCL "
                                          : "\nNCCL: no (built without the NCCL backend)\n"),
            std::string::npos)
      << build;
  EXPECT_NE(build.find("\nCUDA driver: "), std::string::npos) << build;
  EXPECT_NE(build.find(HVD_TEST_HAVE_MPI ? "MPI: yes (plugin libhvd_mpi.so" : "MPI: no\n"),
            std::string::npos)
      << build;
  EXPECT_NE(build.find("TLS: yes\n"), std::string::npos) << build;
}

TEST(HvdrunCliParse, KeygenSubcommandTakesAKeyFile) {
  Parsed p = parse({"hvdrun", "keygen", "--key-file", "/tmp/x/k"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(p.options.action, Action::kKeygen);
  EXPECT_EQ(p.options.keyFile, "/tmp/x/k");
  ASSERT_EQ(::setenv("HVD_KEY_FILE", "/etc/hvd/test.key", 1), 0);
  Parsed d = parse({"hvdrun", "keygen"});
  ::unsetenv("HVD_KEY_FILE");
  ASSERT_EQ(d.code, std::nullopt) << d.stderrText;
  EXPECT_EQ(d.options.keyFile, "/etc/hvd/test.key");
  EXPECT_EQ(parse({"hvdrun", "keygen", "--bogus"}).code, 2);
  EXPECT_EQ(parse({"hvdrun", "keygen", "extra"}).code, 2);
}

// --- keygen --------------------------------------------------------------------------------

TEST(HvdrunCliKeygen, CreatesA0600KeyInANew0700DirectoryAndRefusesToOverwrite) {
  const test::TempDir tmp("hvdrun_cli_test");
  const std::filesystem::path key = tmp.path() / "dot-hvd" / "cluster.key";
  std::FILE* out = std::tmpfile();
  std::FILE* err = std::tmpfile();
  ASSERT_EQ(runKeygen(key.string(), out, err), 0);
  struct stat st = {};
  ASSERT_EQ(::stat(key.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_size, 32);
  ASSERT_EQ(::stat(key.parent_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  const std::string fingerprint = agent::auth::ClusterKey::load(key.string()).fingerprint();
  std::rewind(out);
  char buf[512] = {};
  (void)!std::fread(buf, 1, sizeof(buf) - 1, out);
  EXPECT_NE(std::string(buf).find(key.string()), std::string::npos) << buf;
  EXPECT_NE(std::string(buf).find("fingerprint " + fingerprint), std::string::npos) << buf;

  const std::string before = readFile(key);
  EXPECT_EQ(runKeygen(key.string(), out, err), 2);
  EXPECT_EQ(readFile(key), before) << "an existing key must never be replaced";
  std::rewind(err);
  std::fill(std::begin(buf), std::end(buf), 0);
  (void)!std::fread(buf, 1, sizeof(buf) - 1, err);
  EXPECT_NE(std::string(buf).find("already exists"), std::string::npos) << buf;
  std::fclose(out);
  std::fclose(err);
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
  const test::TempDir tmp("hvdrun_cli_test");
  const std::filesystem::path dir = tmp.path() / "out";
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
}

TEST(HvdrunCliOutputRenderer, UncreatableOutputDirIsAnErrorNamingThePath) {
  const test::TempDir tmp("hvdrun_cli_test");
  const std::filesystem::path file = tmp.path() / "plain-file";
  std::ofstream(file) << "x";
  try {
    OutputRenderer r(1, true, file.string());
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--output-filename: cannot create"), std::string::npos) << what;
    EXPECT_NE(what.find((file / "rank.0").string()), std::string::npos) << what;
  }
}

TEST(HvdrunCliOutputRenderer, TimestampOutputPrefixesEachLineWithTheLocalTime) {
  OutputRenderer r(1, /*tagOutput=*/true, "", /*timestampOutput=*/true);
  testing::internal::CaptureStdout();
  r.onOutput(0, "localhost", Stream::kStdout, "tick");
  const std::string out = testing::internal::GetCapturedStdout();
  // "2024-05-01T12:34:56.789 [0]<stdout>: tick"
  EXPECT_TRUE(std::regex_match(
      out, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3} \[0\]<stdout>: tick\n)")))
      << out;
  std::tm t = {};
  t.tm_year = 124;
  t.tm_mon = 4;
  t.tm_mday = 1;
  t.tm_hour = 12;
  t.tm_min = 34;
  t.tm_sec = 56;
  t.tm_isdst = -1;
  const auto tp =
      std::chrono::system_clock::from_time_t(std::mktime(&t)) + std::chrono::milliseconds(7);
  EXPECT_EQ(formatTimestamp(tp), "2024-05-01T12:34:56.007 ");
}

TEST(HvdrunCliOutputRenderer, FailureNamesTheCauseAndTheStderrTail) {
  agent::coordinator::JobResult result;
  result.summary = "hvdrun: rank 1 on node-b exited with code 3";
  result.rank = 1;
  result.stderrTail = {"a", "b"};
  EXPECT_EQ(formatFailure(result),
            "hvdrun: rank 1 on node-b exited with code 3\n"
            "hvdrun: last 2 line(s) of rank 1's stderr:\n  a\n  b\n");
  result.unreportedRanks = {2, 3};
  EXPECT_NE(formatFailure(result).find("hvdrun: 2 rank(s) did not report their exit in time\n"),
            std::string::npos);
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

namespace hvd::launcher {
namespace {

TEST(HvdrunCliEngine, KnobsBecomeTheRanksEnvironmentAndExplicitExportsWin) {
  Parsed p =
      parse({"hvdrun", "-np", "2", "--fusion-threshold-mb", "64", "--cycle-time-ms", "2.5",
             "--cache-capacity", "0", "--timeline-filename", "/tmp/t.json",
             "--stall-check-warning-time-seconds", "1", "--stall-check-shutdown-time-seconds", "3",
             "-x", "HVD_CACHE_CAPACITY=7", "prog"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(p.options.engineSettings,
            (std::vector<std::string>{"HVD_FUSION_THRESHOLD=67108864", "HVD_CYCLE_TIME=2.5",
                                      "HVD_CACHE_CAPACITY=0", "HVD_TIMELINE=/tmp/t.json",
                                      "HVD_STALL_CHECK_TIME=1", "HVD_STALL_SHUTDOWN_TIME=3"}));
  std::vector<std::string> env = {"PATH=/bin", "HVD_CYCLE_TIME=9", "HVD_CACHE_CAPACITY=7"};
  addEngineSettings(p.options, &env);
  EXPECT_EQ(env,
            (std::vector<std::string>{"PATH=/bin", "HVD_CYCLE_TIME=2.5", "HVD_CACHE_CAPACITY=7",
                                      "HVD_FUSION_THRESHOLD=67108864", "HVD_TIMELINE=/tmp/t.json",
                                      "HVD_STALL_CHECK_TIME=1", "HVD_STALL_SHUTDOWN_TIME=3"}));
}

TEST(HvdrunCliGpu, GpuOptionsReachTheJobAndTheRanksEnvironment) {
  Parsed p = parse({"hvdrun", "-np", "2", "--gpus-per-rank", "2", "--gpu-backend", "host",
                    "--hierarchical-allreduce", "prog"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(p.options.gpusPerRank, 2);
  EXPECT_EQ(p.options.engineSettings,
            (std::vector<std::string>{"HVD_GPU_BACKEND=host", "HVD_HIERARCHICAL_ALLREDUCE=1"}));
  EXPECT_EQ(buildJobSpec(p.options, {{"localhost", std::nullopt}}, {}).gpusPerRank, 2);
  EXPECT_EQ(parse({"hvdrun", "-np", "1", "--gpus-per-rank", "0", "prog"}).code, 2);
  EXPECT_EQ(parse({"hvdrun", "-np", "1", "--gpu-backend", "cuda", "prog"}).code, 2);
}

TEST(HvdrunCliEngine, RelativeTimelineIsResolvedAgainstHvdrunsDirectory) {
  Parsed p = parse({"hvdrun", "-np", "1", "--timeline-filename", "out/t.json", "prog"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  ASSERT_EQ(p.options.engineSettings.size(), 1u);
  EXPECT_EQ(p.options.engineSettings[0],
            "HVD_TIMELINE=" + (std::filesystem::current_path() / "out/t.json").string());
}

TEST(HvdrunCliEngine, DynamicTimelineAndCycleMarksPassThrough) {
  Parsed p = parse(
      {"hvdrun", "-np", "1", "--timeline-filename", "DYNAMIC", "--timeline-mark-cycles", "prog"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(p.options.engineSettings,
            (std::vector<std::string>{"HVD_TIMELINE=DYNAMIC", "HVD_TIMELINE_MARK_CYCLES=1"}));
}

// The engine options are their worker variables (contract/worker_variables.h): a value the ranks
// would refuse at init is refused by hvdrun, by the same rule, and --help shows each variable's
// line and default.
TEST(HvdrunCliEngine, OptionsTakeRangesHelpAndDefaultsFromTheWorkerTable) {
  Parsed zero = parse({"hvdrun", "-np", "1", "--cycle-time-ms", "0", "prog"});
  EXPECT_EQ(zero.code, 2);
  EXPECT_TRUE(
      zero.stderrText.find("--cycle-time-ms: '0' is not accepted by the ranks: HVD_CYCLE_TIME") !=
      std::string::npos)
      << zero.stderrText;
  const std::string maxCache =
      std::to_string(static_cast<long long>(contract::worker::kCacheCapacity.max));
  const std::string overCache =
      std::to_string(static_cast<long long>(contract::worker::kCacheCapacity.max) + 1);
  EXPECT_EQ(parse({"hvdrun", "-np", "1", "--cache-capacity", maxCache, "prog"}).code, std::nullopt);
  EXPECT_EQ(parse({"hvdrun", "-np", "1", "--cache-capacity", overCache, "prog"}).code, 2);
  // Above the table's maximum, in the option's unit.
  const std::string overStall =
      std::to_string(static_cast<long long>(contract::worker::kStallShutdownTime.max) + 1);
  EXPECT_EQ(
      parse({"hvdrun", "-np", "1", "--stall-check-shutdown-time-seconds", overStall, "prog"}).code,
      2);

  ::testing::internal::CaptureStdout();
  ASSERT_EQ(parse({"hvdrun", "--help"}).code, 0);
  const std::string help = ::testing::internal::GetCapturedStdout();
  for (const contract::WorkerVariable* v :
       {&contract::worker::kCycleTime, &contract::worker::kStallCheckTime,
        &contract::worker::kStallShutdownTime, &contract::worker::kTimelineMarkCycles,
        &contract::worker::kHierarchicalAllreduce}) {
    std::string doc = v->doc;
    if (doc.back() == ')') doc.pop_back();  // the default goes inside the line's parenthesis
    EXPECT_NE(help.find(doc), std::string::npos) << v->name;
    EXPECT_NE(help.find(std::string("-> ") + v->name), std::string::npos) << v->name;
  }
  EXPECT_NE(help.find("default 128 MiB"), std::string::npos);  // HVD_FUSION_THRESHOLD in MiB
  EXPECT_NE(help.find("default 1024) -> HVD_CACHE_CAPACITY"), std::string::npos);
}

TEST(HvdrunCliEngine, NoKnobsSetNothingAndBadValuesAreUsageErrors) {
  Parsed p = parse({"hvdrun", "-np", "1", "prog"});
  ASSERT_EQ(p.code, std::nullopt);
  EXPECT_TRUE(p.options.engineSettings.empty());
  EXPECT_EQ(parse({"hvdrun", "-np", "1", "--fusion-threshold-mb", "-1", "prog"}).code, 2);
  EXPECT_EQ(parse({"hvdrun", "-np", "1", "--cache-capacity", "many", "prog"}).code, 2);
  EXPECT_EQ(parse({"hvdrun", "-np", "1", "--stall-check-shutdown-time-seconds", "x", "prog"}).code,
            2);
}

}  // namespace
}  // namespace hvd::launcher

// --- values that cannot be meant --------------------------------------------------------------

namespace hvd::launcher {
namespace {

bool mentions(const Parsed& p, const std::string& text) {
  return p.stderrText.find(text) != std::string::npos;
}

TEST(HvdrunCliValues, EmptyTimelineFilenameIsAUsageErrorNotACrash) {
  Parsed p = parse({"hvdrun", "-np", "1", "--timeline-filename", "", "prog"});
  EXPECT_EQ(p.code, 2);
  EXPECT_TRUE(mentions(p, "hvdrun: --timeline-filename: '' is empty; expected a value"))
      << p.stderrText;
  EXPECT_TRUE(p.options.engineSettings.empty());
}

TEST(HvdrunCliValues, NanGraceIsAUsageErrorNotZero) {
  Parsed p = parse({"hvdrun", "-np", "1", "--grace", "nan", "prog"});
  EXPECT_EQ(p.code, 2);
  EXPECT_TRUE(mentions(p,
                       "hvdrun: --grace: 'nan' is not a number (expected seconds from 0 to "
                       "86400)"))
      << p.stderrText;
}

TEST(HvdrunCliValues, EmptyHostListIsAUsageErrorNotThisMachine) {
  Parsed p = parse({"hvdrun", "-np", "1", "-H", "", "prog"});
  EXPECT_EQ(p.code, 2);
  EXPECT_TRUE(mentions(p, "--hosts: '' is empty")) << p.stderrText;
  // A list of empty entries passes the parser, and the host spec refuses it (exit 2 in main).
  Parsed blank = parse({"hvdrun", "-np", "1", "-H", " ,", "prog"});
  ASSERT_EQ(blank.code, std::nullopt) << blank.stderrText;
  EXPECT_THROW(resolveHosts(blank.options), InvalidArgumentError);
}

TEST(HvdrunCliValues, EveryPathAndListOptionRefusesAnEmptyValue) {
  for (const char* option : {"-H", "--hostfile", "--output-filename", "--key-file", "--tls-cert",
                             "--tls-key", "--tls-ca", "--timeline-filename"}) {
    for (const char* empty : {"", "  "}) {
      Parsed p = parse({"hvdrun", "-np", "1", option, empty, "prog"});
      EXPECT_EQ(p.code, 2) << option;
      EXPECT_TRUE(mentions(p, "'" + std::string(empty) + "' is empty")) << p.stderrText;
    }
  }
  Parsed time = parse({"hvdrun", "-np", "1", "--time-limit", "", "prog"});
  EXPECT_EQ(time.code, 2);
  EXPECT_TRUE(mentions(time, "--time-limit '': expected seconds")) << time.stderrText;
}

TEST(HvdrunCliValues, EveryNumberOptionRefusesNanInfinityAndNegatives) {
  for (const char* option :
       {"--grace", "--start-timeout", "--fusion-threshold-mb", "--cycle-time-ms",
        "--stall-check-warning-time-seconds", "--stall-check-shutdown-time-seconds"}) {
    for (const char* bad : {"nan", "-nan", "inf", "-inf", "1e999", "-1", "3x", ""}) {
      Parsed p = parse({"hvdrun", "-np", "1", option, bad, "prog"});
      EXPECT_EQ(p.code, 2) << option << " " << bad;
      EXPECT_TRUE(mentions(p, std::string(option) + ": '" + bad + "'")) << p.stderrText;
    }
  }
  for (const auto& [option, bad] :
       std::vector<std::pair<const char*, const char*>>{{"-np", "1.5"},
                                                        {"-np", ""},
                                                        {"--agent-port", "80x"},
                                                        {"--gpus-per-rank", ""},
                                                        {"--cache-capacity", "-1"},
                                                        {"--max-restarts", "-1"},
                                                        {"--max-restarts", "nan"}}) {
    Parsed p = parse({"hvdrun", "-np", "1", option, bad, "prog"});
    EXPECT_EQ(p.code, 2) << option << " " << bad;
    EXPECT_TRUE(mentions(p, "'" + std::string(bad) + "'")) << p.stderrText;
  }
  Parsed ok = parse({"hvdrun", "-np", "1", "--grace", "0", "--cycle-time-ms", "0.5", "prog"});
  ASSERT_EQ(ok.code, std::nullopt) << ok.stderrText;
  EXPECT_EQ(ok.options.graceSeconds, 0.0);
}

TEST(HvdrunCliValues, ExportNamesMustBeEnvironmentVariableNames) {
  for (const char* bad : {"1A=2", "A-B", "A B=1", "=v", "", "A.B=1"}) {
    Parsed p = parse({"hvdrun", "-np", "1", "-x", bad, "prog"});
    EXPECT_EQ(p.code, 2) << bad;
    EXPECT_TRUE(mentions(p, "-x: '" + std::string(bad) + "'")) << p.stderrText;
  }
  Parsed p = parse({"hvdrun", "-np", "1", "-x", "A-B=1", "prog"});
  EXPECT_TRUE(mentions(p, "'A-B' is not an environment variable name")) << p.stderrText;
  Parsed ok = parse({"hvdrun", "-np", "1", "-x", "_A1=x=y", "-x", "B=", "prog"});
  ASSERT_EQ(ok.code, std::nullopt) << ok.stderrText;
  EXPECT_EQ(ok.options.exports, (std::vector<std::string>{"_A1=x=y", "B="}));
  // The environment builders keep the same rule for callers that bypass the parser.
  EXPECT_THROW(forwardedEnvironment({}, {"A-B=1"}), InvalidArgumentError);
  EXPECT_THROW(exportedEnvironment({"9=1"}), InvalidArgumentError);
}

TEST(HvdrunCliValues, HostNamesNoResolverAcceptsAreUsageErrors) {
  Options o;
  o.np = 2;
  for (const char* bad : {"-node:2", "node-:2", "a..b", "999.1.1.1", "[fe80::zz]:2"}) {
    o.hostList = bad;
    try {
      resolveHosts(o);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const InvalidArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("-H: '") + bad + "'"), std::string::npos)
          << e.what();
    }
  }
  // The binary says so with exit 2 before it starts anything.
  const auto [status, out] = runHvdrun("-np 1 -H 'node-:1' /bin/true");
  EXPECT_EQ(status, 2) << out;
  EXPECT_NE(out.find("hvdrun: -H: 'node-:1' has a label 'node-' that ends with '-'"),
            std::string::npos)
      << out;
}

// --- restarts and the queue (parsed here, carried out by the leader) -------------------------

TEST(HvdrunCliRestarts, DefaultsAreNoRestartsAndQueueing) {
  Parsed p = parse({"hvdrun", "-np", "1", "prog"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(p.options.maxRestarts, 0);
  EXPECT_EQ(p.options.restartMinUptimeSeconds, 0.0);
  EXPECT_TRUE(p.options.noRestartOnExit.empty());
  EXPECT_FALSE(p.options.noQueue);
}

TEST(HvdrunCliRestarts, OptionsAreParsedForRunAndSubmit) {
  for (const char* verb : {"run", "submit"}) {
    Parsed p =
        parse({"hvdrun", verb, "-np", "2", "--max-restarts", "3", "--restart-min-uptime", "2m",
               "--no-restart-on-exit", "2, 3,2", "--no-queue", "prog", "--max-restarts", "9"});
    ASSERT_EQ(p.code, std::nullopt) << verb << ": " << p.stderrText;
    EXPECT_EQ(p.options.maxRestarts, 3);
    EXPECT_EQ(p.options.restartMinUptimeSeconds, 120.0);
    EXPECT_EQ(p.options.noRestartOnExit, (std::vector<int>{2, 3}));
    EXPECT_TRUE(p.options.noQueue);
    EXPECT_EQ(p.options.command, (std::vector<std::string>{"prog", "--max-restarts", "9"}));
  }
  Parsed zero = parse({"hvdrun", "-np", "1", "--restart-min-uptime", "0", "prog"});
  ASSERT_EQ(zero.code, std::nullopt) << zero.stderrText;
  EXPECT_EQ(zero.options.restartMinUptimeSeconds, 0.0);
  Parsed clock = parse({"hvdrun", "-np", "1", "--restart-min-uptime", "01:30", "prog"});
  ASSERT_EQ(clock.code, std::nullopt) << clock.stderrText;
  EXPECT_EQ(clock.options.restartMinUptimeSeconds, 90.0);
}

TEST(HvdrunCliRestarts, BadValuesAreUsageErrorsNamingOptionAndValue) {
  Parsed p = parse({"hvdrun", "-np", "1", "--max-restarts", "two", "prog"});
  EXPECT_EQ(p.code, 2);
  EXPECT_TRUE(mentions(p, "--max-restarts: 'two' is not a whole number")) << p.stderrText;
  for (const char* bad : {"", "nan", "-5", "5x", "inf"}) {
    p = parse({"hvdrun", "-np", "1", "--restart-min-uptime", bad, "prog"});
    EXPECT_EQ(p.code, 2) << bad;
    EXPECT_TRUE(mentions(p, "hvdrun: --restart-min-uptime '" + std::string(bad) + "': expected"))
        << p.stderrText;
  }
  for (const auto& [bad, why] :
       std::vector<std::pair<const char*, const char*>>{{"", "no exit code given"},
                                                        {",", "no exit code given"},
                                                        {"2,", "an empty entry at position 2"},
                                                        {"2,,3", "an empty entry at position 2"},
                                                        {"x", "'x' is not an exit code"},
                                                        {"256", "'256' is not an exit code"},
                                                        {"-1", "'-1' is not an exit code"},
                                                        {"1.0", "'1.0' is not an exit code"}}) {
    p = parse({"hvdrun", "-np", "1", "--no-restart-on-exit", bad, "prog"});
    EXPECT_EQ(p.code, 2) << bad;
    EXPECT_TRUE(mentions(p, "hvdrun: --no-restart-on-exit '" + std::string(bad) + "': " + why +
                                " (expected exit codes 0 to 255"))
        << p.stderrText;
  }
}

TEST(HvdrunCliRestarts, ExitCodeListsAndZeroDurations) {
  EXPECT_EQ(parseExitCodeList("0,255"), (std::vector<int>{0, 255}));
  EXPECT_EQ(parseExitCodeList("7"), (std::vector<int>{7}));
  EXPECT_EQ(parseExitCodeList("007"), (std::vector<int>{7}));
  EXPECT_EQ(parseExitCodeList("0000"), std::nullopt);
  EXPECT_EQ(parseDurationOrZero("0"), 0.0);
  EXPECT_EQ(parseDurationOrZero("0s"), 0.0);
  EXPECT_EQ(parseDurationOrZero("00:00"), 0.0);
  EXPECT_EQ(parseDurationOrZero("90s"), 90.0);
  EXPECT_EQ(parseDurationOrZero("-1"), std::nullopt);
  EXPECT_EQ(parseDuration("0"), std::nullopt);
  // Hundreds of digits overflow to infinity: refused, not a limit that never comes.
  EXPECT_EQ(parseDuration(std::string(400, '9')), std::nullopt);
  EXPECT_EQ(parseDuration(std::string(400, '9') + ":00"), std::nullopt);
}

TEST(HvdrunCliRestarts, HelpDescribesTheNewOptionsAndTheInternalErrorCode) {
  ::testing::internal::CaptureStdout();
  Parsed p = parse({"hvdrun", "--help"});
  const std::string help = ::testing::internal::GetCapturedStdout();
  ASSERT_EQ(p.code, 0);
  for (const char* text :
       {"--max-restarts", "up to N times for the whole job", "--restart-min-uptime",
        "(a start-up failure)", "--no-restart-on-exit", "without restart", "--no-queue",
        "fail at once (exit 75)", "70 internal error"}) {
    EXPECT_NE(help.find(text), std::string::npos) << text;
  }
}

// --- elastic mode (horovodrun's flags; the rounds are the leader's) ---------------------------

// Sets (or, with nullptr, unsets) an environment variable for one test and restores it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// The elastic timeout variables unset, so that defaults are what the tests see.
struct NoElasticTimeoutInEnvironment {
  ScopedEnv hvd{"HVD_ELASTIC_TIMEOUT", nullptr};
  ScopedEnv horovod{"HOROVOD_ELASTIC_TIMEOUT", nullptr};
};

// An executable discovery script in a fresh directory.
struct DiscoveryScript {
  test::TempDir dir{"hvd-cli-discovery"};
  std::string path = dir.file("discover.sh");

  DiscoveryScript() {
    std::ofstream(path) << "#!/bin/sh\necho localhost:2\n";
    std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  }
};

agent::coordinator::ElasticSpec elasticOf(const Parsed& p) {
  return buildJobSpec(p.options, {{"localhost", 4}}, {}).elastic;
}

TEST(HvdrunCliElastic, OffWhenNeitherMinNpNorADiscoveryScriptIsGiven) {
  ScopedEnv timeout("HOROVOD_ELASTIC_TIMEOUT", "30");  // read only in elastic mode
  Parsed p = parse({"hvdrun", "-np", "4", "prog"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(p.stderrText, "");
  EXPECT_FALSE(p.options.elastic);
  const agent::coordinator::ElasticSpec e = elasticOf(p);
  EXPECT_FALSE(e.enabled);
  EXPECT_EQ(e.minNp, 1);
  EXPECT_EQ(e.maxNp, 0);
  EXPECT_EQ(e.discoveryScript, "");
  EXPECT_EQ(e.timeout, std::chrono::milliseconds(600000));
  EXPECT_FALSE(e.resetLimit);
  EXPECT_EQ(e.cooldownSeconds, std::nullopt);
}

TEST(HvdrunCliElastic, MinNpAloneTurnsElasticOnWithHorovodsDefaults) {
  NoElasticTimeoutInEnvironment env;
  Parsed p = parse({"hvdrun", "-np", "4", "--min-np", "2", "prog"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_TRUE(p.options.elastic);
  const agent::coordinator::ElasticSpec e = elasticOf(p);
  EXPECT_TRUE(e.enabled);
  EXPECT_EQ(e.minNp, 2);
  EXPECT_EQ(e.maxNp, 0);             // unbounded, as horovodrun's --max-np
  EXPECT_EQ(e.discoveryScript, "");  // the fixed hosts (-H, or localhost:np)
  EXPECT_EQ(e.slotsPerHost, 0);
  EXPECT_EQ(e.discoveryInterval, std::chrono::milliseconds(1000));
  EXPECT_EQ(e.timeout, std::chrono::milliseconds(600000));
  EXPECT_FALSE(e.resetLimit);
  EXPECT_EQ(e.cooldownSeconds, std::nullopt);
  EXPECT_EQ(buildJobSpec(p.options, {{"localhost", 4}}, {}).np, 4);
}

TEST(HvdrunCliElastic, ADiscoveryScriptAloneTurnsElasticOnAndMinNpDefaultsToNp) {
  NoElasticTimeoutInEnvironment env;
  DiscoveryScript script;
  Parsed p = parse({"hvdrun", "-np", "3", "--host-discovery-script", script.path, "prog", "a"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(p.options.command, (std::vector<std::string>{"prog", "a"}));
  const agent::coordinator::ElasticSpec e = elasticOf(p);
  EXPECT_TRUE(e.enabled);
  EXPECT_EQ(e.minNp, 3);
  EXPECT_EQ(e.maxNp, 0);
  EXPECT_EQ(e.discoveryScript, script.path);
}

TEST(HvdrunCliElastic, EveryFlagReachesTheJobSpec) {
  NoElasticTimeoutInEnvironment env;
  DiscoveryScript script;
  Parsed p = parse({"hvdrun",
                    "-np",
                    "4",
                    "--min-np",
                    "2",
                    "--max-np",
                    "8",
                    "--host-discovery-script",
                    script.path,
                    "--slots-per-host",
                    "4",
                    "--elastic-timeout",
                    "90",
                    "--reset-limit",
                    "5",
                    "--blacklist-cooldown-range",
                    "60",
                    "300",
                    "--discovery-interval",
                    "0.25",
                    "prog",
                    "--min-np",
                    "9"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(p.stderrText, "");
  EXPECT_EQ(p.options.command, (std::vector<std::string>{"prog", "--min-np", "9"}));
  const agent::coordinator::ElasticSpec e = elasticOf(p);
  EXPECT_TRUE(e.enabled);
  EXPECT_EQ(e.minNp, 2);
  EXPECT_EQ(e.maxNp, 8);
  EXPECT_EQ(e.discoveryScript, script.path);
  EXPECT_EQ(e.slotsPerHost, 4);
  EXPECT_EQ(e.discoveryInterval, std::chrono::milliseconds(250));
  EXPECT_EQ(e.timeout, std::chrono::milliseconds(90000));
  EXPECT_EQ(e.resetLimit, 5);
  EXPECT_EQ(e.cooldownSeconds, std::make_pair(60, 300));
}

TEST(HvdrunCliElastic, HorovodsAliasesAndTheEqualsFormAreTheSameFlags) {
  NoElasticTimeoutInEnvironment env;
  DiscoveryScript script;
  Parsed p = parse({"hvdrun", "-np", "2", "--min-num-proc", "1", "--max-num-proc=6",
                    "--host-discovery-script=" + script.path, "--slots", "2",
                    "--blacklist-cooldown-range", "5", "5", "prog"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(p.options.command, (std::vector<std::string>{"prog"}));
  const agent::coordinator::ElasticSpec e = elasticOf(p);
  EXPECT_TRUE(e.enabled);
  EXPECT_EQ(e.minNp, 1);
  EXPECT_EQ(e.maxNp, 6);
  EXPECT_EQ(e.discoveryScript, script.path);
  EXPECT_EQ(e.slotsPerHost, 2);
  EXPECT_EQ(e.cooldownSeconds, std::make_pair(5, 5));
}

TEST(HvdrunCliElastic, RelativeDiscoveryScriptIsMadeAbsoluteAgainstTheWorkingDirectory) {
  DiscoveryScript script;
  const std::string relative =
      std::filesystem::path(script.path).lexically_relative(std::filesystem::current_path());
  ASSERT_FALSE(relative.empty());
  ASSERT_NE(relative.front(), '/');
  Parsed p = parse({"hvdrun", "-np", "1", "--host-discovery-script", relative, "prog"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(p.options.discoveryScript, script.path);
  EXPECT_EQ(elasticOf(p).discoveryScript, script.path);
}

TEST(HvdrunCliElastic, ElasticTimeoutComesFromTheOptionElseTheEnvironmentElse600) {
  NoElasticTimeoutInEnvironment env;
  {
    ScopedEnv horovod("HOROVOD_ELASTIC_TIMEOUT", "120");
    Parsed p = parse({"hvdrun", "-np", "2", "--min-np", "1", "prog"});
    ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
    EXPECT_EQ(elasticOf(p).timeout, std::chrono::milliseconds(120000));
    // The option wins over the environment, as in horovodrun.
    p = parse({"hvdrun", "-np", "2", "--min-np", "1", "--elastic-timeout", "30", "prog"});
    ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
    EXPECT_EQ(elasticOf(p).timeout, std::chrono::milliseconds(30000));
    // hvd's own name wins over Horovod's, as for every worker variable.
    ScopedEnv hvd("HVD_ELASTIC_TIMEOUT", "45.5");
    p = parse({"hvdrun", "-np", "2", "--min-np", "1", "prog"});
    ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
    EXPECT_EQ(elasticOf(p).timeout, std::chrono::milliseconds(45500));
  }
  ScopedEnv bad("HOROVOD_ELASTIC_TIMEOUT", "ten");
  Parsed p = parse({"hvdrun", "-np", "2", "--min-np", "1", "prog"});
  EXPECT_EQ(p.code, 2);
  EXPECT_EQ(p.stderrText,
            "hvdrun: HOROVOD_ELASTIC_TIMEOUT='ten' is not a positive number of seconds\n");
  // Given, the option makes the variable irrelevant.
  p = parse({"hvdrun", "-np", "2", "--min-np", "1", "--elastic-timeout", "7", "prog"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(elasticOf(p).timeout, std::chrono::milliseconds(7000));
}

TEST(HvdrunCliElastic, NpOutsideMinNpToMaxNpIsAUsageErrorNamingFlagsAndValues) {
  Parsed p = parse({"hvdrun", "-np", "2", "--min-np", "3", "prog"});
  EXPECT_EQ(p.code, 2);
  EXPECT_EQ(p.stderrText,
            "hvdrun: --min-np 3 is more than -np 2 (-np is the slots an elastic job starts with: "
            "at least --min-np)\n");
  p = parse({"hvdrun", "-np", "5", "--min-np", "1", "--max-np", "4", "prog"});
  EXPECT_EQ(p.code, 2);
  EXPECT_EQ(p.stderrText,
            "hvdrun: -np 5 is more than --max-np 4 (-np is the slots an elastic job starts with: "
            "at most --max-np)\n");
  // --min-np defaults to -np, so -np above --max-np is the error then too.
  DiscoveryScript script;
  p = parse(
      {"hvdrun", "-np", "5", "--host-discovery-script", script.path, "--max-np", "4", "prog"});
  EXPECT_EQ(p.code, 2);
  EXPECT_TRUE(mentions(p, "-np 5 is more than --max-np 4")) << p.stderrText;
  p = parse({"hvdrun", "-np", "2", "--min-np", "6", "--max-np", "4", "prog"});
  EXPECT_EQ(p.code, 2);
  EXPECT_EQ(p.stderrText,
            "hvdrun: --min-np 6 is more than --max-np 4 (an elastic job keeps between --min-np "
            "and --max-np ranks)\n");
  // The bounds themselves are fine.
  p = parse({"hvdrun", "-np", "4", "--min-np", "4", "--max-np", "4", "prog"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(elasticOf(p).minNp, 4);
  EXPECT_EQ(elasticOf(p).maxNp, 4);
}

TEST(HvdrunCliElastic, NpFromASlurmAllocationIsCheckedWhenTheJobIsBuilt) {
  // In an allocation -np may come from its slots after parsing; the same rule holds then.
  Options o;
  o.elastic = true;
  o.minNp = 4;
  o.np = 2;
  try {
    buildJobSpec(o, {{"node1", 2}}, {});
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_EQ(std::string(e.what()),
              "--min-np 4 is more than -np 2 (-np is the slots an elastic job starts with: at "
              "least --min-np)");
  }
  o.np = 4;
  EXPECT_EQ(buildJobSpec(o, {{"node1", 4}}, {}).elastic.minNp, 4);
}

TEST(HvdrunCliElastic, NpIsRequiredInElasticModeAsInHorovodrun) {
  DiscoveryScript script;
  Parsed p = parse({"hvdrun", "--host-discovery-script", script.path, "prog"});
  EXPECT_EQ(p.code, 2);
  EXPECT_EQ(p.stderrText,
            "hvdrun: -np N is required (in elastic mode: the slots the job starts with; see "
            "hvdrun --help)\n");
  // Even in a Slurm allocation: the script's hosts, not the allocation's, are the job's.
  ScopedEnv slurm("SLURM_JOB_ID", "12345");
  p = parse({"hvdrun", "--host-discovery-script", script.path, "prog"});
  EXPECT_EQ(p.code, 2);
  EXPECT_TRUE(mentions(p, "-np N is required (in elastic mode")) << p.stderrText;
  p = parse({"hvdrun", "--min-np", "2", "prog"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;  // the allocation's slots, checked later
}

TEST(HvdrunCliElastic, DiscoveryScriptMustExistAndBeExecutable) {
  test::TempDir dir("hvd-cli-discovery");
  Parsed p = parse({"hvdrun", "-np", "1", "--host-discovery-script", dir.file("none.sh"), "prog"});
  EXPECT_EQ(p.code, 2);
  EXPECT_EQ(p.stderrText,
            "hvdrun: --host-discovery-script '" + dir.file("none.sh") + "': no such file\n");
  std::ofstream(dir.file("plain.sh")) << "#!/bin/sh\necho localhost\n";
  p = parse({"hvdrun", "-np", "1", "--host-discovery-script", dir.file("plain.sh"), "prog"});
  EXPECT_EQ(p.code, 2);
  EXPECT_EQ(p.stderrText, "hvdrun: --host-discovery-script '" + dir.file("plain.sh") +
                              "': not executable (chmod +x it; it is run as a program, not "
                              "through a shell)\n");
  p = parse({"hvdrun", "-np", "1", "--host-discovery-script", dir.path().string(), "prog"});
  EXPECT_EQ(p.code, 2);
  EXPECT_EQ(p.stderrText, "hvdrun: --host-discovery-script '" + dir.path().string() +
                              "': is a directory, not a script\n");
  // A relative path is named as given and as resolved.
  p = parse({"hvdrun", "-np", "1", "--host-discovery-script", "no-such-hvd-script.sh", "prog"});
  EXPECT_EQ(p.code, 2);
  EXPECT_EQ(p.stderrText, "hvdrun: --host-discovery-script 'no-such-hvd-script.sh' (" +
                              (std::filesystem::current_path() / "no-such-hvd-script.sh").string() +
                              "): no such file\n");
  p = parse({"hvdrun", "-np", "1", "--host-discovery-script", "", "prog"});
  EXPECT_EQ(p.code, 2);
  EXPECT_TRUE(mentions(p, "--host-discovery-script: '' is empty")) << p.stderrText;
}

TEST(HvdrunCliElastic, DiscoveryScriptExcludesHostListHostfileAndPrintHosts) {
  DiscoveryScript script;
  for (const char* hosts : {"-H", "--hostfile"}) {
    Parsed p = parse({"hvdrun", "-np", "2", "--host-discovery-script", script.path, hosts,
                      "localhost:2", "prog"});
    EXPECT_EQ(p.code, 2) << hosts;
    EXPECT_EQ(p.stderrText, "hvdrun: --host-discovery-script and " + std::string(hosts) +
                                " exclude each other: the script names the hosts (give " + hosts +
                                " without the script for fixed hosts)\n");
  }
  Parsed p = parse({"hvdrun", "-np", "2", "--host-discovery-script", script.path, "--print-hosts"});
  EXPECT_EQ(p.code, 2);
  EXPECT_EQ(p.stderrText,
            "hvdrun: --print-hosts: the hosts of this job are what --host-discovery-script "
            "prints; run the script instead\n");
  // --min-np with -H: fixed hosts, elastic (fault tolerance without scaling).
  p = parse({"hvdrun", "-np", "2", "--min-np", "1", "-H", "localhost:2", "prog"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_TRUE(elasticOf(p).enabled);
  EXPECT_EQ(elasticOf(p).discoveryScript, "");
  EXPECT_EQ(resolveHosts(p.options), (std::vector<contract::HostSlots>{{"localhost", 2}}));
}

TEST(HvdrunCliElastic, BadValuesAreUsageErrorsNamingOptionAndValue) {
  struct Bad {
    const char* option;
    const char* value;
    const char* message;  // CLI11 names an option by its first long name, whichever was given
  };
  for (const Bad& bad : std::vector<Bad>{
           {"--min-np", "0",
            "--min-np: '0' is out of range (expected a whole number from 1 to 1048576)"},
           {"--max-num-proc", "x", "--max-np: 'x' is not a whole number"},
           {"--slots-per-host", "0", "--slots-per-host: '0' is out of range"},
           {"--slots", "-2", "--slots-per-host: '-2' is out of range"},
           {"--reset-limit", "-1", "--reset-limit: '-1' is out of range"},
           {"--elastic-timeout", "0",
            "--elastic-timeout: '0' is out of range (expected seconds from 0.001 to 1000000)"},
           {"--elastic-timeout", "nan", "--elastic-timeout: 'nan' is not a number"},
           {"--discovery-interval", "0",
            "--discovery-interval: '0' is out of range (expected seconds from 0.001 to 3600)"},
       }) {
    Parsed p = parse({"hvdrun", "-np", "2", "--min-np", "1", bad.option, bad.value, "prog"});
    EXPECT_EQ(p.code, 2) << bad.option << " " << bad.value;
    EXPECT_TRUE(mentions(p, std::string("hvdrun: ") + bad.message)) << p.stderrText;
  }
  // horovodrun's 0: no reset allowed (not "no limit", which is leaving it out).
  Parsed p = parse({"hvdrun", "-np", "2", "--min-np", "1", "--reset-limit", "0", "prog"});
  ASSERT_FALSE(p.code) << p.stderrText;
  EXPECT_EQ(buildJobSpec(p.options, {{"localhost", 2}}, {}).elastic.resetLimit, 0);
}

TEST(HvdrunCliElastic, BlacklistCooldownRangeTakesMinAndMaxSecondsEach1To3600) {
  for (const auto& [low, high] :
       std::vector<std::pair<const char*, const char*>>{{"0", "10"}, {"1", "3601"}, {"a", "10"}}) {
    Parsed p = parse(
        {"hvdrun", "-np", "2", "--min-np", "1", "--blacklist-cooldown-range", low, high, "prog"});
    EXPECT_EQ(p.code, 2) << low << " " << high;
    EXPECT_TRUE(mentions(p, "--blacklist-cooldown-range: '")) << p.stderrText;
    EXPECT_TRUE(mentions(p, "(expected a whole number from 1 to 3600)")) << p.stderrText;
  }
  Parsed p = parse(
      {"hvdrun", "-np", "2", "--min-np", "1", "--blacklist-cooldown-range", "300", "60", "prog"});
  EXPECT_EQ(p.code, 2);
  EXPECT_EQ(p.stderrText,
            "hvdrun: --blacklist-cooldown-range 300 60: MIN is more than MAX (expected MIN MAX, "
            "e.g. 60 300)\n");
  p = parse(
      {"hvdrun", "-np", "2", "--min-np", "1", "--blacklist-cooldown-range", "1", "3600", "prog"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(elasticOf(p).cooldownSeconds, std::make_pair(1, 3600));
}

TEST(HvdrunCliElastic, ElasticFlagsWithoutElasticModeAreIgnoredWithAWarning) {
  Parsed p = parse({"hvdrun", "-np", "2", "--max-np", "4", "--reset-limit", "3",
                    "--blacklist-cooldown-range", "1", "2", "--elastic-timeout", "5", "prog"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(p.stderrText,
            "hvdrun: warning: --max-np, --elastic-timeout, --reset-limit, "
            "--blacklist-cooldown-range ignored: not an elastic job (elastic mode needs --min-np "
            "or --host-discovery-script)\n");
  EXPECT_FALSE(p.options.elastic);
  EXPECT_FALSE(elasticOf(p).enabled);
  EXPECT_EQ(elasticOf(p).maxNp, 0);
  // --slots-per-host only gives the slots of the hosts a script prints.
  p = parse({"hvdrun", "-np", "2", "--min-np", "1", "-H", "localhost:2", "--slots", "4", "prog"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(p.stderrText,
            "hvdrun: warning: --slots-per-host ignored: it gives the slots of the hosts a "
            "--host-discovery-script prints, and this job's hosts are fixed\n");
  EXPECT_TRUE(elasticOf(p).enabled);
}

TEST(HvdrunCliElastic, HelpListsEveryFlagUnderElastic) {
  ::testing::internal::CaptureStdout();
  Parsed p = parse({"hvdrun", "--help"});
  const std::string help = ::testing::internal::GetCapturedStdout();
  ASSERT_EQ(p.code, 0);
  const size_t group = help.find("Elastic (on with --min-np or --host-discovery-script):");
  ASSERT_NE(group, std::string::npos) << help;
  for (const char* text :
       {"--min-np,--min-num-proc", "(default -np)", "--max-np,--max-num-proc",
        "(default: every slot there is)", "--host-discovery-script", "Not with -H or --hostfile",
        "--slots-per-host,--slots", "--elastic-timeout", "$HOROVOD_ELASTIC_TIMEOUT, else 600",
        "--reset-limit", "--blacklist-cooldown-range MIN MAX", "(each 1-3600; default: never)",
        "--discovery-interval", "(default 1, as horovodrun)"}) {
    EXPECT_NE(help.find(text, group), std::string::npos) << text;
  }
  EXPECT_NE(help.find("Elastic mode (horovodrun's flags, listed under Elastic) is on when "
                      "--min-np or\n--host-discovery-script is given"),
            std::string::npos);
}

// --- --log-level (horovodrun's) ----------------------------------------------------------------

TEST(HvdrunCliLogLevel, HorovodsAndHvdsNamesBecomeTheRanksLogLevel) {
  EXPECT_EQ(parseLogLevel("TRACE"), "trace");
  EXPECT_EQ(parseLogLevel("DEBUG"), "debug");
  EXPECT_EQ(parseLogLevel("INFO"), "info");
  EXPECT_EQ(parseLogLevel("WARNING"), "warn");
  EXPECT_EQ(parseLogLevel("ERROR"), "error");
  EXPECT_EQ(parseLogLevel("FATAL"), "critical");
  EXPECT_EQ(parseLogLevel("warn"), "warn");
  EXPECT_EQ(parseLogLevel("off"), "off");
  EXPECT_EQ(parseLogLevel("Debug"), "debug");
  EXPECT_EQ(parseLogLevel(""), std::nullopt);
  EXPECT_EQ(parseLogLevel("verbose"), std::nullopt);

  Parsed p = parse({"hvdrun", "-np", "1", "--log-level", "WARNING", "prog"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(p.options.logLevel, "warn");
  EXPECT_EQ(p.options.engineSettings, (std::vector<std::string>{"HVD_LOG_LEVEL=warn"}));
  p = parse({"hvdrun", "-np", "1", "prog"});
  EXPECT_EQ(p.options.logLevel, "");
  EXPECT_TRUE(p.options.engineSettings.empty());
  p = parse({"hvdrun", "-np", "1", "--log-level", "loud", "prog"});
  EXPECT_EQ(p.code, 2);
  EXPECT_EQ(p.stderrText,
            "hvdrun: --log-level 'loud': expected TRACE, DEBUG, INFO, WARNING, ERROR, FATAL, or "
            "trace, debug, info, warn, error, off\n");
}

}  // namespace
}  // namespace hvd::launcher
