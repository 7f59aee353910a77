// The TCP store beyond the Store contract: credentials and job namespaces, a thousand
// concurrent ranks, hostile or broken input on the wire, a server that goes away, and the
// protocol's encoder and decoder on raw byte buffers.
#include "hvd_support/tcp_store_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/sinks/ostream_sink.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "hvd/error.hpp"
#include "hvd_support/logging.h"
#include "store/tcp_protocol.h"
#include "store/tcp_store_client.h"

namespace hvd::store {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using protocol::Opcode;
using protocol::Request;
using protocol::Response;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A plain POSIX socket for speaking (or mangling) the protocol by hand.
class RawSocket {
 public:
  explicit RawSocket(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~RawSocket() { ::close(fd_); }

  bool connected() const { return connected_; }

  // False once the peer has closed (the send may also just succeed into the kernel buffer).
  bool send(const std::string& bytes) {
    size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<size_t>(n);
    }
    return true;
  }

  void shutdownWrite() { ::shutdown(fd_, SHUT_WR); }

  // Reads (and keeps) whatever arrives until the server closes the connection; false if it is
  // still open at `timeout`.
  bool waitForClose(std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    char buffer[4096];
    while (true) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left <= 0ms) return false;
      pollfd pfd{fd_, POLLIN, 0};
      if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) continue;
      const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (n == 0) return true;
      if (n < 0) return errno == ECONNRESET;
      received_.append(buffer, static_cast<size_t>(n));
    }
  }

  const std::string& received() const { return received_; }

 private:
  int fd_ = -1;
  bool connected_ = false;
  std::string received_;
};

// The payload of the first frame in `bytes`, if a whole one is there.
std::optional<Response> firstResponse(const std::string& bytes) {
  if (bytes.size() < protocol::kFrameHeaderBytes) return std::nullopt;
  std::string error;
  const auto length =
      protocol::decodeFrameLength(reinterpret_cast<const unsigned char*>(bytes.data()),
                                  protocol::kDefaultMaxFrameBytes, &error);
  if (!length || bytes.size() < protocol::kFrameHeaderBytes + *length) return std::nullopt;
  return protocol::decodeResponse(
      std::string_view(bytes).substr(protocol::kFrameHeaderBytes, *length), &error);
}

std::string helloFrame(const std::string& job, const std::string& token) {
  Request hello;
  hello.op = Opcode::kHello;
  hello.key = job;
  hello.value = token;
  return protocol::encodeRequest(hello);
}

std::string lengthPrefix(uint32_t length) {
  std::string header(4, '\0');
  for (int i = 0; i < 4; ++i) header[i] = static_cast<char>((length >> (8 * i)) & 0xFF);
  return header;
}

// A port that nothing listens on right now: a server binds it, reports it, and stops.
uint16_t freePort() {
  TcpStoreServer probe;
  probe.start();
  const uint16_t port = probe.port();
  probe.stop();
  return port;
}

class TcpStoreServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.addJob("job-a", "token-a");
    server_.addJob("job-b", "token-b");
    server_.start();
  }

  std::unique_ptr<TcpStore> client(const std::string& job = "job-a",
                                   const std::string& token = "token-a") {
    return std::make_unique<TcpStore>(server_.address(), job, token, 5s);
  }

  // The server still serves a well-behaved client after whatever the test did.
  void expectServerHealthy() {
    auto store = client();
    store->set("health", "ok");
    EXPECT_EQ(store->get("health", 1s), "ok");
  }

  TcpStoreServer server_;
};

TEST_F(TcpStoreServerTest, AddressNamesTheLoopbackPort) {
  EXPECT_NE(server_.port(), 0);
  EXPECT_EQ(server_.address(), "127.0.0.1:" + std::to_string(server_.port()));
}

TEST_F(TcpStoreServerTest, WrongTokenIsRefused) {
  try {
    client("job-a", "not-the-token-xyz");
    FAIL() << "a wrong token was accepted";
  } catch (const InvalidArgumentError& e) {
    const std::string message = e.what();
    EXPECT_TRUE(contains(message, "refused the credentials for job 'job-a'")) << message;
    EXPECT_TRUE(contains(message, server_.address())) << message;
    EXPECT_FALSE(contains(message, "not-the-token-xyz")) << message;
  }
}

TEST_F(TcpStoreServerTest, AnotherJobsTokenDoesNotOpenThisJob) {
  EXPECT_THROW(client("job-a", "token-b"), InvalidArgumentError);
  EXPECT_THROW(client("job-unknown", "token-a"), InvalidArgumentError);
  EXPECT_THROW(client("job-a", ""), InvalidArgumentError);
  EXPECT_THROW(client("job-a", "token-a-and-more"), InvalidArgumentError);
  EXPECT_THROW(client("job-a", "token-"), InvalidArgumentError);
}

