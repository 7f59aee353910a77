// horovodrun's command lines under hvdrun (launcher/horovodrun_flags.h, launcher/config_file.h):
// every horovodrun flag hvdrun takes is parsed into the settings it makes for every rank, or is
// accepted with exactly one warning line that says why it is ignored; a bad value is a usage
// error naming the flag; --config-file's keys become their flags, and flags on the command line
// win; the defaults are horovodrun's (--start-timeout 30 s, $HOROVOD_START_TIMEOUT).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "common/test_support.h"
#include "hvdrun_parse.h"
#include "launcher/config_file.h"
#include "launcher/horovodrun_flags.h"
#include "launcher/job_environment.h"
#include "launcher/job_spec.h"

namespace hvd::launcher {
namespace {

using cli_test::parse;
using cli_test::Parsed;

// `flags` between "hvdrun -np 2" and the program.
Parsed run(std::vector<std::string> flags) {
  std::vector<std::string> args = {"hvdrun", "-np", "2"};
  args.insert(args.end(), flags.begin(), flags.end());
  args.push_back("prog");
  return parse(args);
}

std::map<std::string, std::string> settings(const Parsed& p) {
  return test::environmentMap(p.options.engineSettings);
}

std::vector<std::string> warnings(const Parsed& p) {
  std::vector<std::string> lines;
  std::istringstream in(p.stderrText);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("hvdrun: warning: ", 0) == 0) lines.push_back(line);
  }
  return lines;
}

bool says(const Parsed& p, const std::string& text) {
  return p.stderrText.find(text) != std::string::npos;
}

// --- horovodrun's spellings of hvdrun's options ---------------------------------------------

