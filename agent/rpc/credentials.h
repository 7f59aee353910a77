// Transport security of the control plane: channels and server credentials, with mutual TLS as
// the option for untrusted networks (docs/architecture.md "Security"). Without TLS options the
// transport is plaintext and every call is still authenticated by its signed metadata
// (call_auth.h); with them both sides present certificates signed by the given CA and verify each
// other's.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>

namespace hvd::agent::rpc {

// PEM file paths. All three empty: plaintext. Otherwise all three are required.
struct TlsOptions {
  std::string certFile;
  std::string keyFile;
  std::string caFile;

  bool enabled() const { return !certFile.empty() || !keyFile.empty() || !caFile.empty(); }
};

// Throws hvd::InvalidArgumentError naming the option and the path when TLS is half configured or
// a file cannot be read.
std::shared_ptr<grpc::ServerCredentials> makeServerCredentials(const TlsOptions& tls);

// A channel to an agent at "host:port" with keepalive pings, so a peer that vanishes (host
// down, cable pulled) breaks open streams within seconds instead of hanging on TCP timeouts.
// `tlsTargetName` overrides the name checked against the server certificate (tests use it when
// connecting by IP address); empty: the host part of `address`.
std::shared_ptr<grpc::Channel> makeChannel(const std::string& address, const TlsOptions& tls,
                                           const std::string& tlsTargetName = "");

// Server options matching makeChannel's keepalive, so the server accepts the client's pings and
// sends its own (a client that vanishes cancels its streams on the server).
void configureServerKeepalive(grpc::ServerBuilder* builder);

// How often keepalive pings go out, and how long an unanswered ping may take before the
// connection is declared dead: a vanished host is noticed within interval + timeout (10 s).
// The timeout leaves room for a host busy starting its ranks: at 3 s, 64 netns hosts starting
// 8 ranks each at once on 2 cores missed pings and failed healthy jobs.
inline constexpr std::chrono::milliseconds kKeepaliveInterval{2000};
inline constexpr std::chrono::milliseconds kKeepaliveTimeout{8000};

}  // namespace hvd::agent::rpc