TEST_F(TcpStoreServerTest, DenialIsLoggedOnceWithPeerAndReasonButNeverTheToken) {
  auto logger = logging::get("store");
  std::ostringstream captured;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(captured);
  const auto previousLevel = logger->level();
  logger->set_level(spdlog::level::warn);
  logger->sinks().push_back(sink);
  EXPECT_THROW(client("job-a", "s3cr3t-guess"), InvalidArgumentError);
  // The refusal is logged on the io thread before the DENIED frame leaves; a healthy round trip
  // afterwards only makes the ordering explicit.
  expectServerHealthy();
  logger->flush();
  logger->sinks().pop_back();
  logger->set_level(previousLevel);

  const std::string log = captured.str();
  EXPECT_TRUE(contains(log, "wrong token for job 'job-a'")) << log;
  EXPECT_TRUE(contains(log, "refused connection from 127.0.0.1:")) << log;
  EXPECT_FALSE(contains(log, "s3cr3t-guess")) << log;
  EXPECT_FALSE(contains(log, "token-a")) << log;
  size_t count = 0;
  for (size_t at = log.find("refused"); at != std::string::npos; at = log.find("refused", at + 1)) {
    ++count;
  }
  EXPECT_EQ(count, 1u) << log;
}

TEST_F(TcpStoreServerTest, JobsHaveSeparateNamespaces) {
  auto a = client("job-a", "token-a");
  auto b = client("job-b", "token-b");
  a->set("addr/0", "from-a");
  EXPECT_FALSE(b->check({"addr/0"}));
  EXPECT_THROW(b->get("addr/0", 30ms), TimeoutError);
  b->set("addr/0", "from-b");
  EXPECT_EQ(a->get("addr/0", 1s), "from-a");
  EXPECT_EQ(b->get("addr/0", 1s), "from-b");
  EXPECT_EQ(a->add("n", 1), 1);
  EXPECT_EQ(b->add("n", 10), 10);
  EXPECT_EQ(a->add("n", 1), 2);
  b->erase("addr/0");
  EXPECT_EQ(a->get("addr/0", 1s), "from-a");
}

TEST_F(TcpStoreServerTest, AddJobRefusesAnotherTokenForAKnownJob) {
  server_.addJob("job-a", "token-a");  // the same credential again is harmless
  EXPECT_THROW(server_.addJob("job-a", "token-other"), InvalidArgumentError);
  EXPECT_THROW(server_.addJob("", "t"), InvalidArgumentError);
  EXPECT_THROW(server_.addJob("job-c", ""), InvalidArgumentError);
  expectServerHealthy();
}

TEST_F(TcpStoreServerTest, ThousandAndTwentyFourClientsRendezvous) {
  constexpr int kClients = 1024;
  // Each client holds a socket and its io_context's descriptors, the server one per client.
  rlimit limit{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &limit), 0);
  limit.rlim_cur = limit.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &limit);
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &limit), 0);
  if (limit.rlim_cur < 6 * kClients + 64) {
    GTEST_SKIP() << "RLIMIT_NOFILE " << limit.rlim_cur << " is too low for " << kClients
                 << " clients";
  }

  std::atomic<int> arrived{0};
  std::atomic<int> released{0};
  std::mutex failureMutex;
  std::string firstFailure;
  std::vector<std::thread> ranks;
  ranks.reserve(kClients);
  for (int rank = 0; rank < kClients; ++rank) {
    ranks.emplace_back([&, rank] {
      try {
        TcpStore store(server_.address(), "job-a", "token-a", 20s);
        const std::string key = "addr/" + std::to_string(rank);
        store.set(key, "host:" + std::to_string(rank));
        if (store.get(key, 5s) != "host:" + std::to_string(rank)) {
          throw std::runtime_error("rank " + std::to_string(rank) + " read a wrong value");
        }
        arrived.fetch_add(1);
        store.wait({"go"}, 30s);
        if (store.get("go", 1s) == "now") released.fetch_add(1);
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(failureMutex);
        if (firstFailure.empty()) firstFailure = e.what();
        arrived.fetch_add(1);
      }
    });
  }
  const auto deadline = Clock::now() + 60s;
  while (arrived.load() < kClients && Clock::now() < deadline) std::this_thread::sleep_for(5ms);
  ASSERT_EQ(arrived.load(), kClients);

  auto leader = client();
  std::vector<std::string> keys;
  for (int rank = 0; rank < kClients; ++rank) keys.push_back("addr/" + std::to_string(rank));
  leader->wait(keys, 5s);
  leader->set("go", "now");
  for (auto& rank : ranks) rank.join();
  EXPECT_EQ(firstFailure, "");
  EXPECT_EQ(released.load(), kClients);
}

