# Process supervision of the agent (agent/process): real children through /bin/sh, and the fake.
hvd_test(NAME process_test LABEL unit TIMEOUT 120 SOURCES ${CMAKE_CURRENT_LIST_DIR}/process_test.cc)
target_link_libraries(process_test PRIVATE hvd_agent_process)
