// hvdagent's metrics (agent/metrics): the exact text of a snapshot in Prometheus' format, label
// escaping, the --metrics-listen values, the snapshot read from a ledger and job records, and
// the HTTP endpoint's answers (200, 404, 405) and its timeout for a client that sends nothing.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "agent/ledger/resource_ledger.h"
#include "agent/metrics/collect.h"
#include "agent/metrics/exposition.h"
#include "agent/metrics/metrics_listen.h"
#include "agent/metrics/metrics_server.h"
#include "agent/records/job_history.h"
#include "common/test_support.h"
#include "hvd/error.hpp"

namespace hvd::agent::metrics {
namespace {

using namespace std::chrono_literals;

AgentSnapshot sampleSnapshot() {
  AgentSnapshot s;
  s.version = "1.2.3";
  s.jobsByState = {{"queued", 1}, {"running", 2}, {"completed", 5}};
  s.queueLength = 1;
  s.slots = 8;
  s.slotsHeld = 3;
  s.gpus = 4;
  s.gpusHeld = 3;
  s.restarts = 2;
  s.elasticRounds = 7;
  s.ranksByJob = {{"hvd-00aa11", 2}, {"hvd-ffee22", 1}};
  return s;
}

TEST(AgentMetricsRenderTest, RendersEveryFamilyWithHelpTypeAndValue) {
  const std::string expected =
      "# HELP hvd_agent_info hvdagent's version, as a label; the value is always 1.\n"
      "# TYPE hvd_agent_info gauge\n"
      "hvd_agent_info{version=\"1.2.3\"} 1\n"
      "# HELP hvd_agent_jobs Jobs this agent leads, by state, as hvdrun ps lists them (finished "
      "ones until --keep-jobs prunes them).\n"
      "# TYPE hvd_agent_jobs gauge\n"
      "hvd_agent_jobs{state=\"queued\"} 1\n"
      "hvd_agent_jobs{state=\"running\"} 2\n"
      "hvd_agent_jobs{state=\"completed\"} 5\n"
      "# HELP hvd_agent_queue_length Jobs in this agent's queue, waiting to start.\n"
      "# TYPE hvd_agent_queue_length gauge\n"
      "hvd_agent_queue_length 1\n"
      "# HELP hvd_agent_slots Ranks this node runs at once across all jobs (--slots); +Inf "
      "without a limit.\n"
      "# TYPE hvd_agent_slots gauge\n"
      "hvd_agent_slots 8\n"
      "# HELP hvd_agent_slots_held Slots that jobs hold on this node (reserved or running).\n"
      "# TYPE hvd_agent_slots_held gauge\n"
      "hvd_agent_slots_held 3\n"
      "# HELP hvd_agent_slots_free Slots no job holds on this node; +Inf without a limit.\n"
      "# TYPE hvd_agent_slots_free gauge\n"
      "hvd_agent_slots_free 5\n"
      "# HELP hvd_agent_gpus GPUs of this node, as discovered at start-up.\n"
      "# TYPE hvd_agent_gpus gauge\n"
      "hvd_agent_gpus 4\n"
      "# HELP hvd_agent_gpus_held GPUs that jobs hold on this node (a GPU shared by several "
      "jobs counts once).\n"
      "# TYPE hvd_agent_gpus_held gauge\n"
      "hvd_agent_gpus_held 3\n"
      "# HELP hvd_agent_gpus_free GPUs no job holds on this node.\n"
      "# TYPE hvd_agent_gpus_free gauge\n"
      "hvd_agent_gpus_free 1\n"
      "# HELP hvd_agent_ranks_running Ranks running on this node, whichever agent leads their "
      "job.\n"
      "# TYPE hvd_agent_ranks_running gauge\n"
      "hvd_agent_ranks_running 3\n"
      "# HELP hvd_agent_job_ranks_running Ranks running on this node, per job (jobs with a "
      "running rank only).\n"
      "# TYPE hvd_agent_job_ranks_running gauge\n"
      "hvd_agent_job_ranks_running{job_id=\"hvd-00aa11\"} 2\n"
      "hvd_agent_job_ranks_running{job_id=\"hvd-ffee22\"} 1\n"
      "# HELP hvd_agent_restarts_total Attempts of jobs this agent leads started again after a "
      "failure, since it started.\n"
      "# TYPE hvd_agent_restarts_total counter\n"
      "hvd_agent_restarts_total 2\n"
      "# HELP hvd_agent_elastic_rounds_total Rounds that elastic jobs this agent leads began "
      "(each job's first included), since it started.\n"
      "# TYPE hvd_agent_elastic_rounds_total counter\n"
      "hvd_agent_elastic_rounds_total 7\n";
  EXPECT_EQ(renderMetrics(sampleSnapshot()), expected);
}

TEST(AgentMetricsRenderTest, NoSlotLimitIsInfinityAndFreeNeverGoesBelowZero) {
  AgentSnapshot s;
  s.slots = std::nullopt;
  s.slotsHeld = 12;
  s.gpus = 2;
  s.gpusHeld = 3;  // cannot happen, but must not wrap around
  const std::string text = renderMetrics(s);
  EXPECT_NE(text.find("\nhvd_agent_slots +Inf\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nhvd_agent_slots_held 12\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nhvd_agent_slots_free +Inf\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nhvd_agent_gpus_free 0\n"), std::string::npos) << text;
  // No running job: the family is still described, with no sample.
  EXPECT_NE(text.find("# TYPE hvd_agent_job_ranks_running gauge\n# HELP"), std::string::npos)
      << text;
  EXPECT_NE(text.find("\nhvd_agent_ranks_running 0\n"), std::string::npos) << text;
}

TEST(AgentMetricsRenderTest, EscapesBackslashQuoteAndLineFeedInLabelValues) {
  EXPECT_EQ(escapeLabelValue("plain-1.0"), "plain-1.0");
  EXPECT_EQ(escapeLabelValue("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  EXPECT_EQ(escapeLabelValue(""), "");
  AgentSnapshot s;
  s.version = "1.0 \"dev\"\nbuild\\x";
  s.ranksByJob = {{"odd\"job", 1}};
  const std::string text = renderMetrics(s);
  EXPECT_NE(text.find("hvd_agent_info{version=\"1.0 \\\"dev\\\"\\nbuild\\\\x\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("hvd_agent_job_ranks_running{job_id=\"odd\\\"job\"} 1\n"), std::string::npos)
      << text;
  // Every line is a comment or a sample: no raw line feed split a label value.
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    ASSERT_NE(end, std::string::npos);
    const std::string line = text.substr(start, end - start);
    EXPECT_TRUE(line.rfind("# ", 0) == 0 || line.rfind("hvd_agent_", 0) == 0) << line;
    start = end + 1;
  }
}

TEST(AgentMetricsListenTest, APortAloneIsLoopbackAndAddressesAreTakenAsGiven) {
  struct Case {
    const char* text;
    const char* host;
    int port;
  };
  for (const Case& c : {Case{"9100", "127.0.0.1", 9100}, Case{":9100", "127.0.0.1", 9100},
                        Case{"0", "127.0.0.1", 0}, Case{"localhost:0", "127.0.0.1", 0},
                        Case{"0.0.0.0:9100", "0.0.0.0", 9100}, Case{"[::1]:0", "::1", 0},
                        Case{"10.1.2.3:65535", "10.1.2.3", 65535}}) {
    SCOPED_TRACE(c.text);
    const common::ListenAddress a = parseMetricsListen(c.text);
    EXPECT_EQ(a.host, c.host);
    EXPECT_EQ(a.port, c.port);
  }
}

TEST(AgentMetricsListenTest, RefusesWhatCannotBeBoundNamingTheOptionAndTheValue) {
  struct Case {
    const char* text;
    const char* why;
  };
  for (const Case& c :
       {Case{"", "is empty"}, Case{"node1:9100", "'node1' is not an IP address"},
        Case{"70000", "the port is above 65535"}, Case{"1.2.3.4", "no port"},
        Case{"127.0.0.1:x", "the port is not a number"}, Case{"::1:80", "needs brackets"}}) {
    SCOPED_TRACE(c.text);
    try {
      parseMetricsListen(c.text);
      ADD_FAILURE() << "accepted";
    } catch (const InvalidArgumentError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(std::string("--metrics-listen '") + c.text + "'"), std::string::npos)
          << what;
      EXPECT_NE(what.find(c.why), std::string::npos) << what;
    }
  }
}

TEST(AgentMetricsCollectTest, ReadsTheLedgerAndTheRecordsEveryStateListed) {
  test::TempDir dir;
  std::vector<node::GpuInfo> gpus(3);
  for (int i = 0; i < 3; ++i) gpus[i].index = i;
  ledger::ResourceLedger ledger("node1", gpus, 6, [] { return std::chrono::steady_clock::now(); });
  ledger::Request a;
  a.key = "hvd-000001";
  a.job = "hvd-000001";
  a.ranks = 2;
  ASSERT_EQ(ledger.reserve(a).verdict, ledger::Verdict::kGranted);
  ledger::Request shared;
  shared.key = "hvd-000002";
  shared.job = "hvd-000002";
  shared.ranks = 1;
  shared.share = true;
  ASSERT_EQ(ledger.reserve(shared).verdict, ledger::Verdict::kGranted);

  records::JobHistory history(dir.path().string());
  for (v1::JobState state : {v1::JOB_COMPLETED, v1::JOB_COMPLETED, v1::JOB_FAILED}) {
    v1::JobInfo info;
    info.set_job_id(history.newJobId());
    info.set_state(state);
    history.create(info);
  }

  AgentParts parts;
  parts.version = "9.9";
  parts.ledger = &ledger;
  parts.history = &history;
  const AgentSnapshot s = collectSnapshot(parts);
  EXPECT_EQ(s.version, "9.9");
  const std::vector<std::pair<std::string, uint64_t>> states = {
      {"pending", 0}, {"queued", 0},    {"running", 0}, {"completed", 2},
      {"failed", 1},  {"cancelled", 0}, {"timeout", 0}, {"lost", 0}};
  EXPECT_EQ(s.jobsByState, states);
  EXPECT_EQ(s.slots, std::optional<uint64_t>(6));
  EXPECT_EQ(s.slotsHeld, 3u);
  EXPECT_EQ(s.gpus, 3u);
  EXPECT_EQ(s.gpusHeld, 3u);  // two exclusive, the shared job on the third
  EXPECT_EQ(s.queueLength, 0u);
  EXPECT_TRUE(s.ranksByJob.empty());

  ledger.release("hvd-000001");
  ledger::ResourceLedger unlimited("node1", {}, 0, [] { return std::chrono::steady_clock::now(); });
  parts.ledger = &unlimited;
  EXPECT_EQ(collectSnapshot(parts).slots, std::nullopt);
}

// A connected loopback socket to `port`, or -1.
int connectTo(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Everything the server sends on `fd` until it closes, waiting at most `timeout`; "<timeout>"
// appended when it did not close in time.
std::string readAll(int fd, std::chrono::milliseconds timeout) {
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p = {fd, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) {
      return out + "<timeout>";
    }
    char buf[4096];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

// One request on a fresh connection; the whole answer.
std::string exchange(int port, const std::string& request) {
  const int fd = connectTo(port);
  if (fd < 0) return "<cannot connect>";
  if (::write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    ::close(fd);
    return "<cannot write>";
  }
  std::string answer = readAll(fd, 10s);
  ::close(fd);
  return answer;
}

common::ListenAddress loopbackAnyPort() { return parseMetricsListen("127.0.0.1:0"); }

TEST(AgentMetricsServerTest, AnswersGetMetricsOnlyWithNotFoundAndMethodNotAllowedOtherwise) {
  std::atomic<int> renders{0};
  MetricsServer server(loopbackAnyPort(), [&] {
    ++renders;
    return std::string("hvd_agent_queue_length 0\n");
  });
  ASSERT_GT(server.port(), 0);

  const std::string ok =
      exchange(server.port(), "GET /metrics HTTP/1.1\r\nHost: x\r\nUser-Agent: test\r\n\r\n");
  EXPECT_EQ(ok.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << ok;
  EXPECT_NE(ok.find("Content-Type: text/plain; version=0.0.4"), std::string::npos) << ok;
  EXPECT_NE(ok.find("Connection: close\r\n"), std::string::npos) << ok;
  EXPECT_NE(ok.find("\r\n\r\nhvd_agent_queue_length 0\n"), std::string::npos) << ok;
  EXPECT_EQ(ok.find("<timeout>"), std::string::npos) << ok;
  // A query string does not change the path (Prometheus may add params).
  EXPECT_EQ(exchange(server.port(), "GET /metrics?x=1 HTTP/1.0\r\n\r\n").rfind("HTTP/1.0 200", 0),
            0u);

  const std::string other = exchange(server.port(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(other.rfind("HTTP/1.1 404 Not Found\r\n", 0), 0u) << other;
  const std::string posted =
      exchange(server.port(), "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi");
  EXPECT_EQ(posted.rfind("HTTP/1.1 405 Method Not Allowed\r\n", 0), 0u) << posted;
  EXPECT_NE(posted.find("Allow: GET\r\n"), std::string::npos) << posted;
  const std::string head = exchange(server.port(), "HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(head.rfind("HTTP/1.1 405", 0), 0u) << head;
  const std::string garbage = exchange(server.port(), "hello there\r\n\r\n");
  EXPECT_EQ(garbage.rfind("HTTP/1.1 400", 0), 0u) << garbage;
  EXPECT_EQ(renders.load(), 2);  // only the two GET /metrics
}

TEST(AgentMetricsServerTest, ASilentClientNeitherBlocksOthersNorStaysConnected) {
  MetricsServerOptions options;
  options.requestTimeout = 300ms;
  MetricsServer server(
      loopbackAnyPort(), [] { return std::string("x 1\n"); }, options);
  const int silent = connectTo(server.port());
  ASSERT_GE(silent, 0);
  const int half = connectTo(server.port());
  ASSERT_GE(half, 0);
  ASSERT_EQ(::write(half, "GET /metr", 9), 9);  // and never the rest

  const auto before = std::chrono::steady_clock::now();
  const std::string ok = exchange(server.port(), "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(ok.rfind("HTTP/1.1 200", 0), 0u) << ok;
  EXPECT_LT(std::chrono::steady_clock::now() - before, 250ms) << "waited for the silent client";

  // Both are closed once their time is up, unanswered.
  EXPECT_EQ(readAll(silent, 5s), "");
  EXPECT_EQ(readAll(half, 5s), "");
  ::close(silent);
  ::close(half);
}

TEST(AgentMetricsServerTest, ConnectionsPastTheLimitAreClosedAndTheServerGoesOn) {
  MetricsServerOptions options;
  options.requestTimeout = 2s;
  options.maxConnections = 2;
  MetricsServer server(
      loopbackAnyPort(), [] { return std::string("x 1\n"); }, options);
  const int a = connectTo(server.port());
  const int b = connectTo(server.port());
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  std::this_thread::sleep_for(100ms);  // both accepted and open
  const int c = connectTo(server.port());
  ASSERT_GE(c, 0);  // the kernel accepts it; the server closes it unanswered
  EXPECT_EQ(readAll(c, 1s), "");
  ::close(c);
  ::close(a);
  ::close(b);
  // Once they are gone there is room again.
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(exchange(server.port(), "GET /metrics HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 200", 0), 0u);
}

TEST(AgentMetricsServerTest, AnAddressInUseIsAnErrorNamingTheOptionAndStopIsIdempotent) {
  MetricsServer first(loopbackAnyPort(), [] { return std::string(); });
  try {
    MetricsServer second(parseMetricsListen(std::to_string(first.port())),
                         [] { return std::string(); });
    ADD_FAILURE() << "bound a port in use";
  } catch (const BackendError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--metrics-listen on 127.0.0.1:" + std::to_string(first.port())),
              std::string::npos)
        << what;
  }
  first.stop();
  first.stop();
  EXPECT_EQ(connectTo(first.port()), -1);
}

}  // namespace
}  // namespace hvd::agent::metrics