TEST_F(TcpStoreServerTest, GetManyAnswersEveryValueInOneResponseOnceAllArrive) {
  auto reader = client();
  auto writer = client();
  writer->set("rec/2", "two");
  std::thread late([&] {
    std::this_thread::sleep_for(30ms);
    writer->set("rec/0", std::string("ze\0ro", 5));
    std::this_thread::sleep_for(30ms);
    writer->set("rec/1", "");
  });
  const std::vector<std::string> values = reader->getMany({"rec/0", "rec/1", "rec/2"}, 10s);
  late.join();
  ASSERT_EQ(values.size(), 3u);
  EXPECT_EQ(values[0], std::string("ze\0ro", 5));
  EXPECT_EQ(values[1], "");
  EXPECT_EQ(values[2], "two");
}

TEST_F(TcpStoreServerTest, GetManyTimesOutNamingTheMissingKeys) {
  auto store = client();
  store->set("rec/0", "x");
  try {
    store->getMany({"rec/0", "rec/1", "rec/2"}, 100ms);
    FAIL() << "getMany returned without rec/1 and rec/2";
  } catch (const TimeoutError& e) {
    EXPECT_EQ(std::string(e.what()),
              "timed out after 100 ms waiting for keys: 1 of 3 present; missing: rec/1, rec/2");
  }
  EXPECT_EQ(store->getMany({"rec/0"}, 1s), std::vector<std::string>{"x"});
}

// A started server with a small frame limit and one job, "job" with token "token".
std::unique_ptr<TcpStoreServer> serverWithFrameLimit(size_t maxFrameBytes) {
  TcpStoreServerOptions options;
  options.maxFrameBytes = maxFrameBytes;
  auto server = std::make_unique<TcpStoreServer>(options);
  server->addJob("job", "token");
  server->start();
  return server;
}

TEST(TcpStoreServerFrameTest, GetManyOverTheFrameLimitIsAnErrorThatKeepsTheConnection) {
  const auto server = serverWithFrameLimit(4096);
  TcpStore store(server->address(), "job", "token", 5s);
  store.set("big/0", std::string(3000, 'a'));
  store.set("big/1", std::string(3000, 'b'));
  try {
    store.getMany({"big/0", "big/1"}, 1s);
    FAIL() << "6000 bytes of values came back through a 4096-byte frame limit";
  } catch (const InvalidArgumentError& e) {
    EXPECT_TRUE(contains(e.what(), "above the store's frame limit of 4096 bytes")) << e.what();
  }
  EXPECT_EQ(store.getMany({"big/1"}, 1s).at(0), std::string(3000, 'b'));
}

// One job cannot take the memory of the agent that serves many: past its byte limit a set (or a
// compare-set, or a new counter) is an error naming the job, the connection stays, rewriting or
// erasing a key gives its bytes back, and another job is not affected.
TEST(TcpStoreServerJobLimitTest, ASetPastTheJobsLimitIsRefusedAndErasingGivesTheRoomBack) {
  TcpStoreServerOptions options;
  options.maxJobBytes = 10000;
  TcpStoreServer server(options);
  server.addJob("job", "token");
  server.addJob("other", "token-2");
  server.start();
  TcpStore store(server.address(), "job", "token", 5s);
  store.set("a", std::string(4000, 'a'));  // 4001 bytes with its key
  store.set("b", std::string(4000, 'b'));  // 8002
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      store.set("c", std::string(2000, 'c'));  // 10003: over
      FAIL() << "the job's store passed its limit";
    } catch (const InvalidArgumentError& e) {
      EXPECT_TRUE(contains(e.what(),
                           "job 'job' would hold 10003 bytes in the store, above its "
                           "limit of 10000 bytes per job (key 'c' not set)"))
          << e.what();
    }
  }
  EXPECT_THROW(store.compareSet("c", "", std::string(2000, 'c')), InvalidArgumentError);
  EXPECT_FALSE(store.check({"c"}));
  // A smaller value in place of a bigger one is always allowed, and an erase frees its bytes.
  store.set("b", std::string(10, 'b'));
  store.set("c", std::string(2000, 'c'));
  store.erase("a");
  store.set("d", std::string(5000, 'd'));
  EXPECT_EQ(store.get("d", 1s).size(), 5000u);
  EXPECT_EQ(store.add("n", 5), 5);
  // The other job has its own budget.
  TcpStore other(server.address(), "other", "token-2", 5s);
  other.set("a", std::string(9000, 'x'));
  EXPECT_EQ(other.get("a", 1s).size(), 9000u);
}

