#include "agent/auth/request_signer.h"

#include <openssl/crypto.h>

#include <cstdio>

namespace hvd::agent::auth {
namespace {

constexpr size_t kNonceBytes = 16;
constexpr size_t kSignatureHexSize = 64;
// 18 digits always fit in int64 and reach the year 33658; more is not a timestamp we sign.
constexpr size_t kMaxTimestampDigits = 18;

int64_t millisSinceEpoch(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

bool parseTimestamp(std::string_view s, int64_t* out) {
  if (s.empty() || s.size() > kMaxTimestampDigits) return false;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

// Exactly what sign() produces. Holding the nonce to this shape also bounds what the replay
// memory stores per request.
bool isWellFormedNonce(std::string_view s) {
  if (s.size() != 2 * kNonceBytes) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string windowReason(std::chrono::milliseconds window) {
  char buf[32];
  if (window.count() % 1000 == 0) {
    std::snprintf(buf, sizeof buf, "%lld s", static_cast<long long>(window.count() / 1000));
  } else {
    std::snprintf(buf, sizeof buf, "%lld ms", static_cast<long long>(window.count()));
  }
  return std::string("timestamp outside the \u00b1") + buf + " window (clock skew?)";
}

VerifyResult refused(std::string reason) { return VerifyResult{false, std::move(reason)}; }

}  // namespace

std::string canonicalRequest(std::string_view method, std::string_view timestamp,
                             std::string_view nonce, std::string_view bodyDigest) {
  std::string s;
  s.reserve(kCanonicalVersion.size() + method.size() + timestamp.size() + nonce.size() +
            bodyDigest.size() + 4);
  s.append(kCanonicalVersion).append("\n");
  s.append(method).append("\n");
  s.append(timestamp).append("\n");
  s.append(nonce).append("\n");
  s.append(bodyDigest);
  return s;
}

SignedHeaders RequestSigner::sign(std::string_view method, std::string_view bodyDigest) {
  unsigned char nonce[kNonceBytes];
  fillFromKernelRandom(nonce, sizeof nonce);
  SignedHeaders h;
  h.timestamp = std::to_string(millisSinceEpoch(clock_.now()));
  h.nonce = hexEncode(nonce, sizeof nonce);
  h.signature = key_.hmacSha256Hex(canonicalRequest(method, h.timestamp, h.nonce, bodyDigest));
  return h;
}

RequestVerifier::RequestVerifier(const ClusterKey& key, Clock& clock,
                                 std::chrono::milliseconds window, size_t maxRemembered)
    : key_(key),
      clock_(clock),
      window_(window),
      maxRemembered_(maxRemembered),
      windowReason_(windowReason(window)) {}

VerifyResult RequestVerifier::verify(std::string_view method, std::string_view bodyDigest,
                                     const SignedHeaders& headers) {
  if (headers.timestamp.empty() || headers.nonce.empty() || headers.signature.empty()) {
    return refused("missing signature");
  }
  int64_t timestampMs = 0;
  if (!parseTimestamp(headers.timestamp, &timestampMs)) return refused("malformed timestamp");
  if (!isWellFormedNonce(headers.nonce)) return refused("malformed nonce");

  const int64_t nowMs = millisSinceEpoch(clock_.now());
  const int64_t skewMs = nowMs > timestampMs ? nowMs - timestampMs : timestampMs - nowMs;
  if (skewMs > window_.count()) return refused(windowReason_);

  // The signature's length is public (always 64); only its content is compared in constant time,
  // so the time taken does not tell an attacker how many leading characters were right.
  std::string expected =
      key_.hmacSha256Hex(canonicalRequest(method, headers.timestamp, headers.nonce, bodyDigest));
  if (headers.signature.size() != kSignatureHexSize ||
      CRYPTO_memcmp(expected.data(), headers.signature.data(), kSignatureHexSize) != 0) {
    return refused("bad signature");
  }

  std::lock_guard<std::mutex> lock(mutex_);
  // A nonce may be forgotten once its request would fail the window check anyway.
  evictOlderThan(nowMs - window_.count());
  if (nonces_.count(headers.nonce) != 0) return refused("replayed nonce");
  if (nonces_.size() >= maxRemembered_) {
    // Forgetting a live nonce instead would reopen a replay; refusing is the safe overload.
    return refused("too many requests in the replay window");
  }
  nonces_.insert(headers.nonce);
  byTime_.emplace(timestampMs, headers.nonce);
  return VerifyResult{true, ""};
}

void RequestVerifier::evictOlderThan(int64_t oldestKeptMs) {
  while (!byTime_.empty() && byTime_.top().first < oldestKeptMs) {
    nonces_.erase(byTime_.top().second);
    byTime_.pop();
  }
}

size_t RequestVerifier::rememberedCount() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return nonces_.size();
}

}  // namespace hvd::agent::auth
