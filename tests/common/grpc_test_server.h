// An in-process gRPC server for tests: the given services on 127.0.0.1 with a port the kernel
// picks (127.0.0.1:0).
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>

namespace hvd::test {

// Starts `service` on 127.0.0.1:0 with `credentials` (insecure when null); *port gets the port
// it listens on. Returns null (and *port 0) if the server did not start.
std::unique_ptr<grpc::Server> startLoopbackServer(
    grpc::Service* service, int* port,
    std::shared_ptr<grpc::ServerCredentials> credentials = nullptr);

}  // namespace hvd::test