TEST_F(TcpStoreServerTest, AWaitWokenKeyByKeyAnswersOnlyWhenAnErasedKeyIsBack) {
  // The parked wait resumes where it stopped; a key it passed and that is erased meanwhile
  // must still be there when it answers.
  auto waiter = client();
  auto writer = client();
  std::thread keys([&] {
    writer->set("w/0", "0");
    std::this_thread::sleep_for(30ms);
    writer->set("w/1", "1");
    std::this_thread::sleep_for(30ms);
    writer->erase("w/0");
    writer->set("w/2", "2");
    std::this_thread::sleep_for(150ms);
    writer->set("w/0", "again");
  });
  // Answered early, it would hold "" for the erased w/0 (or time out).
  const auto values = waiter->getMany({"w/0", "w/1", "w/2"}, 10s);
  keys.join();
  EXPECT_EQ(values, (std::vector<std::string>{"again", "1", "2"}));
}

TEST_F(TcpStoreServerTest, RandomBytesDropTheConnection) {
  for (unsigned seed = 0; seed < 16; ++seed) {
    std::mt19937 random(seed);
    std::string garbage(1024, '\0');
    for (auto& c : garbage) c = static_cast<char>(random());
    // Some with a plausible length prefix so that the payload decoder sees the garbage too,
    // some of those as a HELLO so that its field decoder does.
    if (seed % 4 == 0) garbage[0] = static_cast<char>(Opcode::kHello);
    if (seed % 2 == 0) garbage = lengthPrefix(static_cast<uint32_t>(garbage.size())) + garbage;
    RawSocket raw(server_.port());
    ASSERT_TRUE(raw.connected());
    raw.send(garbage);
    EXPECT_TRUE(raw.waitForClose(5s)) << "seed " << seed;
  }
  expectServerHealthy();
}

TEST_F(TcpStoreServerTest, HugeLengthPrefixIsDroppedWithoutWaitingForThePayload) {
  // The last two are within the frame limit but far above any HELLO, which is all a peer
  // without credentials may send.
  for (uint32_t length : {0x80000000u, 0xFFFFFFFFu, (16u << 20) + 1, 0u, 1u << 20, 65537u}) {
    RawSocket raw(server_.port());
    ASSERT_TRUE(raw.connected());
    raw.send(lengthPrefix(length));
    // No payload follows: only a server that refuses the length up front closes now.
    EXPECT_TRUE(raw.waitForClose(5s)) << "length " << length;
  }
  expectServerHealthy();
}

