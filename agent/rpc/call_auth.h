// Per-call authentication of the control plane (DESIGN.md "Security"): the client side signs
// every request (CallSigner), the server side checks every request in one place (CallGuard)
// before any handler logic runs. Both use agent/auth's RequestSigner/RequestVerifier over the
// full method name and the SHA-256 of the request's deterministic serialization, so a signature
// cannot be moved to another method or another request body.
#pragma once

#include <google/protobuf/message.h>
#include <grpcpp/grpcpp.h>

#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>

#include "agent/auth/request_signer.h"

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
  // `verifier` must outlive the guard.
  explicit CallGuard(auth::RequestVerifier* verifier) : verifier_(verifier) {}

  // OK, or UNAUTHENTICATED "authentication failed: <reason>". A denial is logged once per caller
  // host (the peer address without its port) and reason, so a client retrying a bad key cannot
  // flood the log; the line names the peer, the method and the reason, never metadata values.
  grpc::Status check(const grpc::ServerContext& context, std::string_view method,
                     const google::protobuf::Message& request);

  // Denials so far (all of them, logged or not); for tests.
  size_t denials() const;
  // Denials that were logged (first of their caller and reason); for tests.
  size_t loggedDenials() const;

  // Distinct (caller, reason) pairs remembered for logging; beyond it denials are counted only.
  static constexpr size_t kMaxLoggedDenials = 4096;

 private:
  auth::RequestVerifier* const verifier_;
  mutable std::mutex mutex_;
  std::unordered_set<std::string> logged_;  // "peer|reason"
  size_t denials_ = 0;
};

}  // namespace hvd::agent::rpc
