// The cluster key file checks and the signed request metadata of the agent (agent/auth).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "agent/auth/cluster_key.h"
#include "agent/auth/fake_clock.h"
#include "agent/auth/request_signer.h"
#include "common/test_support.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hvd/error.hpp"

namespace hvd::agent::auth {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::Not;

// 2023-11-14T22:13:20.123Z: a fixed, realistic time for the fake clock.
const std::chrono::system_clock::time_point kStart{milliseconds(1700000000123)};
constexpr char kMethod[] = "/hvd.Agent/Launch";
constexpr char kWindowReason[] = "timestamp outside the \u00b130 s window (clock skew?)";

using test::TempDir;

void writeFile(const std::string& path, const std::string& contents, mode_t mode) {
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << contents;
  }
  ASSERT_EQ(::chmod(path.c_str(), mode), 0);
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Bytes 0x00..0x1f: a key whose MAC values were computed independently (Python hmac/hashlib).
std::string knownKeyBytes() {
  std::string s;
  for (int i = 0; i < 32; ++i) s.push_back(static_cast<char>(i));
  return s;
}

std::string loadError(const std::string& path) {
  try {
    ClusterKey::load(path);
  } catch (const InvalidArgumentError& e) {
    return e.what();
  }
  return "<load succeeded>";
}

// ---- ClusterKey::load refusals --------------------------------------------------------------

TEST(ClusterKeyTest, LoadRefusesMissingFileNamingThePath) {
  TempDir dir;
  std::string path = dir.file("absent.key");
  std::string msg = loadError(path);
  EXPECT_THAT(msg, HasSubstr(path));
  EXPECT_THAT(msg, HasSubstr("does not exist"));
}

TEST(ClusterKeyTest, LoadRefusesDirectory) {
  TempDir dir;
  std::string path = dir.file("keydir");
  ASSERT_EQ(::mkdir(path.c_str(), 0700), 0);
  std::string msg = loadError(path);
  EXPECT_THAT(msg, HasSubstr(path));
  EXPECT_THAT(msg, HasSubstr("is not a regular file (it is a directory)"));
}

TEST(ClusterKeyTest, LoadRefusesEmptyFile) {
  TempDir dir;
  std::string path = dir.file("empty.key");
  writeFile(path, "", 0600);
  std::string msg = loadError(path);
  EXPECT_THAT(msg, HasSubstr(path));
  EXPECT_THAT(msg, HasSubstr("is empty"));
}

TEST(ClusterKeyTest, LoadRefusesWrongLengths) {
  TempDir dir;
  std::string path = dir.file("short.key");
  writeFile(path, std::string(31, 'k'), 0600);
  EXPECT_THAT(loadError(path), HasSubstr("holds 31 bytes; expected 32 raw bytes or 64 hex"));
  writeFile(path, std::string(33, 'k'), 0600);
  EXPECT_THAT(loadError(path), HasSubstr("holds 33 bytes"));
  writeFile(path, std::string(63, 'a'), 0600);
  EXPECT_THAT(loadError(path), HasSubstr("holds 63 bytes"));
  writeFile(path, std::string(64, 'a') + "\n\n", 0600);
  EXPECT_THAT(loadError(path), HasSubstr("holds 66 bytes"));
  writeFile(path, std::string(4096, 'a'), 0600);
  EXPECT_THAT(loadError(path), HasSubstr("holds 4096 bytes"));
}

TEST(ClusterKeyTest, LoadRefusesWorldReadableModeNamingModeAndFix) {
  TempDir dir;
  std::string path = dir.file("open.key");
  writeFile(path, knownKeyBytes(), 0644);
  std::string msg = loadError(path);
  EXPECT_THAT(msg, HasSubstr(path));
  EXPECT_THAT(msg, HasSubstr("has mode 0644"));
  EXPECT_THAT(msg, HasSubstr("chmod 600 " + path));
}

TEST(ClusterKeyTest, LoadRefusesAnyGroupOrOtherPermission) {
  TempDir dir;
  std::string path = dir.file("key");
  for (mode_t mode : {0640, 0620, 0604, 0602, 0610, 0601, 0660, 0700}) {
    writeFile(path, knownKeyBytes(), mode);
    char expected[32];
    std::snprintf(expected, sizeof expected, "has mode %04o", static_cast<unsigned>(mode));
    EXPECT_THAT(loadError(path), HasSubstr(expected)) << "mode " << expected;
  }
}

TEST(ClusterKeyTest, LoadAcceptsModes0600And0400) {
  TempDir dir;
  std::string path = dir.file("key");
  writeFile(path, knownKeyBytes(), 0600);
  EXPECT_EQ(ClusterKey::load(path).fingerprint(), "630dcd29");
  writeFile(path, knownKeyBytes(), 0400);
  EXPECT_EQ(ClusterKey::load(path).fingerprint(), "630dcd29");
}

TEST(ClusterKeyTest, LoadRefusesFileOwnedByAnotherUser) {
  if (::geteuid() != 0) GTEST_SKIP() << "changing a file's owner needs root";
  TempDir dir;
  std::string path = dir.file("theirs.key");
  writeFile(path, knownKeyBytes(), 0600);
  ASSERT_EQ(::chown(path.c_str(), 65534, 65534), 0);
  std::string msg = loadError(path);
  EXPECT_THAT(msg, HasSubstr(path));
  EXPECT_THAT(msg, HasSubstr("is owned by uid 65534, not by this process's effective uid 0"));
}

TEST(ClusterKeyTest, LoadAcceptsHexFormWithOrWithoutNewlineAsTheSameKey) {
  TempDir dir;
  std::string raw = dir.file("raw.key");
  std::string hex = dir.file("hex.key");
  std::string hexNl = dir.file("hexnl.key");
  std::string upper = dir.file("upper.key");
  std::string keyBytes = knownKeyBytes();
  std::string keyHex = hexEncode(reinterpret_cast<const unsigned char*>(keyBytes.data()), 32);
  std::string keyHexUpper = keyHex;
  for (char& c : keyHexUpper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  writeFile(raw, keyBytes, 0600);
  writeFile(hex, keyHex, 0600);
  writeFile(hexNl, keyHex + "\n", 0600);
  writeFile(upper, keyHexUpper, 0600);
  const std::string expected = ClusterKey::load(raw).hmacSha256Hex("m");
  EXPECT_EQ(ClusterKey::load(hex).hmacSha256Hex("m"), expected);
  EXPECT_EQ(ClusterKey::load(hexNl).hmacSha256Hex("m"), expected);
  EXPECT_EQ(ClusterKey::load(upper).hmacSha256Hex("m"), expected);
}

TEST(ClusterKeyTest, LoadRefusesNonHexAndNeverEchoesTheContents) {
  TempDir dir;
  std::string path = dir.file("bad.key");
  std::string secretish = "SECRETSECRET" + std::string(52, 'z');  // 64 characters, not hex
  writeFile(path, secretish, 0600);
  std::string msg = loadError(path);
  EXPECT_THAT(msg, HasSubstr("not all hex digits"));
  EXPECT_THAT(msg, Not(HasSubstr("SECRET")));
  EXPECT_THAT(msg, Not(HasSubstr("zzzz")));
}

// ---- ClusterKey::generate -------------------------------------------------------------------

TEST(ClusterKeyTest, GenerateThenLoadGivesTheSameKey) {
  TempDir dir;
  std::string path = dir.file("cluster.key");
  ClusterKey generated = ClusterKey::generate(path);
  ClusterKey loaded = ClusterKey::load(path);
  EXPECT_EQ(loaded.fingerprint(), generated.fingerprint());
  EXPECT_EQ(loaded.hmacSha256Hex("hello"), generated.hmacSha256Hex("hello"));
  EXPECT_EQ(readFile(path).size(), 32u);
}

TEST(ClusterKeyTest, GeneratedFileHasMode0600) {
  TempDir dir;
  std::string path = dir.file("cluster.key");
  mode_t old = ::umask(0);  // a permissive umask must not widen the key's mode
  ClusterKey::generate(path);
  ::umask(old);
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_TRUE(S_ISREG(st.st_mode));
}

TEST(ClusterKeyTest, GenerateRefusesToOverwrite) {
  TempDir dir;
  std::string path = dir.file("cluster.key");
  ClusterKey first = ClusterKey::generate(path);
  const std::string before = readFile(path);
  try {
    ClusterKey::generate(path);
    FAIL() << "generate overwrote an existing key file";
  } catch (const InvalidArgumentError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("already exists; refusing to overwrite"));
    EXPECT_THAT(std::string(e.what()), HasSubstr(path));
  }
  EXPECT_EQ(readFile(path), before);
  EXPECT_EQ(ClusterKey::load(path).fingerprint(), first.fingerprint());
}

TEST(ClusterKeyTest, GenerateRefusesMissingParentDirectory) {
  TempDir dir;
  std::string path = dir.file("no-such-dir/cluster.key");
  try {
    ClusterKey::generate(path);
    FAIL() << "generate created a key in a missing directory";
  } catch (const InvalidArgumentError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("its directory does not exist"));
  }
}

