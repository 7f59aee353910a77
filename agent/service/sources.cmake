# hvd_agent_service: hvdagent's gRPC service adapter: it checks each call's authentication, turns
# requests into calls on the jobs (agent/jobs) and streams their events back, and
# answers Describe with the node's facts (agent/node/node_facts.h). Remote hosts come in through a
# factory, so the library and its unit tests do not need the gRPC client.
add_library(hvd_agent_service STATIC
  ${CMAKE_CURRENT_LIST_DIR}/agent_service.cc
  ${CMAKE_CURRENT_LIST_DIR}/job_log_stream.cc
  ${CMAKE_CURRENT_LIST_DIR}/relay_calls.cc
  ${CMAKE_CURRENT_LIST_DIR}/submit_job.cc)
target_include_directories(hvd_agent_service PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(hvd_agent_service
                      PUBLIC hvd_agent_jobs hvd_agent_relay hvd_agent_records hvd_agent_rpc hvd_agent_coordinator hvd_auth
                             hvd_proto hvd_support hvd_contract_env
                      PRIVATE hvd_agent_common spdlog::spdlog hvd_warnings)