// This process's resident memory, in bytes (the server runs in it).
size_t residentBytes() {
  std::ifstream statm("/proc/self/statm");
  size_t size = 0;
  size_t resident = 0;
  statm >> size >> resident;
  return resident * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

// An authenticated peer may announce a frame up to the limit (16 MiB) and then send nothing:
// the store must not set aside the announced length for it before the bytes arrive.
TEST_F(TcpStoreServerTest, AnAnnouncedFrameCostsWhatHasArrivedNotItsLength) {
  const size_t before = residentBytes();
  std::vector<std::unique_ptr<RawSocket>> peers;
  for (int i = 0; i < 8; ++i) {
    peers.push_back(std::make_unique<RawSocket>(server_.port()));
    ASSERT_TRUE(peers.back()->connected());
    ASSERT_TRUE(peers.back()->send(helloFrame("job-a", "token-a") + lengthPrefix(16u << 20) +
                                   std::string(100, 'x')));
  }
  // 8 x 16 MiB if the buffers were sized by the announcement; a few 64 KiB steps now. Watched
  // for a while, since nothing tells when the server has read the headers.
  size_t grown = 0;
  for (int i = 0; i < 20 && grown < (size_t{24} << 20); ++i) {
    std::this_thread::sleep_for(50ms);
    grown = std::max(grown, residentBytes() - std::min(before, residentBytes()));
  }
  EXPECT_LT(grown, size_t{24} << 20) << "resident memory grew by " << grown << " bytes";
  // A frame that does arrive in full is read whole, through every step.
  auto store = client();
  const std::string big((5u << 20) + 12345, 'v');
  store->set("big", big);
  EXPECT_EQ(store->get("big", 5s), big);
  peers.clear();
  expectServerHealthy();
}

TEST_F(TcpStoreServerTest, ClientsThatVanishMidFrameLeaveTheServerUp) {
  {
    RawSocket raw(server_.port());
    raw.send(lengthPrefix(100) + std::string(10, 'x'));
  }
  {
    RawSocket raw(server_.port());
    raw.send(helloFrame("job-a", "token-a").substr(0, 7));
  }
  {
    // A rank that parks a WAIT and dies: its waiter must not linger or break later sets.
    RawSocket raw(server_.port());
    Request wait;
    wait.op = Opcode::kWait;
    wait.keys = {"vanish"};
    wait.number = 60000;
    raw.send(helloFrame("job-a", "token-a") + protocol::encodeRequest(wait));
    std::this_thread::sleep_for(20ms);
  }
  std::this_thread::sleep_for(20ms);
  auto store = client();
  store->set("vanish", "set after the waiter died");
  EXPECT_EQ(store->get("vanish", 1s), "set after the waiter died");
  expectServerHealthy();
}

TEST(TcpStoreServerHelloTest, ASilentConnectionIsDroppedAfterTheHelloTimeout) {
  TcpStoreServerOptions options;
  options.helloTimeout = 100ms;
  TcpStoreServer server(options);
  server.addJob("job", "token");
  server.start();
  RawSocket silent(server.port());
  ASSERT_TRUE(silent.connected());
  const auto start = Clock::now();
  EXPECT_TRUE(silent.waitForClose(5s));
  EXPECT_GE(Clock::now() - start, 90ms);
  // A client that said HELLO in time is not affected by the deadline.
  TcpStore store(server.address(), "job", "token", 5s);
  std::this_thread::sleep_for(150ms);
  store.set("k", "v");
  EXPECT_EQ(store.get("k", 1s), "v");
}

TEST_F(TcpStoreServerTest, ARequestBeforeHelloIsDenied) {
  RawSocket raw(server_.port());
  Request set;
  set.op = Opcode::kSet;
  set.key = "k";
  set.value = "v";
  raw.send(protocol::encodeRequest(set));
  ASSERT_TRUE(raw.waitForClose(5s));
  const auto response = firstResponse(raw.received());
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->op, Opcode::kDenied);
  EXPECT_FALSE(client()->check({"k"}));
}

TEST_F(TcpStoreServerTest, ARequestWhileWaitIsParkedDropsTheConnection) {
  RawSocket raw(server_.port());
  Request wait;
  wait.op = Opcode::kWait;
  wait.keys = {"never"};
  wait.number = 60000;
  Request check;
  check.op = Opcode::kCheck;
  check.keys = {"never"};
  raw.send(helloFrame("job-a", "token-a") + protocol::encodeRequest(wait) +
           protocol::encodeRequest(check));
  EXPECT_TRUE(raw.waitForClose(5s));
  expectServerHealthy();
}

TEST_F(TcpStoreServerTest, FrameOverTheServerLimitDropsOnlyThatConnection) {
  const auto small = serverWithFrameLimit(1024);
  TcpStore store(small->address(), "job", "token", 5s);
  // Fits a frame but not the answer that would return it: refused, connection kept.
  EXPECT_THROW(store.set("k", std::string(1000, 'v')), InvalidArgumentError);
  store.set("k", std::string(900, 'v'));
  EXPECT_EQ(store.get("k", 1s), std::string(900, 'v'));
  // Over the frame limit: the server drops this connection.
  EXPECT_THROW(store.set("k", std::string(2000, 'v')), PeerError);
  EXPECT_THROW(store.get("k", 1s), PeerError);  // the connection stays unusable
  TcpStore fresh(small->address(), "job", "token", 5s);
  EXPECT_EQ(fresh.get("k", 1s), std::string(900, 'v'));
}

TEST_F(TcpStoreServerTest, StoppingTheServerFailsAParkedWaitWithPeerError) {
  auto store = client();
  auto waiting = std::async(std::launch::async, [&] { store->wait({"never"}, 30s); });
  std::this_thread::sleep_for(100ms);
  const auto start = Clock::now();
  server_.stop();
  ASSERT_EQ(waiting.wait_for(5s), std::future_status::ready) << "the client hung";
  try {
    waiting.get();
    FAIL() << "the wait returned normally";
  } catch (const PeerError& e) {
    EXPECT_TRUE(contains(e.what(), server_.address())) << e.what();
  }
  EXPECT_LT(Clock::now() - start, 5s);
}

