// Signed, replay-protected request metadata: the authentication every agent RPC passes through.
//
// A client signs each request with the cluster key and sends three metadata entries:
//   hvd-ts     milliseconds since the Unix epoch, decimal
//   hvd-nonce  16 random bytes, 32 lowercase hex characters
//   hvd-sig    hex HMAC-SHA256(key, "hvd-v1\n" + method + "\n" + ts + "\n" + nonce + "\n" + body)
// where method is the full gRPC method name and body is sha256Hex() of the serialized request.
//
// The server accepts a request only if the signature matches, the timestamp is within the window
// of its own clock, and the nonce was not seen before. Nonces are remembered only while their
// timestamp is inside the window: after that the window check alone refuses a replay, so memory
// stays bounded by the request rate times the window. The "hvd-v1" prefix lets a later format be
// told apart instead of being misread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <queue>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "agent/auth/cluster_key.h"

namespace hvd::agent::auth {

inline constexpr std::string_view kTimestampMetadata = "hvd-ts";
inline constexpr std::string_view kNonceMetadata = "hvd-nonce";
inline constexpr std::string_view kSignatureMetadata = "hvd-sig";
inline constexpr std::string_view kCanonicalVersion = "hvd-v1";

// Wall-clock time, injected so that window and replay logic can be tested without sleeping.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual std::chrono::system_clock::time_point now() = 0;
};

class SystemClock : public Clock {
 public:
  std::chrono::system_clock::time_point now() override { return std::chrono::system_clock::now(); }
};

// The values a client puts in the hvd-ts, hvd-nonce and hvd-sig metadata.
struct SignedHeaders {
  std::string timestamp;
  std::string nonce;
  std::string signature;
};

// The string that is MACed; exposed so tests and other languages' clients can check against it.
std::string canonicalRequest(std::string_view method, std::string_view timestamp,
                             std::string_view nonce, std::string_view bodyDigest);

class RequestSigner {
 public:
  // Keeps a copy of the key; `clock` must outlive the signer.
  RequestSigner(const ClusterKey& key, Clock& clock) : key_(key), clock_(clock) {}

  // Signs one request. Each call draws a fresh nonce, so the result must be sent once.
  SignedHeaders sign(std::string_view method, std::string_view bodyDigest);

 private:
  ClusterKey key_;
  Clock& clock_;
};

// Expected outcome of checking a request: a value, since a refused request is not an error of
// the server. `reason` is empty when ok, otherwise one of the fixed strings below (safe to log
// and to return to the client: it never contains key material).
struct VerifyResult {
  bool ok = false;
  std::string reason;
};

class RequestVerifier {
 public:
  // `window`: how far a request's timestamp may be from this host's clock, either way.
  // `maxRemembered`: nonces kept at once; beyond it new requests are refused, because forgetting
  // a live nonce would let its request be replayed.
  RequestVerifier(const ClusterKey& key, Clock& clock,
                  std::chrono::milliseconds window = std::chrono::seconds(30),
                  size_t maxRemembered = 100000);

  // Reasons, checked in this order: "missing signature" (any of the three values empty),
  // "malformed timestamp" (not 1-18 decimal digits), "malformed nonce" (not 32 hex characters),
  // "timestamp outside the ±30 s window (clock skew?)" (with the configured window),
  // "bad signature", "replayed nonce", "too many requests in the replay window".
  // The signature is checked before the nonce is remembered, so unsigned requests cannot fill
  // the replay memory. Thread-safe.
  VerifyResult verify(std::string_view method, std::string_view bodyDigest,
                      const SignedHeaders& headers);

  // Nonces currently remembered. Eviction runs when a request reaches the replay check, so this
  // may include nonces that have just left the window. For tests and metrics.
  size_t rememberedCount() const;

 private:
  using Entry = std::pair<int64_t, std::string>;  // (timestamp ms, nonce)

  void evictOlderThan(int64_t oldestKeptMs);  // requires mutex_

  const ClusterKey key_;
  Clock& clock_;
  const std::chrono::milliseconds window_;
  const size_t maxRemembered_;
  const std::string windowReason_;

  mutable std::mutex mutex_;
  std::unordered_set<std::string> nonces_;
  // Oldest timestamp on top, so eviction pops only what has left the window.
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> byTime_;
};

}  // namespace hvd::agent::auth
