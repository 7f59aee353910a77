#include "common/grpc_test_server.h"

namespace hvd::test {

std::unique_ptr<grpc::Server> startLoopbackServer(
    grpc::Service* service, int* port, std::shared_ptr<grpc::ServerCredentials> credentials) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0",
                           credentials != nullptr ? credentials : grpc::InsecureServerCredentials(),
                           port);
  builder.RegisterService(service);
  return builder.BuildAndStart();
}

}  // namespace hvd::test
