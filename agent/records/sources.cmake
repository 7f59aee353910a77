# hvd_agent_records: what hvdagent keeps on disk, apart from the service and the jobs that write
# it: job records (the process groups a crashed agent leaves behind), the job history (the state
# and the request of every job this agent led, so queued jobs and `hvdrun ps` survive a restart),
# the per-job output log, the atomic file writes all of them use and the room they share on disk;
# and the led jobs' records in the jobs' own types (led_job_records.h), so agent/jobs sees no
# protobuf.
add_library(hvd_agent_records STATIC
  ${CMAKE_CURRENT_LIST_DIR}/atomic_file.cc
  ${CMAKE_CURRENT_LIST_DIR}/job_history.cc
  ${CMAKE_CURRENT_LIST_DIR}/job_log.cc
  ${CMAKE_CURRENT_LIST_DIR}/job_records.cc
  ${CMAKE_CURRENT_LIST_DIR}/led_job_records.cc
  ${CMAKE_CURRENT_LIST_DIR}/state_space.cc
  ${CMAKE_CURRENT_LIST_DIR}/trusted_path.cc)
target_include_directories(hvd_agent_records PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(hvd_agent_records PUBLIC hvd_agent_rpc hvd_agent_process hvd_proto hvd
                      PRIVATE hvd_auth hvd_support hvd_contract_env spdlog::spdlog hvd_warnings)
