// `hvdrun doctor` (launcher/doctor_report.h, launcher/doctor_render.h, its command line): the
// rules that turn the agents' answers into findings, the clock rule's boundary, and the table
// and JSON it prints for fixed answers, byte for byte.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hvdrun_parse.h"
#include "launcher/doctor_render.h"
#include "launcher/doctor_report.h"

namespace hvd::launcher {
namespace {

using agent::coordinator::DescribeResult;
using agent::node::GpuInfo;
using agent::node::NodeDescription;

constexpr int64_t kT0 = 1'700'000'000'000'000;  // hvdrun's clock when it asks, in us
constexpr uint64_t k80GiB = 80ull << 30;

NodeDescription node(const std::string& version, int cpus, std::vector<GpuInfo> gpus = {}) {
  NodeDescription d;
  d.hostname = "box";
  d.addresses = {"10.0.0.2"};
  d.cpus = cpus;
  d.gpus = std::move(gpus);
  d.version = version;
  return d;
}

GpuInfo h100(int index) {
  GpuInfo g;
  g.index = index;
  g.uuid = "GPU-" + std::to_string(index);
  g.name = "NVIDIA H100 80GB HBM3";
  g.pciBusId = "00000000:3B:00." + std::to_string(index);
  g.memoryBytes = k80GiB;
  return g;
}

// An agent that answered: sent at kT0, answered `roundTripUs` later, its clock `offsetUs` ahead
// of the midpoint.
AgentProbe answered(const std::string& host, NodeDescription description, int64_t offsetUs,
                    int64_t roundTripUs = 0) {
  AgentProbe p;
  p.host = host;
  p.address = host + ":7475";
  p.result.description = std::move(description);
  p.sentUnixUs = kT0;
  p.answeredUnixUs = kT0 + roundTripUs;
  p.result.agentUnixTimeUs = kT0 + roundTripUs / 2 + offsetUs;
  return p;
}

AgentProbe failed(const std::string& host, const std::string& reason, bool auth) {
  AgentProbe p;
  p.host = host;
  p.address = host + ":7475";
  p.result.error = {host, p.address, reason, auth};
  p.sentUnixUs = kT0;
  p.answeredUnixUs = kT0 + 5000;
  return p;
}

TEST(HvdrunDoctor, ClockOffsetIsTheAgentsTimeMinusTheMidpointWithHalfTheRoundTrip) {
  const ClockOffset c = clockOffset(1000, 1400, 1700);
  EXPECT_EQ(c.offsetUs, 500);
  EXPECT_EQ(c.uncertaintyUs, 200);
  const ClockOffset behind = clockOffset(1000, 1401, 900);
  EXPECT_EQ(behind.offsetUs, -300);
  EXPECT_EQ(behind.uncertaintyUs, 201);  // rounded up: never claims more than it knows
  // hvdrun's clock stepped back during the call: the size of the step is still the error bound.
  EXPECT_EQ(clockOffset(1000, 800, 900).uncertaintyUs, 100);
}

TEST(HvdrunDoctor, ClockRuleFlagsOnlyOffsetsBeyondOneSecondEitherWay) {
  EXPECT_EQ(kClockLimitUs, 1'000'000);
  EXPECT_FALSE(clockOff({1'000'000, 0}, kClockLimitUs));
  EXPECT_FALSE(clockOff({-1'000'000, 0}, kClockLimitUs));
  EXPECT_TRUE(clockOff({1'000'001, 0}, kClockLimitUs));
  EXPECT_TRUE(clockOff({-1'000'001, 0}, kClockLimitUs));
  // The estimate decides, not its worst case: a slow answer does not make a good clock bad.
  EXPECT_FALSE(clockOff({900'000, 500'000}, kClockLimitUs));

  const DoctorReport atLimit =
      buildDoctorReport({answered("a", node("1.0", 2), 1'000'000, 400)}, "1.0");
  EXPECT_TRUE(atLimit.ok());
  EXPECT_EQ(atLimit.hosts[0].status, HostStatus::kOk);
  EXPECT_EQ(atLimit.hosts[0].clock->offsetUs, 1'000'000);
  const DoctorReport past =
      buildDoctorReport({answered("a", node("1.0", 2), -1'000'001, 400)}, "1.0");
  ASSERT_EQ(past.problems.size(), 1u);
  EXPECT_EQ(past.hosts[0].status, HostStatus::kClock);
  EXPECT_EQ(past.problems[0].kind, HostStatus::kClock);
  EXPECT_NE(past.problems[0].message.find("clock -1.000 s (±0.000 s) from this host's"),
            std::string::npos)
      << past.problems[0].message;
}

TEST(HvdrunDoctor, HealthyAgentsMakeAnOkReport) {
  const DoctorReport r = buildDoctorReport(
      {answered("a", node("1.0", 2), 300, 100), answered("b", node("1.0", 4), -20, 80)}, "1.0");
  EXPECT_TRUE(r.ok());
  ASSERT_EQ(r.hosts.size(), 2u);
  EXPECT_EQ(r.hosts[1].host, "b");
  EXPECT_EQ(r.hosts[1].status, HostStatus::kOk);
  EXPECT_EQ(r.hosts[1].node->cpus, 4);
  EXPECT_EQ(r.hosts[1].clock->offsetUs, -20);
  EXPECT_EQ(r.hosts[1].clock->uncertaintyUs, 40);
}

TEST(HvdrunDoctor, UnreachableAndRefusedKeyAreDifferentFindingsNamingHostAndAddress) {
  const DoctorReport r =
      buildDoctorReport({failed("a", "connection refused", false),
                         failed("b", "authentication failed: bad signature", true)},
                        "1.0");
  ASSERT_EQ(r.problems.size(), 2u);
  EXPECT_EQ(r.hosts[0].status, HostStatus::kUnreachable);
  EXPECT_EQ(r.problems[0].kind, HostStatus::kUnreachable);
  EXPECT_EQ(r.problems[0].message.rfind("a (a:7475): agent unreachable: connection refused; ", 0),
            0u)
      << r.problems[0].message;
  EXPECT_EQ(r.hosts[1].status, HostStatus::kAuthFailed);
  EXPECT_EQ(r.problems[1].kind, HostStatus::kAuthFailed);
  EXPECT_EQ(r.problems[1].message.rfind(
                "b (b:7475): the agent refused hvdrun's call: authentication failed: bad "
                "signature; give --key-file",
                0),
            0u)
      << r.problems[1].message;
  EXPECT_FALSE(r.hosts[1].clock.has_value());
}

TEST(HvdrunDoctor, VersionAndClockOfOneHostAreTwoProblemsAndTheVersionIsItsStatus) {
  const DoctorReport r = buildDoctorReport({answered("a", node("0.9", 2), 5'000'000, 1000)}, "1.0");
  ASSERT_EQ(r.problems.size(), 2u);
  EXPECT_EQ(r.hosts[0].status, HostStatus::kVersionMismatch);
  EXPECT_EQ(r.problems[0].kind, HostStatus::kVersionMismatch);
  EXPECT_NE(r.problems[0].message.find("hvdagent 0.9 but hvdrun 1.0"), std::string::npos);
  EXPECT_EQ(r.problems[1].kind, HostStatus::kClock);
  EXPECT_NE(r.problems[1].message.find("clock +5.000 s (±0.000 s)"), std::string::npos)
      << r.problems[1].message;
}

TEST(HvdrunDoctor, AnAgentThatDoesNotSayItsTimeHasNoClockFinding) {
  AgentProbe p = answered("a", node("1.0", 2), 0, 100);
  p.result.agentUnixTimeUs = 0;
  const DoctorReport r = buildDoctorReport({p}, "1.0");
  EXPECT_TRUE(r.ok());
  EXPECT_FALSE(r.hosts[0].clock.has_value());
  EXPECT_NE(formatDoctorTable(r).find("OK      1.0      -           2"), std::string::npos)
      << formatDoctorTable(r);
}

TEST(HvdrunDoctor, GpuSummaryCountsIdenticalGpusAndNamesTheirHolders) {
  EXPECT_EQ(gpuSummary({}, {}), "none");
  GpuInfo small = h100(2);
  small.name = "Tesla T4";
  small.memoryBytes = 16ull << 30;
  EXPECT_EQ(gpuSummary({h100(0), h100(1), small},
                       {{0, "hvd-a"}, {2, "hvd-b"}, {1, "hvd-a"}, {2, "hvd-c"}}),
            "2x NVIDIA H100 80GB HBM3 (80 GiB), 1x Tesla T4 (16 GiB); GPU 0,1 held by hvd-a; "
            "GPU 2 held by hvd-b; GPU 2 held by hvd-c");
}

// Four hosts, one of each kind: the table and the problem lines exactly.
DoctorReport mixedReport() {
  AgentProbe a = answered("node-a", node("0.1.0", 8, {h100(0), h100(1)}), 1000, 400);
  a.result.gpuHolders = {{0, "hvd-1a2b"}};
  return buildDoctorReport({a, failed("node-b", "connection refused", false),
                            answered("node-c", node("0.0.9", 4), -2'500'000),
                            failed("node-d", "authentication failed: bad signature", true)},
                           "0.1.0");
}

TEST(HvdrunDoctor, TableHasOneRowPerHostThenOneLinePerProblem) {
  const std::string expected =
      "HOST    ADDRESS      STATUS            VERSION  CLOCK (ms)    CPUS  GPUS\n"
      "node-a  node-a:7475  OK                0.1.0    +1.0 ±0.2     8     2x NVIDIA H100 80GB "
      "HBM3 (80 GiB); GPU 0 held by hvd-1a2b\n"
      "node-b  node-b:7475  UNREACHABLE       -        -             -     -\n"
      "node-c  node-c:7475  VERSION MISMATCH  0.0.9    -2500.0 ±0.0  4     none\n"
      "node-d  node-d:7475  AUTH FAILED       -        -             -     -\n"
      "\n"
      "4 problem(s) on 3 of 4 host(s) (hvdrun 0.1.0):\n"
      "  node-b (node-b:7475): agent unreachable: connection refused; start hvdagent there, "
      "listening on an address this host reaches (hvdagent --listen), or correct the host name "
      "or --agent-port\n"
      "  node-c (node-c:7475): hvdagent 0.0.9 but hvdrun 0.1.0: a job needs one hvd build on "
      "every host; install hvdrun's build there and restart the agent (`hvdagent --version` "
      "says which it runs)\n"
      "  node-c (node-c:7475): clock -2.500 s (±0.000 s) from this host's, beyond the limit of "
      "1.000 s: log lines and job records of different hosts will not line up; synchronise its "
      "clock (NTP: chrony or systemd-timesyncd)\n"
      "  node-d (node-d:7475): the agent refused hvdrun's call: authentication failed: bad "
      "signature; give --key-file the cluster key the agents use (the file of their "
      "--key-file), and keep this host's clock within the agents' signature window (30 s)\n";
  EXPECT_EQ(formatDoctorTable(mixedReport()), expected);
}

TEST(HvdrunDoctor, TableOfHealthyAgentsEndsWithOneOkLine) {
  const DoctorReport r = buildDoctorReport(
      {answered("h0", node("0.1.0", 2), -40, 30), answered("h1", node("0.1.0", 16), 0, 1000)},
      "0.1.0");
  EXPECT_EQ(formatDoctorTable(r),
            "HOST  ADDRESS  STATUS  VERSION  CLOCK (ms)  CPUS  GPUS\n"
            "h0    h0:7475  OK      0.1.0    +0.0 ±0.0   2     none\n"
            "h1    h1:7475  OK      0.1.0    +0.0 ±0.5   16    none\n"
            "\n"
            "all 2 agent(s) OK (hvdrun 0.1.0)\n");
}

TEST(HvdrunDoctor, JsonHasEveryFieldOfEveryHostAndNullWhatWasNotSaid) {
  AgentProbe a = answered("node-a", node("0.1.0", 8, {h100(0)}), 1000, 400);
  a.result.gpuHolders = {{0, "hvd-1a2b"}};
  const DoctorReport r =
      buildDoctorReport({a, failed("node-b", "connection refused", false)}, "0.1.0");
  EXPECT_EQ(
      formatDoctorJson(r),
      "{\"ok\":false,\"hvdrun_version\":\"0.1.0\",\"clock_limit_us\":1000000,\"hosts\":["
      "{\"host\":\"node-a\",\"address\":\"node-a:7475\",\"status\":\"OK\",\"reachable\":true,"
      "\"authenticated\":true,\"error\":null,\"hostname\":\"box\",\"version\":\"0.1.0\","
      "\"clock_offset_us\":1000,\"clock_uncertainty_us\":200,\"cpus\":8,"
      "\"addresses\":[\"10.0.0.2\"],\"gpus\":[{\"index\":0,\"name\":\"NVIDIA H100 80GB HBM3\","
      "\"uuid\":\"GPU-0\",\"pci_bus_id\":\"00000000:3B:00.0\",\"memory_bytes\":85899345920,"
      "\"held_by\":[\"hvd-1a2b\"]}]},"
      "{\"host\":\"node-b\",\"address\":\"node-b:7475\",\"status\":\"UNREACHABLE\","
      "\"reachable\":false,\"authenticated\":false,\"error\":\"connection refused\","
      "\"hostname\":null,\"version\":null,\"clock_offset_us\":null,"
      "\"clock_uncertainty_us\":null,\"cpus\":null,\"addresses\":null,\"gpus\":null}],"
      "\"problems\":[{\"host\":\"node-b\",\"address\":\"node-b:7475\",\"kind\":\"unreachable\","
      "\"message\":\"node-b (node-b:7475): agent unreachable: connection refused; start "
      "hvdagent there, listening on an address this host reaches (hvdagent --listen), or "
      "correct the host name or --agent-port\"}]}\n");
}

TEST(HvdrunDoctor, JsonEscapesOddHostNamesAndReasons) {
  EXPECT_EQ(jsonString(""), "\"\"");
  EXPECT_EQ(jsonString("a\"b\\c/d"), "\"a\\\"b\\\\c/d\"");
  EXPECT_EQ(jsonString("x\ny\rz\tw\b\f"), "\"x\\ny\\rz\\tw\\b\\f\"");
  EXPECT_EQ(jsonString(std::string("\x01\x1f\x7f", 3)), "\"\\u0001\\u001f\\u007f\"");
  EXPECT_EQ(jsonString(std::string("nul\0end", 7)), "\"nul\\u0000end\"");
  // UTF-8 passes as it is; bytes that are not UTF-8 become U+FFFD, one each.
  EXPECT_EQ(jsonString("h\xc3\xb6st-\xe2\x82\xac-\xf0\x9f\x98\x80"),
            "\"h\xc3\xb6st-\xe2\x82\xac-\xf0\x9f\x98\x80\"");
  EXPECT_EQ(jsonString("bad\xff"), "\"bad\\ufffd\"");
  EXPECT_EQ(jsonString("cut\xc3"), "\"cut\\ufffd\"");
  EXPECT_EQ(jsonString("\xc0\xaf"), "\"\\ufffd\\ufffd\"");             // overlong '/'
  EXPECT_EQ(jsonString("\xed\xa0\x80"), "\"\\ufffd\\ufffd\\ufffd\"");  // a surrogate

  const DoctorReport r =
      buildDoctorReport({failed("we\"ird\\host\n", "no \"route\"\x02", false)}, "0.1.0");
  const std::string json = formatDoctorJson(r);
  EXPECT_NE(
      json.find("\"host\":\"we\\\"ird\\\\host\\n\",\"address\":\"we\\\"ird\\\\host\\n:7475\""),
      std::string::npos)
      << json;
  EXPECT_NE(json.find("\"error\":\"no \\\"route\\\"\\u0002\""), std::string::npos) << json;
}

// hvdrun doctor's command line.
cli_test::Parsed parse(std::vector<std::string> args) {
  args.insert(args.begin(), "hvdrun");
  return cli_test::parse(std::move(args));
}

TEST(HvdrunDoctor, CommandLineTakesTheAgentOptionsAndJson) {
  cli_test::Parsed p = parse({"doctor"});
  ASSERT_FALSE(p.code.has_value()) << p.stderrText;
  EXPECT_EQ(p.options.action, Action::kDoctor);
  EXPECT_FALSE(p.options.json);
  EXPECT_EQ(p.options.startTimeoutSeconds, kDefaultAgentAnswerSeconds);
  EXPECT_TRUE(p.options.hostList.empty());

  p = parse({"doctor", "-H", "a,b:4", "--agent-port", "7000", "--key-file", "/k", "--json",
             "--start-timeout", "2.5"});
  ASSERT_FALSE(p.code.has_value()) << p.stderrText;
  EXPECT_EQ(p.options.action, Action::kDoctor);
  EXPECT_TRUE(p.options.json);
  EXPECT_EQ(p.options.hostList, "a,b:4");
  EXPECT_EQ(p.options.agentPort, 7000);
  EXPECT_EQ(p.options.keyFile, "/k");
  EXPECT_EQ(p.options.startTimeoutSeconds, 2.5);

  EXPECT_EQ(parse({"doctor", "--bogus"}).code, 2);
  EXPECT_EQ(parse({"doctor", "--start-timeout", "0"}).code, 2);
  EXPECT_EQ(parse({"doctor", "stray"}).code, 2);
  ::testing::internal::CaptureStdout();
  const cli_test::Parsed help = parse({"doctor", "--help"});
  const std::string helpText = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(helpText.find("Usage: hvdrun doctor"), std::string::npos) << helpText;
  EXPECT_NE(helpText.find("--json"), std::string::npos);
}

}  // namespace
}  // namespace hvd::launcher
