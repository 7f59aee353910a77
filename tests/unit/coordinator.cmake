# Job coordinator of the agent (agent/coordinator): placement, launch fan-out and fail-fast
# semantics against fake agents and a manual clock.
hvd_test(NAME coordinator_test LABEL unit TIMEOUT 60
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/coordinator_test.cc)
target_link_libraries(coordinator_test PRIVATE hvd_agent_coordinator)
