# hvd_agent_rpc: what client and server of the control plane share: channels and credentials
# (mutual TLS optional) and per-call request signing / checking over agent/auth.
add_library(hvd_agent_rpc STATIC
  ${CMAKE_CURRENT_LIST_DIR}/credentials.cc
  ${CMAKE_CURRENT_LIST_DIR}/call_auth.cc
  ${CMAKE_CURRENT_LIST_DIR}/denial_log.cc
  ${CMAKE_CURRENT_LIST_DIR}/convert.cc)
target_include_directories(hvd_agent_rpc PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(hvd_agent_rpc PUBLIC hvd_proto hvd_auth hvd_agent_coordinator hvd_agent_relay hvd_agent_common hvd PRIVATE hvd_support hvd_contract_env spdlog::spdlog
                      hvd_warnings)