TEST(HorovodrunCli, SingleDashSpellingsAreHvdrunsOptions) {
  Parsed p = parse({"hvdrun", "-np", "2", "-hostfile", "hosts.txt", "-prefix-timestamp", "prog"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(p.options.hostfile, "hosts.txt");
  EXPECT_TRUE(p.options.timestampOutput);
  EXPECT_EQ(p.options.command, std::vector<std::string>{"prog"});

  p = parse({"hvdrun", "-np=2", "-hostfile=h2.txt", "prog", "-hostfile", "x"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(p.options.np, 2);
  EXPECT_EQ(p.options.hostfile, "h2.txt");
  EXPECT_EQ(p.options.command, (std::vector<std::string>{"prog", "-hostfile", "x"}));

  p = parse({"hvdrun", "-cb"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(p.options.action, Action::kCheckBuild);
  p = parse({"hvdrun", "-v"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(p.options.action, Action::kVersion);

  p = run({"--prefix-output-with-timestamp"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_TRUE(p.options.timestampOutput);
  EXPECT_TRUE(p.stderrText.empty()) << p.stderrText;
}

// --- flags that set the ranks' environment ---------------------------------------------------

TEST(HorovodrunCli, NetworkInterfacesPickTheDataPlaneAndNcclsSockets) {
  Parsed p = run({"--network-interface", "eth1", "--network-interface", "ib0,eth1"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(settings(p).at("HVD_DATA_IFACE"), "eth1");  // the first one given
  EXPECT_EQ(settings(p).at("NCCL_SOCKET_IFNAME"), "eth1,ib0");
  EXPECT_TRUE(p.stderrText.empty()) << p.stderrText;

  p = run({"--network-interfaces", "lo"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(settings(p).at("HVD_DATA_IFACE"), "lo");
  EXPECT_EQ(settings(p).at("NCCL_SOCKET_IFNAME"), "lo");
  EXPECT_EQ(interfaceNames({"a,b", "b", "c"}), (std::vector<std::string>{"a", "b", "c"}));

  for (const std::string bad : {"", "eth0,,eth1", "eth 0", "eth0/1", "a-name-of-16-chr"}) {
    p = run({"--network-interface", bad});
    EXPECT_EQ(p.code, 2) << bad;
    EXPECT_TRUE(says(p, "hvdrun: --network-interfaces: '" + bad + "'")) << p.stderrText;
  }
}

TEST(HorovodrunCli, TcpTurnsNcclsInfinibandOffAndGlooIsHvdsOwnBackend) {
  Parsed p = run({"--tcp", "--gloo"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(settings(p).at("NCCL_IB_DISABLE"), "1");
  EXPECT_EQ(settings(p).at("HVD_CPU_BACKEND"), "hvd");
  EXPECT_TRUE(p.stderrText.empty()) << p.stderrText;

  p = run({"--mpi"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(settings(p).count("HVD_CPU_BACKEND"), 0u);
  ASSERT_EQ(warnings(p).size(), 1u) << p.stderrText;
  EXPECT_EQ(warnings(p)[0].rfind("hvdrun: warning: --mpi ignored: hvd's MPI backend "
                                 "(HVD_CPU_BACKEND=mpi) runs only in jobs that mpirun starts",
                                 0),
            0u)
      << p.stderrText;

  p = run({"--gloo", "--mpi"});
  EXPECT_EQ(p.code, 2);
  EXPECT_TRUE(says(p, "--gloo excludes --mpi")) << p.stderrText;
}

TEST(HorovodrunCli, StallCheckOnAndOff) {
  Parsed p = run({"--no-stall-check"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(settings(p).at("HVD_STALL_CHECK_DISABLE"), "1");
  p = run({"--stall-check"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(settings(p).at("HVD_STALL_CHECK_DISABLE"), "0");
  p = run({});
  EXPECT_EQ(settings(p).count("HVD_STALL_CHECK_DISABLE"), 0u);
  p = run({"--stall-check", "--no-stall-check"});
  EXPECT_EQ(p.code, 2);
  EXPECT_TRUE(says(p, "excludes")) << p.stderrText;
}

TEST(HorovodrunCli, GlooTimeoutIsTheRanksTimeout) {
  Parsed p = run({"--gloo-timeout-seconds", "45"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(settings(p).at("HVD_TIMEOUT"), "45");
  for (const std::string bad : {"0", "-1", "soon", "nan"}) {
    p = run({"--gloo-timeout-seconds", bad});
    EXPECT_EQ(p.code, 2) << bad;
    EXPECT_TRUE(says(p, "hvdrun: --gloo-timeout-seconds: '" + bad + "'")) << p.stderrText;
  }
}

TEST(HorovodrunCli, HierarchicalAllreduceOnAndOffAndAllgatherNever) {
  Parsed p = run({"--no-hierarchical-allreduce", "--no-hierarchical-allgather"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(settings(p).at("HVD_HIERARCHICAL_ALLREDUCE"), "0");
  EXPECT_TRUE(p.stderrText.empty()) << p.stderrText;
  p = run({"--hierarchical-allreduce"});
  EXPECT_EQ(settings(p).at("HVD_HIERARCHICAL_ALLREDUCE"), "1");
  p = run({"--hierarchical-allreduce", "--no-hierarchical-allreduce"});
  EXPECT_EQ(p.code, 2);

  p = run({"--hierarchical-allgather"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  ASSERT_EQ(warnings(p).size(), 1u) << p.stderrText;
  EXPECT_EQ(warnings(p)[0],
            "hvdrun: warning: --hierarchical-allgather ignored: hvd has no hierarchical "
            "allgather (its hierarchical collective is --hierarchical-allreduce)");
  EXPECT_TRUE(p.options.engineSettings.empty());
}

// -x names the variable: the user's value wins over the flag's, as for every knob.
TEST(HorovodrunCli, AnExplicitExportWinsOverAFlagsVariable) {
  Parsed p = run({"--tcp", "--network-interface", "eth0", "-x", "NCCL_IB_DISABLE=0"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  std::vector<std::string> env = {"PATH=/bin", "NCCL_SOCKET_IFNAME=ib", "NCCL_IB_DISABLE=0"};
  addEngineSettings(p.options, &env);
  const std::map<std::string, std::string> m = test::environmentMap(env);
  EXPECT_EQ(m.at("NCCL_IB_DISABLE"), "0");
  EXPECT_EQ(m.at("NCCL_SOCKET_IFNAME"), "eth0");  // inherited, replaced: the flag was given
  EXPECT_EQ(m.at("HVD_DATA_IFACE"), "eth0");
}

// --- flags hvd has no use for: one warning line each reason, nothing set --------------------

struct IgnoredCase {
  std::vector<std::string> flags;
  std::string warning;  // the whole line
};

TEST(HorovodrunCli, EachIgnoredFlagIsOneWarningLineSayingWhy) {
  const std::vector<IgnoredCase> cases = {
      {{"-p", "2222"},
       "--ssh-port ignored: hvdrun uses no SSH: it reaches other hosts through the hvdagent on "
       "each (--agent-port, --key-file)"},
      {{"--ssh-port", "22", "-i", "/home/u/.ssh/id_rsa"},
       "--ssh-port, --ssh-identity-file ignored: hvdrun uses no SSH: it reaches other hosts "
       "through the hvdagent on each (--agent-port, --key-file)"},
      {{"--mpi-args=--map-by ppr:6:node"},
       "--mpi-args ignored: hvdrun runs no mpirun, and its ranks do not use MPI"},
      {{"--mpi-args", "-bind-to none", "--binding-args", "--rankfile r", "--mpi-threads-disable"},
       "--mpi-args, --binding-args, --mpi-threads-disable ignored: hvdrun runs no mpirun, and "
       "its ranks do not use MPI"},
      {{"--num-nccl-streams", "2"},
       "--num-nccl-streams ignored: hvd's NCCL backend runs on one stream per device"},
      {{"--thread-affinity", "1"},
       "--thread-affinity ignored: hvd does not pin its background thread to a CPU (pin the "
       "ranks with taskset or a cpuset)"},
      {{"--disable-cache"},
       "--disable-cache ignored: it turns off horovodrun's cache of its SSH and network checks, "
       "and hvdrun keeps no such cache (the engine's response cache is turned off by "
       "--cache-capacity 0)"},
      {{"--log-without-timestamp"},
       "--log-without-timestamp ignored: hvd's log lines always carry the time"},
      {{"--log-hide-timestamp"},
       "--log-without-timestamp ignored: hvd's log lines always carry the time"},
  };
  for (const IgnoredCase& c : cases) {
    const Parsed p = run(c.flags);
    ASSERT_EQ(p.code, std::nullopt) << c.flags[0] << ": " << p.stderrText;
    EXPECT_EQ(p.stderrText, "hvdrun: warning: " + c.warning + "\n") << c.flags[0];
    EXPECT_TRUE(p.options.engineSettings.empty()) << c.flags[0];
    EXPECT_EQ(p.options.command, std::vector<std::string>{"prog"}) << c.flags[0];
  }
}

TEST(HorovodrunCli, FlagsThatAskForWhatHvdDoesAnywayAreSilent) {
  for (const char* flag :
       {"--gloo", "--no-hierarchical-allgather", "--no-autotune", "--no-mpi-threads-disable",
        "--log-with-timestamp", "--no-log-hide-timestamp"}) {
    const Parsed p = run({flag});
    ASSERT_EQ(p.code, std::nullopt) << flag << ": " << p.stderrText;
    EXPECT_EQ(p.stderrText, "") << flag;
  }
}

TEST(HorovodrunCli, AutotuneFlagsBecomeTheRanksAutotuneVariables) {
  Parsed p = run({"--autotune", "--autotune-log-file", "a.csv", "--autotune-warmup-samples", "0",
                  "--autotune-steps-per-sample", "4", "--autotune-bayes-opt-max-samples", "12",
                  "--autotune-gaussian-process-noise", "0.25"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(p.stderrText, "");
  std::map<std::string, std::string> s = settings(p);
  EXPECT_EQ(s.at("HVD_AUTOTUNE"), "1");
  // Made absolute against hvdrun's directory, as the timeline's file.
  EXPECT_EQ(s.at("HVD_AUTOTUNE_LOG"),
            (std::filesystem::current_path() / "a.csv").lexically_normal().string());
  EXPECT_EQ(s.at("HVD_AUTOTUNE_WARMUP_SAMPLES"), "0");
  EXPECT_EQ(s.at("HVD_AUTOTUNE_STEPS_PER_SAMPLE"), "4");
  EXPECT_EQ(s.at("HVD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES"), "12");
  EXPECT_EQ(s.at("HVD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE"), "0.25");

  // Only what is given: the ranks' defaults (Horovod's) hold otherwise.
  p = run({"--autotune"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  s = settings(p);
  EXPECT_EQ(s.at("HVD_AUTOTUNE"), "1");
  for (const char* name :
       {"HVD_AUTOTUNE_LOG", "HVD_AUTOTUNE_WARMUP_SAMPLES", "HVD_AUTOTUNE_STEPS_PER_SAMPLE",
        "HVD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "HVD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE"}) {
    EXPECT_EQ(s.count(name), 0u) << name;
  }
  p = run({"--no-autotune"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(settings(p).at("HVD_AUTOTUNE"), "0");
  EXPECT_EQ(settings(run({})).count("HVD_AUTOTUNE"), 0u);
  p = run({"--autotune", "--no-autotune"});
  EXPECT_EQ(p.code, 2);
  EXPECT_TRUE(says(p, "excludes")) << p.stderrText;

  const std::vector<std::vector<std::string>> bad = {
      {"--autotune-warmup-samples", "1.5"},
      {"--autotune-warmup-samples", "-1"},
      {"--autotune-steps-per-sample", "-1"},
      {"--autotune-bayes-opt-max-samples", "x"},
      {"--autotune-gaussian-process-noise", "1.5"},
      {"--autotune-gaussian-process-noise", "-0.1"},
      {"--autotune-log-file", ""},
  };
  for (const std::vector<std::string>& flags : bad) {
    p = run(flags);
    EXPECT_EQ(p.code, 2) << flags[0] << " " << flags[1];
    EXPECT_TRUE(says(p, "hvdrun: " + flags[0] + ": '" + flags[1] + "'"))
        << flags[0] << " " << flags[1] << ": " << p.stderrText;
  }
}

TEST(HorovodrunCli, IgnoredFlagsStillRefuseValuesThatCannotBeMeant) {
  const std::vector<std::vector<std::string>> bad = {
      {"-p", "0"},
      {"--ssh-port", "ssh"},
      {"-i", ""},
      {"--num-nccl-streams", "-1"},
      {"--thread-affinity", "x"},
  };
  for (const std::vector<std::string>& flags : bad) {
    const Parsed p = run(flags);
    EXPECT_EQ(p.code, 2) << flags[0];
    const std::string name = flags[0] == "-p"   ? "--ssh-port"
                             : flags[0] == "-i" ? "--ssh-identity-file"
                                                : flags[0];
    EXPECT_TRUE(says(p, "hvdrun: " + name + ": '" + flags[1] + "'")) << p.stderrText;
  }
}

// --- the start timeout ---------------------------------------------------------------------

TEST(HorovodrunCli, StartTimeoutIsHorovodrunsDefaultOrHorovodStartTimeout) {
  ::unsetenv("HOROVOD_START_TIMEOUT");
  Parsed p = run({});
  EXPECT_DOUBLE_EQ(p.options.startTimeoutSeconds, 30.0);
  EXPECT_FALSE(p.options.startTimeoutGiven);

  ::setenv("HOROVOD_START_TIMEOUT", "90", 1);
  p = run({});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_DOUBLE_EQ(p.options.startTimeoutSeconds, 90.0);
  EXPECT_TRUE(p.options.startTimeoutGiven);  // so the ranks get it too
  std::vector<std::string> env;
  addStartTimeout(p.options, &env);
  EXPECT_EQ(env, std::vector<std::string>{"HVD_START_TIMEOUT=90"});
  EXPECT_EQ(buildSubmitRequest(p.options, {{"h1", 2}}).connect_timeout_ms(), 90000);

  p = run({"--start-timeout", "5"});  // the flag wins
  EXPECT_DOUBLE_EQ(p.options.startTimeoutSeconds, 5.0);

  ::setenv("HOROVOD_START_TIMEOUT", "soon", 1);
  p = run({});
  EXPECT_EQ(p.code, 2);
  EXPECT_TRUE(says(p,
                   "hvdrun: HOROVOD_START_TIMEOUT (the default of --start-timeout): 'soon' "
                   "is not a number"))
      << p.stderrText;
  ::unsetenv("HOROVOD_START_TIMEOUT");

  // The job commands ask agents that run already: they keep their 10 s.
  p = parse({"hvdrun", "ps"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_DOUBLE_EQ(p.options.startTimeoutSeconds, kDefaultAgentAnswerSeconds);
}

// --- --config-file -------------------------------------------------------------------------

// Horovod's own test file (test/data/config.test.yaml) with the newer library and logging keys.
constexpr char kHorovodConfig[] = R"(controller: gloo

params:
  fusion_threshold_mb: 32
  cycle_time_ms: 10
  cache_capacity: 2048
  hierarchical_allreduce: true
  hierarchical_allgather: false

autotune:
  enabled: false
  log_file: 'horovod_autotune_log.txt'

timeline:
  filename: '/tmp/horovod_timeline.json'
  mark_cycles: true

stall_check:
  enabled: false
  warning_time_seconds: 120
  shutdown_time_seconds: 240

library_options:
  mpi_threads_disable: false
  num_nccl_streams: 2
  thread_affinity:
  gloo_timeout_seconds: 60

logging:
  level: INFO
  with_timestamp: true
)";

class HorovodrunConfigFile : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& text) {
    const std::string path = dir_.file(name);
    std::ofstream(path) << text;
    return path;
  }

  test::TempDir dir_{"hvdrun_config_file"};
};

TEST_F(HorovodrunConfigFile, KeysBecomeTheirFlagsAndFlagsOnTheCommandLineWin) {
  const std::string path = write("horovod.yaml", kHorovodConfig);
  Parsed p = run({"--fusion-threshold-mb", "256", "--config-file", path, "--cycle-time-ms", "20",
                  "--stall-check"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  const std::map<std::string, std::string> s = settings(p);
  EXPECT_EQ(s.at("HVD_FUSION_THRESHOLD"), std::to_string(256LL << 20));  // the flags'
  EXPECT_EQ(s.at("HVD_CYCLE_TIME"), "20");
  EXPECT_EQ(s.at("HVD_STALL_CHECK_DISABLE"), "0");
  EXPECT_EQ(s.at("HVD_CACHE_CAPACITY"), "2048");  // the file's
  EXPECT_EQ(s.at("HVD_HIERARCHICAL_ALLREDUCE"), "1");
  EXPECT_EQ(s.at("HVD_TIMELINE"), "/tmp/horovod_timeline.json");
  EXPECT_EQ(s.at("HVD_TIMELINE_MARK_CYCLES"), "1");
  EXPECT_EQ(s.at("HVD_STALL_CHECK_TIME"), "120");
  EXPECT_EQ(s.at("HVD_STALL_SHUTDOWN_TIME"), "240");
  EXPECT_EQ(s.at("HVD_TIMEOUT"), "60");
  EXPECT_EQ(s.at("HVD_CPU_BACKEND"), "hvd");
  EXPECT_EQ(s.at("HVD_LOG_LEVEL"), "info");
  EXPECT_EQ(p.options.logLevel, "info");
  // num_nccl_streams is horovodrun's only; the rest of the file asks for what hvd does.
  EXPECT_EQ(warnings(p),
            std::vector<std::string>{
                "hvdrun: warning: --num-nccl-streams (library_options.num_nccl_streams in " + path +
                ") ignored: hvd's NCCL backend runs on one stream per device"});

  // Without the flags, the file's values.
  p = run({"--config-file", path});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(settings(p).at("HVD_FUSION_THRESHOLD"), std::to_string(32LL << 20));
  EXPECT_EQ(settings(p).at("HVD_CYCLE_TIME"), "10");
  EXPECT_EQ(settings(p).at("HVD_STALL_CHECK_DISABLE"), "1");
}

TEST_F(HorovodrunConfigFile, AFlagAndItsOppositeBothDecideTheKey) {
  const std::string path =
      write("c.yaml", "params:\n  hierarchical_allreduce: true\ncontroller: mpi\n");
  Parsed p = run({"--config-file", path, "--no-hierarchical-allreduce", "--gloo"});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(settings(p).at("HVD_HIERARCHICAL_ALLREDUCE"), "0");
  EXPECT_EQ(settings(p).at("HVD_CPU_BACKEND"), "hvd");
  EXPECT_TRUE(warnings(p).empty()) << p.stderrText;  // --mpi never came from the file

  p = run({"--config-file", path});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  ASSERT_EQ(warnings(p).size(), 1u) << p.stderrText;
  EXPECT_EQ(
      warnings(p)[0].rfind("hvdrun: warning: --mpi (controller in " + path + ") ignored: ", 0), 0u)
      << p.stderrText;
}

TEST_F(HorovodrunConfigFile, AutotuneKeysCountOnlyWhenAutotuneIsEnabled) {
  const std::string off = write("off.yaml", "autotune:\n  log_file: a.csv\n  enabled: false\n");
  Parsed p = run({"--config-file", off});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(p.stderrText, "");
  EXPECT_EQ(settings(p).at("HVD_AUTOTUNE"), "0");
  EXPECT_EQ(settings(p).count("HVD_AUTOTUNE_LOG"), 0u);
  const std::string on = write("on.yaml",
                               "autotune:\n  log_file: a.csv\n  enabled: yes\n"
                               "  steps_per_sample: 5\n  gaussian_process_noise: 0.5\n");
  p = run({"--config-file", on});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(p.stderrText, "");
  EXPECT_EQ(settings(p).at("HVD_AUTOTUNE"), "1");
  EXPECT_EQ(settings(p).at("HVD_AUTOTUNE_LOG"),
            (std::filesystem::current_path() / "a.csv").lexically_normal().string());
  EXPECT_EQ(settings(p).at("HVD_AUTOTUNE_STEPS_PER_SAMPLE"), "5");
  EXPECT_EQ(settings(p).at("HVD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE"), "0.5");
}

TEST_F(HorovodrunConfigFile, UnknownKeysAreIgnoredWithAWarningNamingThem) {
  const std::string path =
      write("c.yaml", "params:\n  cycle_time_ms: 3\n  cycle_time: 4\nextras:\n  a: 1\n");
  Parsed p = run({"--config-file", path});
  ASSERT_EQ(p.code, std::nullopt) << p.stderrText;
  EXPECT_EQ(settings(p).at("HVD_CYCLE_TIME"), "3");
  EXPECT_EQ(warnings(p),
            (std::vector<std::string>{
                "hvdrun: warning: " + path +
                    ": params.cycle_time (line 3) is not one of horovodrun's settings; ignored",
                "hvdrun: warning: " + path +
                    ": extras (line 4) is not one of horovodrun's settings; ignored"}));
}

TEST_F(HorovodrunConfigFile, BadFilesAndValuesAreUsageErrorsNamingFileAndKey) {
  struct Case {
    std::string text;
    std::string error;
  };
  const std::vector<Case> cases = {
      {"params:\n  cycle_time_ms: abc\n",
       "params.cycle_time_ms: --cycle-time-ms: 'abc' is not a number"},
      {"params:\n  fusion_threshold_mb: -1\n",
       "params.fusion_threshold_mb: --fusion-threshold-mb: '-1' is out of range"},
      {"stall_check:\n  enabled: sometimes\n",
       "stall_check.enabled (line 2): 'sometimes' is not true or false"},
      {"controller: nccl\n",
       "controller (line 1): 'nccl' is not a controller (expected gloo or mpi)"},
      {"params: [1, 2]\n",
       "params (line 1): expected a mapping of settings (name: value), found a list"},
      {"params:\n  cache_capacity: {a: 1}\n",
       "params.cache_capacity (line 2): expected a single value, found a mapping"},
      {"- params\n",
       "expected horovodrun's sections (controller, params, ...) as a mapping, found a list"},
      {"params:\n  x: [1\n", "is not YAML: line 3, column 1"},
  };
  for (const Case& c : cases) {
    const std::string path = write("bad.yaml", c.text);
    const Parsed p = run({"--config-file", path});
    EXPECT_EQ(p.code, 2) << c.text;
    EXPECT_TRUE(says(p, "hvdrun: --config-file '" + path + "'")) << p.stderrText;
    EXPECT_TRUE(says(p, c.error)) << c.text << "\n" << p.stderrText;
  }
  const Parsed missing = run({"--config-file", dir_.file("none.yaml")});
  EXPECT_EQ(missing.code, 2);
  EXPECT_TRUE(says(missing, "none.yaml' cannot be read: No such file or directory"))
      << missing.stderrText;
  const Parsed empty = run({"--config-file", write("empty.yaml", "")});
  ASSERT_EQ(empty.code, std::nullopt) << empty.stderrText;
  EXPECT_TRUE(empty.options.engineSettings.empty());
}

TEST_F(HorovodrunConfigFile, ReaderMapsEveryHorovodKeyToItsFlag) {
  const ConfigFile file = readConfigFile(write("all.yaml", kHorovodConfig));
  std::vector<std::string> got;
  for (const ConfigSetting& s : file.settings) {
    got.push_back(s.key + " -> " + s.flag + (s.value.empty() ? "" : " " + s.value));
  }
  EXPECT_EQ(got, (std::vector<std::string>{
                     "controller -> --gloo",
                     "params.fusion_threshold_mb -> --fusion-threshold-mb 32",
                     "params.cycle_time_ms -> --cycle-time-ms 10",
                     "params.cache_capacity -> --cache-capacity 2048",
                     "params.hierarchical_allreduce -> --hierarchical-allreduce",
                     "params.hierarchical_allgather -> --no-hierarchical-allgather",
                     "autotune.enabled -> --no-autotune",
                     "timeline.filename -> --timeline-filename /tmp/horovod_timeline.json",
                     "timeline.mark_cycles -> --timeline-mark-cycles",
                     "stall_check.enabled -> --no-stall-check",
                     "stall_check.warning_time_seconds -> --stall-check-warning-time-seconds 120",
                     "stall_check.shutdown_time_seconds -> --stall-check-shutdown-time-seconds 240",
                     "library_options.mpi_threads_disable -> --no-mpi-threads-disable",
                     "library_options.num_nccl_streams -> --num-nccl-streams 2",
                     "library_options.gloo_timeout_seconds -> --gloo-timeout-seconds 60",
                     "logging.level -> --log-level INFO",
                     "logging.with_timestamp -> --log-with-timestamp",
                 }));
  EXPECT_TRUE(file.warnings.empty());
  EXPECT_EQ(file.settings[1].decidedBy, std::vector<std::string>{"--fusion-threshold-mb"});
  EXPECT_EQ(file.settings[9].decidedBy,
            (std::vector<std::string>{"--stall-check", "--no-stall-check"}));
}

// --- --help ----------------------------------------------------------------------------------

TEST(HorovodrunCli, HelpListsEveryFlagUnderItsOwnHeading) {
  ::testing::internal::CaptureStdout();
  ASSERT_EQ(parse({"hvdrun", "--help"}).code, 0);
  const std::string help = ::testing::internal::GetCapturedStdout();
  const size_t heading = help.find("\nhorovodrun compatibility");
  ASSERT_NE(heading, std::string::npos) << help;
  for (const char* flag : {"--network-interfaces,--network-interface",
                           "--tcp",
                           "--gloo",
                           "--mpi",
                           "--gloo-timeout-seconds",
                           "--no-stall-check",
                           "--stall-check",
                           "--no-hierarchical-allreduce",
                           "--hierarchical-allgather",
                           "--no-hierarchical-allgather",
                           "--disable-cache",
                           "--num-nccl-streams",
                           "--thread-affinity",
                           "--autotune",
                           "-p,--ssh-port",
                           "-i,--ssh-identity-file",
                           "--mpi-args",
                           "--binding-args",
                           "--mpi-threads-disable",
                           "--log-with-timestamp",
                           "--log-without-timestamp",
                           "--prefix-output-with-timestamp",
                           "--config-file"}) {
    // The flag begins a line of the section, whole: followed by a blank, a comma or the line's end.
    const size_t at = help.find("\n  " + std::string(flag), heading);
    ASSERT_NE(at, std::string::npos) << flag;
    EXPECT_NE(std::string(" ,\n").find(help[at + 3 + std::strlen(flag)]), std::string::npos)
        << flag;
  }
  EXPECT_NE(help.find("-> HVD_DATA_IFACE"), std::string::npos);
  EXPECT_NE(help.find("-> NCCL_IB_DISABLE=1"), std::string::npos);
  EXPECT_NE(help.find("also -hostfile"), std::string::npos);
  EXPECT_NE(help.find("also -cb"), std::string::npos);
  EXPECT_NE(help.find("-v,--version"), std::string::npos);
  EXPECT_NE(help.find("$HOROVOD_START_TIMEOUT, else 30"), std::string::npos);
}

}  // namespace
}  // namespace hvd::launcher
