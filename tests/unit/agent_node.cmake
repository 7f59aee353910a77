# Node facts of the agent (agent/node): GPU discovery and the worker environment contract.
hvd_test(NAME agent_node_test LABEL unit TIMEOUT 60
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/agent_node_test.cc)
target_link_libraries(agent_node_test PRIVATE hvd_agent_node hvd_contract hvd_test_support)

# The worker environment from the agent's writer through the runtime's parser, for every rank of
# a placement; every hvd variable written has a reader.
hvd_test(NAME worker_env_roundtrip_test LABEL unit TIMEOUT 60
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/worker_env_roundtrip_test.cc)
target_link_libraries(worker_env_roundtrip_test PRIVATE hvd_agent_node hvd_contract hvd_test_support)