TEST(ClusterKeyTest, TwoGeneratedKeysDiffer) {
  TempDir dir;
  ClusterKey::generate(dir.file("a"));
  ClusterKey::generate(dir.file("b"));
  EXPECT_NE(readFile(dir.file("a")), readFile(dir.file("b")));
  EXPECT_NE(ClusterKey::load(dir.file("a")).fingerprint(),
            ClusterKey::load(dir.file("b")).fingerprint());
}

// ---- Fingerprint and primitives -------------------------------------------------------------

TEST(ClusterKeyTest, FingerprintIsAHashPrefixNotTheKey) {
  TempDir dir;
  std::string path = dir.file("cluster.key");
  ClusterKey key = ClusterKey::generate(path);
  std::string bytes = readFile(path);
  std::string keyHex = hexEncode(reinterpret_cast<const unsigned char*>(bytes.data()), 32);
  std::string fp = key.fingerprint();
  EXPECT_EQ(fp, sha256Hex(bytes).substr(0, 8));
  EXPECT_EQ(fp.size(), 8u);
  EXPECT_THAT(fp, Not(HasSubstr(keyHex)));
  EXPECT_THAT(keyHex, Not(HasSubstr(fp)));  // not even a piece of the key (chance 57 / 2^32)
}

TEST(AuthPrimitivesTest, Sha256HexMatchesKnownVectors) {
  EXPECT_EQ(sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

// ---- RequestSigner / RequestVerifier ---------------------------------------------------------

class RequestAuthTest : public ::testing::Test {
 protected:
  RequestAuthTest() {
    writeFile(dir_.file("known.key"), knownKeyBytes(), 0600);
    ClusterKey::generate(dir_.file("other.key"));
  }
  ClusterKey knownKey() const { return ClusterKey::load(dir_.file("known.key")); }
  ClusterKey otherKey() const { return ClusterKey::load(dir_.file("other.key")); }

  TempDir dir_;
  FakeClock clock_{kStart};
  const std::string body_ = sha256Hex("body");
};

TEST_F(RequestAuthTest, SignUsesMillisecondTimestampRandomNonceAndCanonicalHmac) {
  RequestSigner signer(knownKey(), clock_);
  SignedHeaders h = signer.sign(kMethod, body_);
  EXPECT_EQ(h.timestamp, "1700000000123");
  ASSERT_EQ(h.nonce.size(), 32u);
  EXPECT_EQ(h.nonce.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(h.signature, knownKey().hmacSha256Hex("hvd-v1\n/hvd.Agent/Launch\n1700000000123\n" +
                                                  h.nonce + "\n" + body_));
  EXPECT_NE(signer.sign(kMethod, body_).nonce, h.nonce);
}

TEST_F(RequestAuthTest, HmacMatchesAnIndependentImplementation) {
  // Computed with Python: hmac.new(bytes(range(32)), canonical, hashlib.sha256).hexdigest().
  EXPECT_EQ(body_, "230d8358dc8e8890b4c58deeb62912ee2f20357ae92a5cc861b98e68fe31acb5");
  std::string canonical =
      canonicalRequest(kMethod, "1700000000123", "000102030405060708090a0b0c0d0e0f", body_);
  EXPECT_EQ(knownKey().hmacSha256Hex(canonical),
            "d34de3c87e637cbcd5abf84c1a8672442fa604ae959590c4660385bc5b22f51d");
}

TEST_F(RequestAuthTest, MetadataNamesAreFixed) {
  EXPECT_EQ(kTimestampMetadata, "hvd-ts");
  EXPECT_EQ(kNonceMetadata, "hvd-nonce");
  EXPECT_EQ(kSignatureMetadata, "hvd-sig");
}

TEST_F(RequestAuthTest, SignedRequestVerifies) {
  RequestSigner signer(knownKey(), clock_);
  RequestVerifier verifier(knownKey(), clock_);
  VerifyResult r = verifier.verify(kMethod, body_, signer.sign(kMethod, body_));
  EXPECT_TRUE(r.ok) << r.reason;
  EXPECT_EQ(r.reason, "");
  EXPECT_EQ(verifier.rememberedCount(), 1u);
}

TEST_F(RequestAuthTest, TamperedFieldsAreRefused) {
  RequestSigner signer(knownKey(), clock_);
  RequestVerifier verifier(knownKey(), clock_);
  auto flipLast = [](std::string s) {
    s.back() = s.back() == '0' ? '1' : '0';
    return s;
  };

  SignedHeaders h = signer.sign(kMethod, body_);
  EXPECT_EQ(verifier.verify("/hvd.Agent/Describe", body_, h).reason, "bad signature");
  EXPECT_EQ(verifier.verify(kMethod, sha256Hex("other body"), h).reason, "bad signature");

  SignedHeaders ts = h;
  ts.timestamp = "1700000000124";
  EXPECT_EQ(verifier.verify(kMethod, body_, ts).reason, "bad signature");
  SignedHeaders nonce = h;
  nonce.nonce = flipLast(nonce.nonce);
  EXPECT_EQ(verifier.verify(kMethod, body_, nonce).reason, "bad signature");
  SignedHeaders sig = h;
  sig.signature = flipLast(sig.signature);
  EXPECT_EQ(verifier.verify(kMethod, body_, sig).reason, "bad signature");
  SignedHeaders shortSig = h;
  shortSig.signature.pop_back();
  EXPECT_EQ(verifier.verify(kMethod, body_, shortSig).reason, "bad signature");
  SignedHeaders upperSig = h;
  for (char& c : upperSig.signature) c = static_cast<char>(std::toupper(c));
  if (upperSig.signature != h.signature) {
    EXPECT_EQ(verifier.verify(kMethod, body_, upperSig).reason, "bad signature");
  }

  // None of the refusals consumed the nonce: the genuine request still goes through once.
  EXPECT_EQ(verifier.rememberedCount(), 0u);
  EXPECT_TRUE(verifier.verify(kMethod, body_, h).ok);
}

TEST_F(RequestAuthTest, MissingOrMalformedValuesAreRefused) {
  RequestSigner signer(knownKey(), clock_);
  RequestVerifier verifier(knownKey(), clock_);
  const SignedHeaders h = signer.sign(kMethod, body_);

  EXPECT_EQ(verifier.verify(kMethod, body_, SignedHeaders{}).reason, "missing signature");
  SignedHeaders noSig = h;
  noSig.signature.clear();
  EXPECT_EQ(verifier.verify(kMethod, body_, noSig).reason, "missing signature");
  SignedHeaders noTs = h;
  noTs.timestamp.clear();
  EXPECT_EQ(verifier.verify(kMethod, body_, noTs).reason, "missing signature");
  SignedHeaders noNonce = h;
  noNonce.nonce.clear();
  EXPECT_EQ(verifier.verify(kMethod, body_, noNonce).reason, "missing signature");

  for (const char* bad : {"17000000001x3", "-1700000000123", "+1700000000123", " 1700000000123",
                          "1700000000123 ", "1234567890123456789"}) {
    SignedHeaders t = h;
    t.timestamp = bad;
    EXPECT_EQ(verifier.verify(kMethod, body_, t).reason, "malformed timestamp") << bad;
  }
  SignedHeaders longNonce = h;
  longNonce.nonce += "00";
  EXPECT_EQ(verifier.verify(kMethod, body_, longNonce).reason, "malformed nonce");
  SignedHeaders upperNonce = h;
  upperNonce.nonce = std::string(32, 'A');
  EXPECT_EQ(verifier.verify(kMethod, body_, upperNonce).reason, "malformed nonce");
}

TEST_F(RequestAuthTest, ReplayedRequestIsRefused) {
  RequestSigner signer(knownKey(), clock_);
  RequestVerifier verifier(knownKey(), clock_);
  SignedHeaders h = signer.sign(kMethod, body_);
  EXPECT_TRUE(verifier.verify(kMethod, body_, h).ok);
  clock_.advance(seconds(5));
  EXPECT_EQ(verifier.verify(kMethod, body_, h).reason, "replayed nonce");
  EXPECT_EQ(verifier.verify(kMethod, body_, h).reason, "replayed nonce");
  // A fresh signature of the same request is a new request.
  EXPECT_TRUE(verifier.verify(kMethod, body_, signer.sign(kMethod, body_)).ok);
}

TEST_F(RequestAuthTest, TimestampsOutsideTheWindowAreRefused) {
  FakeClock clientClock(kStart);
  RequestSigner signer(knownKey(), clientClock);
  RequestVerifier verifier(knownKey(), clock_);

  clientClock.set(kStart - seconds(31));
  EXPECT_EQ(verifier.verify(kMethod, body_, signer.sign(kMethod, body_)).reason, kWindowReason);
  clientClock.set(kStart + seconds(31));
  EXPECT_EQ(verifier.verify(kMethod, body_, signer.sign(kMethod, body_)).reason, kWindowReason);
  clientClock.set(kStart + seconds(30) + milliseconds(1));
  EXPECT_EQ(verifier.verify(kMethod, body_, signer.sign(kMethod, body_)).reason, kWindowReason);

  // The edges of the window are inside it.
  clientClock.set(kStart - seconds(30));
  EXPECT_TRUE(verifier.verify(kMethod, body_, signer.sign(kMethod, body_)).ok);
  clientClock.set(kStart + seconds(30));
  EXPECT_TRUE(verifier.verify(kMethod, body_, signer.sign(kMethod, body_)).ok);
  clientClock.set(kStart - seconds(29));
  EXPECT_TRUE(verifier.verify(kMethod, body_, signer.sign(kMethod, body_)).ok);
}

TEST_F(RequestAuthTest, WindowReasonNamesTheConfiguredWindow) {
  RequestSigner signer(knownKey(), clock_);
  RequestVerifier verifier(knownKey(), clock_, seconds(5));
  SignedHeaders h = signer.sign(kMethod, body_);
  clock_.advance(seconds(6));
  EXPECT_EQ(verifier.verify(kMethod, body_, h).reason,
            "timestamp outside the \u00b15 s window (clock skew?)");
}

TEST_F(RequestAuthTest, NoncesAreForgottenAfterTheWindowButOldRequestsStayRefused) {
  RequestSigner signer(knownKey(), clock_);
  RequestVerifier verifier(knownKey(), clock_);
  SignedHeaders old = signer.sign(kMethod, body_);
  ASSERT_TRUE(verifier.verify(kMethod, body_, old).ok);
  EXPECT_EQ(verifier.rememberedCount(), 1u);

  clock_.advance(seconds(30));  // still inside: remembered and refused as a replay
  EXPECT_EQ(verifier.verify(kMethod, body_, old).reason, "replayed nonce");
  EXPECT_TRUE(verifier.verify(kMethod, body_, signer.sign(kMethod, body_)).ok);
  EXPECT_EQ(verifier.rememberedCount(), 2u);

  clock_.advance(milliseconds(1));  // the first nonce has left the window
  EXPECT_EQ(verifier.verify(kMethod, body_, old).reason, kWindowReason);
  // Eviction runs when the next request is accepted: only the second nonce is still live.
  EXPECT_TRUE(verifier.verify(kMethod, body_, signer.sign(kMethod, body_)).ok);
  EXPECT_EQ(verifier.rememberedCount(), 2u);

  clock_.advance(seconds(31));
  EXPECT_TRUE(verifier.verify(kMethod, body_, signer.sign(kMethod, body_)).ok);
  EXPECT_EQ(verifier.rememberedCount(), 1u);
  EXPECT_EQ(verifier.verify(kMethod, body_, old).reason, kWindowReason);
}

TEST_F(RequestAuthTest, FullReplayMemoryRefusesNewRequestsUntilTheWindowPasses) {
  RequestSigner signer(knownKey(), clock_);
  RequestVerifier verifier(knownKey(), clock_, seconds(30), 2);
  SignedHeaders first = signer.sign(kMethod, body_);
  EXPECT_TRUE(verifier.verify(kMethod, body_, first).ok);
  EXPECT_TRUE(verifier.verify(kMethod, body_, signer.sign(kMethod, body_)).ok);
  EXPECT_EQ(verifier.verify(kMethod, body_, signer.sign(kMethod, body_)).reason,
            "too many requests in the replay window");
  // Full memory still recognises a replay as such rather than forgetting it.
  EXPECT_EQ(verifier.verify(kMethod, body_, first).reason, "replayed nonce");
  EXPECT_EQ(verifier.rememberedCount(), 2u);

  clock_.advance(seconds(31));
  EXPECT_TRUE(verifier.verify(kMethod, body_, signer.sign(kMethod, body_)).ok);
  EXPECT_EQ(verifier.rememberedCount(), 1u);
}

TEST_F(RequestAuthTest, OtherKeyDoesNotVerify) {
  RequestSigner signer(otherKey(), clock_);
  RequestVerifier verifier(knownKey(), clock_);
  EXPECT_NE(otherKey().fingerprint(), knownKey().fingerprint());
  EXPECT_EQ(verifier.verify(kMethod, body_, signer.sign(kMethod, body_)).reason, "bad signature");
  RequestVerifier otherVerifier(otherKey(), clock_);
  EXPECT_TRUE(otherVerifier.verify(kMethod, body_, signer.sign(kMethod, body_)).ok);
}

TEST_F(RequestAuthTest, ConcurrentReplaysAreAcceptedExactlyOnce) {
  RequestSigner signer(knownKey(), clock_);
  RequestVerifier verifier(knownKey(), clock_);
  std::vector<SignedHeaders> requests;
  for (int i = 0; i < 50; ++i) requests.push_back(signer.sign(kMethod, body_));

  std::atomic<int> accepted{0};
  std::atomic<int> replayed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (const SignedHeaders& h : requests) {
        VerifyResult r = verifier.verify(kMethod, body_, h);
        if (r.ok) ++accepted;
        if (r.reason == "replayed nonce") ++replayed;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(accepted.load(), 50);
  EXPECT_EQ(replayed.load(), 150);
  EXPECT_EQ(verifier.rememberedCount(), 50u);
}

}  // namespace
}  // namespace hvd::agent::auth

namespace hvd::agent::auth {
namespace {

// The one-time key of a Slurm job travels over a pipe (launcher/slurm_agents.h): what one side
// hands over, the other receives as the same key, and nothing after the line is consumed.
TEST(ClusterKeyTest, HandOverAndReceiveOverAPipeGiveTheSameKey) {
  const ClusterKey key = ClusterKey::random();
  const ClusterKey other = ClusterKey::random();
  EXPECT_NE(key.fingerprint(), other.fingerprint());
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  key.handOver(fds[1]);
  ASSERT_EQ(::write(fds[1], "rest", 4), 4);
  ::close(fds[1]);
  const ClusterKey got = ClusterKey::receive(fds[0], "the pipe");
  EXPECT_EQ(got.fingerprint(), key.fingerprint());
  EXPECT_EQ(got.hmacSha256Hex("message"), key.hmacSha256Hex("message"));
  char rest[8] = {};
  EXPECT_EQ(::read(fds[0], rest, sizeof(rest)), 4);
  EXPECT_STREQ(rest, "rest");
  ::close(fds[0]);
}

TEST(ClusterKeyTest, ReceiveRefusesAShortOrMalformedLineWithoutEchoingIt) {
  const auto receiveFrom = [](const std::string& text) {
    int fds[2];
    EXPECT_EQ(::pipe(fds), 0);
    EXPECT_EQ(::write(fds[1], text.data(), text.size()), static_cast<ssize_t>(text.size()));
    ::close(fds[1]);
    std::string message;
    try {
      ClusterKey::receive(fds[0], "stdin");
    } catch (const InvalidArgumentError& e) {
      message = e.what();
    }
    ::close(fds[0]);
    return message;
  };
  EXPECT_THAT(receiveFrom(""), ::testing::HasSubstr("stdin did not hold one line of 64 hex"));
  EXPECT_THAT(receiveFrom("abc123\n"), ::testing::HasSubstr("(6 characters before its end)"));
  const std::string notHex(64, 'z');
  const std::string message = receiveFrom(notHex + "\n");
  EXPECT_THAT(message, ::testing::HasSubstr("not all hex digits"));
  EXPECT_EQ(message.find("zzzz"), std::string::npos) << message;
  EXPECT_THAT(receiveFrom(std::string(65, 'a')), ::testing::HasSubstr("did not hold one line"));
}

}  // namespace
}  // namespace hvd::agent::auth
