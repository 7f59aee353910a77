# The real hvdagent executable and its security: root guard, key file
# refusals, the address it binds, mutual TLS, SIGTERM, and clean-up of a killed agent's leftovers
# on restart.
hvd_test(NAME hvdagent_test LABEL mp TIMEOUT 120 SOURCES ${CMAKE_CURRENT_LIST_DIR}/hvdagent_test.cc)
target_link_libraries(hvdagent_test PRIVATE hvd_agent_rpc hvd_auth hvd_proto hvd_test_support)
target_compile_definitions(hvdagent_test PRIVATE HVDAGENT_PATH="$<TARGET_FILE:hvdagent>"
  HVD_MAKE_TEST_CERTS="${PROJECT_SOURCE_DIR}/tests/unit/make_test_certs.sh")
add_dependencies(hvdagent_test hvdagent)