TEST_F(TcpStoreServerTest, RemoveJobFailsParkedWaitersAndRefusesNewClients) {
  auto a = client("job-a", "token-a");
  auto b = client("job-b", "token-b");
  a->set("kept", "until removal");
  auto waiting = std::async(std::launch::async, [&] { return a->get("never", 30s); });
  std::this_thread::sleep_for(100ms);
  server_.removeJob("job-a");
  ASSERT_EQ(waiting.wait_for(5s), std::future_status::ready) << "the waiter hung";
  try {
    waiting.get();
    FAIL() << "the parked GET returned normally";
  } catch (const PeerError& e) {
    EXPECT_TRUE(contains(e.what(), "job 'job-a' was removed")) << e.what();
  }
  EXPECT_THROW(a->get("kept", 1s), PeerError);
  EXPECT_THROW(client("job-a", "token-a"), InvalidArgumentError);
  // A new job with the same id starts empty.
  server_.addJob("job-a", "token-a2");
  EXPECT_FALSE(client("job-a", "token-a2")->check({"kept"}));
  b->set("still", "here");
  EXPECT_EQ(b->get("still", 1s), "here");
}

TEST_F(TcpStoreServerTest, BindFailureNamesTheAddress) {
  TcpStoreServerOptions options;
  options.port = server_.port();
  TcpStoreServer second(options);
  try {
    second.start();
    FAIL() << "two servers bound one port";
  } catch (const BackendError& e) {
    EXPECT_TRUE(contains(e.what(), server_.address())) << e.what();
  }
  EXPECT_THROW(server_.start(), InvalidArgumentError);
}

TEST(TcpStoreClientTest, ConnectRetriesUntilTheServerStarts) {
  const uint16_t port = freePort();
  auto connecting = std::async(std::launch::async, [port] {
    TcpStore store("127.0.0.1:" + std::to_string(port), "job", "token", 10s);
    return store.get("ready", 5s);
  });
  std::this_thread::sleep_for(200ms);
  TcpStoreServerOptions options;
  options.port = port;
  TcpStoreServer server(options);
  server.addJob("job", "token");
  server.start();
  TcpStore(server.address(), "job", "token", 5s).set("ready", "yes");
  EXPECT_EQ(connecting.get(), "yes");
}

TEST(TcpStoreClientTest, ConnectTimeoutNamesTheAddress) {
  const std::string address = "127.0.0.1:" + std::to_string(freePort());
  const auto start = Clock::now();
  try {
    TcpStore store(address, "job", "token", 300ms);
    FAIL() << "connected to a port nobody listens on";
  } catch (const PeerError& e) {
    EXPECT_TRUE(contains(e.what(), address)) << e.what();
    EXPECT_TRUE(contains(e.what(), "within 300 ms")) << e.what();
  }
  const auto elapsed = Clock::now() - start;
  EXPECT_GE(elapsed, 290ms);
  EXPECT_LT(elapsed, 5s);
}

TEST(TcpStoreClientTest, AServerThatNeverAnswersTimesOut) {
  // A listener that accepts in the kernel backlog and never speaks.
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(listener, 8), 0);
  socklen_t length = sizeof(addr);
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &length), 0);
  const std::string address = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  const auto start = Clock::now();
  try {
    TcpStore store(address, "job", "token", 200ms);
    FAIL() << "a silent server was taken for a store";
  } catch (const TimeoutError& e) {
    EXPECT_TRUE(contains(e.what(), address)) << e.what();
    EXPECT_TRUE(contains(e.what(), "HELLO")) << e.what();
  }
  EXPECT_LT(Clock::now() - start, 5s);
  ::close(listener);
}

TEST(TcpStoreClientTest, MalformedAddressesAreInvalidArguments) {
  for (const char* address :
       {"no-port", "::1:4000", "[::1]4000", "host:", ":4000", "host:99999", "host:12ab", "[::1"}) {
    EXPECT_THROW(TcpStore(address, "job", "token", 100ms), InvalidArgumentError) << address;
  }
}

TEST(TcpStoreClientTest, WorksOverIpv6Loopback) {
  TcpStoreServerOptions options;
  options.bindAddress = "::1";
  TcpStoreServer server(options);
  server.addJob("job", "token");
  try {
    server.start();
  } catch (const BackendError& e) {
    GTEST_SKIP() << "no IPv6 loopback here: " << e.what();
  }
  EXPECT_EQ(server.address(), "[::1]:" + std::to_string(server.port()));
  TcpStore store(server.address(), "job", "token", 5s);
  store.set("v6", "yes");
  EXPECT_EQ(store.get("v6", 1s), "yes");
}

// --- The protocol on byte buffers -------------------------------------------------------------

