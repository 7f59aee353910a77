#include "agent/rpc/credentials.h"

#include <fstream>
#include <sstream>

#include "hvd/error.hpp"

namespace hvd::agent::rpc {
namespace {

std::string readPem(const std::string& option, const std::string& path) {
  if (path.empty()) {
    throw InvalidArgumentError(option + " is required when any TLS option is given (" +
                               "--tls-cert, --tls-key and --tls-ca go together)");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InvalidArgumentError(option + ": cannot read '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().empty()) throw InvalidArgumentError(option + ": '" + path + "' is empty");
  return text.str();
}

}  // namespace

std::shared_ptr<grpc::ServerCredentials> makeServerCredentials(const TlsOptions& tls) {
  if (!tls.enabled()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(
      GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = readPem("--tls-ca", tls.caFile);
  options.pem_key_cert_pairs.push_back(
      {readPem("--tls-key", tls.keyFile), readPem("--tls-cert", tls.certFile)});
  return grpc::SslServerCredentials(options);
}

std::shared_ptr<grpc::Channel> makeChannel(const std::string& address, const TlsOptions& tls,
                                           const std::string& tlsTargetName) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, static_cast<int>(kKeepaliveInterval.count()));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, static_cast<int>(kKeepaliveTimeout.count()));
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // Fail fast: a refused connection is reported at once rather than retried until the deadline
  // with exponential backoff, and reconnects after a lost agent start quickly.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // Each channel gets its own connection: the coordinator's stream to one agent must not share
  // fate (or a subchannel) with another channel to the same address.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (tls.enabled()) {
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = readPem("--tls-ca", tls.caFile);
    options.pem_private_key = readPem("--tls-key", tls.keyFile);
    options.pem_cert_chain = readPem("--tls-cert", tls.certFile);
    credentials = grpc::SslCredentials(options);
    if (!tlsTargetName.empty()) args.SetSslTargetNameOverride(tlsTargetName);
  } else {
    credentials = grpc::InsecureChannelCredentials();
  }
  return grpc::CreateCustomChannel(address, credentials, args);
}

void configureServerKeepalive(grpc::ServerBuilder* builder) {
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS,
                              static_cast<int>(kKeepaliveInterval.count()));
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                              static_cast<int>(kKeepaliveTimeout.count()));
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // Accept the client's pings as often as makeChannel sends them (the default minimum of 5 min
  // would answer them with GOAWAY "too_many_pings").
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                              static_cast<int>(kKeepaliveInterval.count() / 2));
}

}  // namespace hvd::agent::rpc
