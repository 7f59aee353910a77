# Cluster key loading and request signing of the agent (agent/auth).
hvd_test(NAME auth_test LABEL unit TIMEOUT 60 SOURCES ${CMAKE_CURRENT_LIST_DIR}/auth_test.cc)
target_link_libraries(auth_test PRIVATE hvd_auth hvd_test_support)
