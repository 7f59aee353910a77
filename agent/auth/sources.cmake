# hvd_auth: the cluster key and signed, replay-protected request metadata.
# Pure C++ over libcrypto, no gRPC, so it is unit-tested without a server.
find_package(OpenSSL REQUIRED)
add_library(hvd_auth STATIC
  ${CMAKE_CURRENT_LIST_DIR}/cluster_key.cc
  ${CMAKE_CURRENT_LIST_DIR}/request_signer.cc)
target_include_directories(hvd_auth PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(hvd_auth PUBLIC hvd PRIVATE OpenSSL::Crypto hvd_warnings)