std::vector<Request> sampleRequests() {
  std::vector<Request> requests(9);
  requests[0].op = Opcode::kHello;
  requests[0].key = "job-7";
  requests[0].value = std::string("tok\0en", 6);
  requests[1].op = Opcode::kSet;
  requests[1].key = "addr/3";
  requests[1].value = std::string("\0\xff\x01", 3);
  requests[2].op = Opcode::kGet;
  requests[2].key = "addr/3";
  requests[2].number = 30000;
  requests[3].op = Opcode::kAdd;
  requests[3].key = "counter";
  requests[3].number = INT64_MIN;
  requests[4].op = Opcode::kCompareSet;
  requests[4].key = "leader";
  requests[4].expected = "";
  requests[4].value = "rank0";
  requests[5].op = Opcode::kWait;
  requests[5].keys = {"a", "", "c/d"};
  requests[5].number = -1;
  requests[6].op = Opcode::kCheck;
  requests[6].keys = {};
  requests[7].op = Opcode::kErase;
  requests[7].key = "gone";
  requests[8].op = Opcode::kGetMany;
  requests[8].keys = {"mesh/0", "mesh/1"};
  requests[8].number = 5000;
  return requests;
}

std::vector<Response> sampleResponses() {
  std::vector<Response> responses(6);
  responses[0].op = Opcode::kOk;
  responses[0].value = std::string("v\0v", 3);
  responses[0].number = INT64_MAX;
  responses[1].op = Opcode::kTimeout;
  responses[1].keys = {"addr/1", "addr/3"};
  responses[2].op = Opcode::kDenied;
  responses[2].value = "no";
  responses[3].op = Opcode::kError;
  responses[3].number = static_cast<int64_t>(ErrorKind::kInvalidArgument);
  responses[3].value = "not a number";
  responses[4].op = Opcode::kOk;
  responses[5].op = Opcode::kValues;
  responses[5].values = {std::string("a\0b", 3), "", "c"};
  return responses;
}

std::string payloadOf(const std::string& frame) {
  return frame.substr(protocol::kFrameHeaderBytes);
}

TEST(TcpStoreProtocolTest, RequestsRoundTrip) {
  for (const Request& request : sampleRequests()) {
    const std::string frame = protocol::encodeRequest(request);
    std::string error;
    const auto length =
        protocol::decodeFrameLength(reinterpret_cast<const unsigned char*>(frame.data()),
                                    protocol::kDefaultMaxFrameBytes, &error);
    ASSERT_TRUE(length.has_value()) << error;
    EXPECT_EQ(*length, frame.size() - protocol::kFrameHeaderBytes);
    const auto decoded = protocol::decodeRequest(payloadOf(frame), &error);
    ASSERT_TRUE(decoded.has_value()) << protocol::opcodeName(request.op) << ": " << error;
    EXPECT_TRUE(*decoded == request) << protocol::opcodeName(request.op);
  }
}

TEST(TcpStoreProtocolTest, ResponsesRoundTrip) {
  for (const Response& response : sampleResponses()) {
    std::string error;
    const auto decoded =
        protocol::decodeResponse(payloadOf(protocol::encodeResponse(response)), &error);
    ASSERT_TRUE(decoded.has_value()) << protocol::opcodeName(response.op) << ": " << error;
    EXPECT_TRUE(*decoded == response) << protocol::opcodeName(response.op);
  }
}

TEST(TcpStoreProtocolTest, TheLayoutIsLittleEndianAndCompact) {
  Request get;
  get.op = Opcode::kGet;
  get.key = "ab";
  get.number = 0x0102;
  const std::string expected(
      "\x0F\x00\x00\x00"  // payload length 15
      "\x03"              // GET
      "\x02\x00\x00\x00"
      "ab"                                 // key
      "\x02\x01\x00\x00\x00\x00\x00\x00",  // timeout 0x0102 ms
      19);
  EXPECT_EQ(protocol::encodeRequest(get), expected);
}

TEST(TcpStoreProtocolTest, EveryTruncationIsRejected) {
  for (const Request& request : sampleRequests()) {
    const std::string payload = payloadOf(protocol::encodeRequest(request));
    for (size_t size = 0; size < payload.size(); ++size) {
      std::string error;
      EXPECT_FALSE(protocol::decodeRequest(payload.substr(0, size), &error).has_value())
          << protocol::opcodeName(request.op) << " cut to " << size << " bytes";
      EXPECT_FALSE(error.empty());
    }
  }
  for (const Response& response : sampleResponses()) {
    const std::string payload = payloadOf(protocol::encodeResponse(response));
    for (size_t size = 0; size < payload.size(); ++size) {
      std::string error;
      EXPECT_FALSE(protocol::decodeResponse(payload.substr(0, size), &error).has_value())
          << protocol::opcodeName(response.op) << " cut to " << size << " bytes";
    }
  }
}

