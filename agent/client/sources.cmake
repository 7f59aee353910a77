# hvd_agent_client: the gRPC client side of the control plane: RemoteNodeAgent (the leader's
# NodeAgent for other hosts).
add_library(hvd_agent_client STATIC ${CMAKE_CURRENT_LIST_DIR}/remote_node_agent.cc)
target_include_directories(hvd_agent_client PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(hvd_agent_client PUBLIC hvd_agent_rpc hvd_agent_coordinator
                      PRIVATE hvd_agent_common hvd_support hvd_contract_env spdlog::spdlog hvd_warnings)
