# Job coordinator of the agent (agent/coordinator): placement, launch fan-out and fail-fast
# semantics against fake agents and a manual clock.
hvd_test(NAME coordinator_test LABEL unit TIMEOUT 60
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/coordinator_test.cc)
target_link_libraries(coordinator_test PRIVATE hvd_agent_coordinator)
# The node's ledger of slots and GPUs (agent/ledger): reservations, leases, takeover by a restart.
hvd_test(NAME ledger_test LABEL unit TIMEOUT 60 SOURCES ${CMAKE_CURRENT_LIST_DIR}/ledger_test.cc)
target_link_libraries(ledger_test PRIVATE hvd_agent_ledger)
# The relay tree (agent/relay): its shape, and a job's rounds through a tree of fake agents.
hvd_test(NAME relay_test LABEL unit TIMEOUT 60 SOURCES ${CMAKE_CURRENT_LIST_DIR}/relay_test.cc)
target_link_libraries(relay_test PRIVATE hvd_agent_relay hvd_agent_coordinator)
