# hvd_agent_relay: the relay tree (docs/scale.md): beyond a width, a job's hosts are reached
# through agents that call the hosts of their branch in turn. Its shape, the link to one child
# (an interface the gRPC client implements) and the hosts of a job as NodeAgents over such links.
# No gRPC here: unit-tested with fake links.
add_library(hvd_agent_relay STATIC
  ${CMAKE_CURRENT_LIST_DIR}/link_agent.cc
  ${CMAKE_CURRENT_LIST_DIR}/tree_shape.cc
  ${CMAKE_CURRENT_LIST_DIR}/tree_hosts.cc)
target_include_directories(hvd_agent_relay PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(hvd_agent_relay PUBLIC hvd_agent_coordinator PRIVATE hvd_warnings)