TEST(TcpStoreProtocolTest, LengthsBeyondTheFrameAreRejected) {
  std::string error;
  // SET whose key claims 4 GiB in a 9-byte payload.
  const std::string hugeKey = std::string("\x02", 1) + lengthPrefix(0xFFFFFFFFu) + "abcd";
  EXPECT_FALSE(protocol::decodeRequest(hugeKey, &error).has_value());
  EXPECT_TRUE(contains(error, "claims 4294967295 bytes but only 4 remain")) << error;
  // WAIT whose list claims 2^31 keys.
  const std::string manyKeys =
      std::string("\x06", 1) + lengthPrefix(0x80000000u) + std::string(8, '\0');
  EXPECT_FALSE(protocol::decodeRequest(manyKeys, &error).has_value());
  EXPECT_TRUE(contains(error, "claims 2147483648 items")) << error;
  // A key whose length overruns into the next field.
  const std::string overrun = std::string("\x03", 1) + lengthPrefix(9) + "ab" + std::string(8, 0);
  EXPECT_FALSE(protocol::decodeRequest(overrun, &error).has_value());
}

TEST(TcpStoreProtocolTest, TrailingBytesAndUnknownOpcodesAreRejected) {
  std::string error;
  Request erase;
  erase.op = Opcode::kErase;
  erase.key = "k";
  EXPECT_FALSE(
      protocol::decodeRequest(payloadOf(protocol::encodeRequest(erase)) + "x", &error).has_value());
  EXPECT_TRUE(contains(error, "1 unexpected bytes")) << error;
  for (unsigned char op : {0x00, 0x0A, 0x7F, 0x81, 0xFF}) {
    EXPECT_FALSE(
        protocol::decodeRequest(std::string(1, static_cast<char>(op)) + std::string(16, 0), &error)
            .has_value())
        << int(op);
  }
  for (unsigned char op : {0x00, 0x01, 0x09, 0x86, 0xFF}) {
    EXPECT_FALSE(
        protocol::decodeResponse(std::string(1, static_cast<char>(op)) + std::string(16, 0), &error)
            .has_value())
        << int(op);
  }
  EXPECT_FALSE(protocol::decodeRequest("", &error).has_value());
}

TEST(TcpStoreProtocolTest, FrameLengthsAreCheckedAgainstTheLimit) {
  auto decode = [](uint32_t length, size_t limit) {
    const std::string header = lengthPrefix(length);
    std::string error;
    return protocol::decodeFrameLength(reinterpret_cast<const unsigned char*>(header.data()), limit,
                                       &error);
  };
  EXPECT_FALSE(decode(0, 1024).has_value());
  EXPECT_EQ(decode(1, 1024), std::optional<uint32_t>(1));
  EXPECT_EQ(decode(1024, 1024), std::optional<uint32_t>(1024));
  EXPECT_FALSE(decode(1025, 1024).has_value());
  EXPECT_FALSE(decode(0x80000000u, protocol::kDefaultMaxFrameBytes).has_value());
  EXPECT_FALSE(decode(0xFFFFFFFFu, protocol::kDefaultMaxFrameBytes).has_value());
}

TEST(TcpStoreProtocolTest, TheEncoderRefusesFramesOverTheLimit) {
  Request set;
  set.op = Opcode::kSet;
  set.key = "k";
  set.value = std::string(1024, 'v');
  EXPECT_THROW(protocol::encodeRequest(set, 1024), InvalidArgumentError);
  EXPECT_EQ(protocol::encodeRequest(set, 2048).size(), 4u + 1 + 4 + 1 + 4 + 1024);
  Request notARequest;
  notARequest.op = Opcode::kOk;
  EXPECT_THROW(protocol::encodeRequest(notARequest), InvalidArgumentError);
}

TEST(TcpStoreProtocolTest, ConstantTimeEqualsComparesWholeTokens) {
  EXPECT_TRUE(protocol::constantTimeEquals("token-a", "token-a"));
  EXPECT_FALSE(protocol::constantTimeEquals("token-b", "token-a"));
  EXPECT_FALSE(protocol::constantTimeEquals("token-", "token-a"));
  EXPECT_FALSE(protocol::constantTimeEquals("token-aa", "token-a"));
  EXPECT_FALSE(protocol::constantTimeEquals("", "token-a"));
  EXPECT_FALSE(protocol::constantTimeEquals(std::string("token-a\0", 8), "token-a"));
  EXPECT_TRUE(protocol::constantTimeEquals("", ""));
}

}  // namespace
}  // namespace hvd::store
