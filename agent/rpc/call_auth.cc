#include "agent/rpc/call_auth.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <spdlog/spdlog.h>

#include "agent/auth/cluster_key.h"

namespace hvd::agent::rpc {
namespace {

// One metadata value, or empty when absent (or repeated: a second value is an attempt to
// confuse the check, and an empty value fails it as "missing signature").
std::string metadataValue(const std::multimap<grpc::string_ref, grpc::string_ref>& metadata,
                          std::string_view key) {
  const auto range = metadata.equal_range(grpc::string_ref(key.data(), key.size()));
  if (range.first == range.second || std::next(range.first) != range.second) return {};
  return std::string(range.first->second.data(), range.first->second.size());
}

// The caller's address without its port ("ipv4:10.0.0.1:4242" -> "ipv4:10.0.0.1",
// "ipv6:[::1]:4242" -> "ipv6:[::1]"): a client reconnects from a new port for every retry, and
// a denial is logged once per caller, not once per connection.
std::string peerHost(const std::string& peer) {
  const size_t colon = peer.rfind(':');
  const size_t scheme = peer.find(':');
  if (colon == std::string::npos || colon == scheme) return peer;
  return peer.substr(0, colon);
}

}  // namespace

std::string requestDigest(const google::protobuf::Message& request) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    request.SerializeToCodedStream(&coded);
  }
  return auth::sha256Hex(bytes);
}

void CallSigner::sign(grpc::ClientContext* context, std::string_view method,
                      const google::protobuf::Message& request) {
  const auth::SignedHeaders headers = signer_.sign(method, requestDigest(request));
  context->AddMetadata(std::string(auth::kTimestampMetadata), headers.timestamp);
  context->AddMetadata(std::string(auth::kNonceMetadata), headers.nonce);
  context->AddMetadata(std::string(auth::kSignatureMetadata), headers.signature);
}

grpc::Status CallGuard::check(const grpc::ServerContext& context, std::string_view method,
                              const google::protobuf::Message& request) {
  const auto& metadata = context.client_metadata();
  auth::SignedHeaders headers;
  headers.timestamp = metadataValue(metadata, auth::kTimestampMetadata);
  headers.nonce = metadataValue(metadata, auth::kNonceMetadata);
  headers.signature = metadataValue(metadata, auth::kSignatureMetadata);
  const auth::VerifyResult result = verifier_->verify(method, requestDigest(request), headers);
  if (result.ok) return grpc::Status::OK;

  const std::string peer = context.peer();
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++denials_;
    // Bounded: a flood of distinct callers stops adding entries (and log lines) at the cap.
    if (logged_.size() < kMaxLoggedDenials) {
      first = logged_.insert(peerHost(peer) + "|" + result.reason).second;
    }
  }
  if (first) {
    spdlog::warn("hvdagent: denied {} from {}: {}", method, peer, result.reason);
  }
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      std::string(kAuthFailedPrefix) + ": " + result.reason);
}

size_t CallGuard::denials() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return denials_;
}

size_t CallGuard::loggedDenials() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return logged_.size();
}

}  // namespace hvd::agent::rpc
