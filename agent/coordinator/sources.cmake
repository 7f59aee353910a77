# hvd_agent_coordinator: the leader agent's job coordinator: describe, place, launch,
# fail fast with one root cause. Domain logic over the NodeAgent interface, no gRPC, so it is
# unit-tested with FakeNodeAgent; the gRPC service and the embedded hvdrun adapt it.
add_library(hvd_agent_coordinator STATIC
  ${CMAKE_CURRENT_LIST_DIR}/job_coordinator.cc
  ${CMAKE_CURRENT_LIST_DIR}/rank_environments.cc
  ${CMAKE_CURRENT_LIST_DIR}/restart_policy.cc
  ${CMAKE_CURRENT_LIST_DIR}/fake_node_agent.cc)
target_include_directories(hvd_agent_coordinator PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(hvd_agent_coordinator
                      PUBLIC hvd_contract hvd_agent_node hvd_agent_ledger hvd_agent_process hvd
                      PRIVATE hvd_warnings)
