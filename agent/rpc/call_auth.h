// Per-call authentication of the control plane (docs/architecture.md "Security"): the client side
// signs every request (CallSigner), the server side checks every request in one place (CallGuard)
// before any handler logic runs. Both use agent/auth's RequestSigner/RequestVerifier over the
// full method name and the SHA-256 of the request's deterministic serialization, so a signature
// cannot be moved to another method or another request body.
#pragma once

#include <google/protobuf/message.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "agent/auth/request_signer.h"
#include "agent/rpc/denial_log.h"

namespace hvd::agent::rpc {

// SHA-256 hex of the request's deterministic serialization: what signer and verifier both hash.
std::string requestDigest(const google::protobuf::Message& request);

class CallSigner {
 public:
  // Keeps a copy of the key; `clock` must outlive the signer.
  CallSigner(const auth::ClusterKey& key, auth::Clock& clock) : signer_(key, clock) {}

  // Adds hvd-ts, hvd-nonce and hvd-sig to `context` for one call of `method` with `request`.
  void sign(grpc::ClientContext* context, std::string_view method,
            const google::protobuf::Message& request);

 private:
  auth::RequestSigner signer_;
};

// The message every refused call carries, with the verifier's reason after it.
inline constexpr std::string_view kAuthFailedPrefix = "authentication failed";

class CallGuard {
 public:
  // `verifier` must outlive the guard, and so must `clock` when given (the system clock
  // otherwise): it times the intervals of the denial log (agent/rpc/denial_log.h).
  explicit CallGuard(auth::RequestVerifier* verifier, auth::Clock* clock = nullptr,
                     std::chrono::milliseconds logInterval = DenialLog::kDefaultInterval);

  // OK, or UNAUTHENTICATED "authentication failed: <reason>". Denials are logged rate-limited
  // (DenialLog): the first of an interval at once with the peer, the method and the reason,
  // the rest as one summary line, so a client retrying a bad key cannot flood the log. Never
  // metadata values.
  grpc::Status check(const grpc::ServerContext& context, std::string_view method,
                     const google::protobuf::Message& request);

  // Denials so far (all of them, logged or not); for tests.
  size_t denials() const { return log_.total(); }
  // Denials logged on a line of their own (the first of each interval); for tests.
  size_t loggedDenials() const { return log_.logged(); }

 private:
  auth::RequestVerifier* const verifier_;
  std::unique_ptr<auth::SystemClock> ownClock_;  // when no clock was given
  DenialLog log_;
};

}  // namespace hvd::agent::rpc
