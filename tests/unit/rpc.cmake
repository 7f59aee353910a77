# The control plane's shared pieces (agent/rpc) and the gRPC client of a remote agent
# (agent/client), against an in-process fake hvd.v1.Agent server on an ephemeral loopback port.
hvd_test(NAME rpc_test LABEL unit TIMEOUT 120 SOURCES ${CMAKE_CURRENT_LIST_DIR}/rpc_test.cc)
target_link_libraries(rpc_test PRIVATE hvd_agent_client hvd_agent_rpc hvd_internal hvd_test_support hvd_test_grpc)
target_compile_definitions(rpc_test
                           PRIVATE HVD_MAKE_TEST_CERTS="${CMAKE_CURRENT_LIST_DIR}/make_test_certs.sh")
