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

CallGuard::CallGuard(auth::RequestVerifier* verifier, auth::Clock* clock,
                     std::chrono::milliseconds logInterval)
    : verifier_(verifier),
      ownClock_(clock == nullptr ? std::make_unique<auth::SystemClock>() : nullptr),
      log_(clock != nullptr ? clock : ownClock_.get(), logInterval) {}

grpc::Status CallGuard::check(const grpc::ServerContext& context, std::string_view method,
                              const google::protobuf::Message& request) {
  const auto& metadata = context.client_metadata();
  auth::SignedHeaders headers;
  headers.timestamp = metadataValue(metadata, auth::kTimestampMetadata);
  headers.nonce = metadataValue(metadata, auth::kNonceMetadata);
  headers.signature = metadataValue(metadata, auth::kSignatureMetadata);
  const auth::VerifyResult result = verifier_->verify(method, requestDigest(request), headers);
  if (result.ok) {
    // A summary still held for an interval that is over goes out now, not at the next denial.
    log_.flushIfDue();
    return grpc::Status::OK;
  }
  log_.record(method, context.peer(), result.reason);
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      std::string(kAuthFailedPrefix) + ": " + result.reason);
}

}  // namespace hvd::agent::rpc
