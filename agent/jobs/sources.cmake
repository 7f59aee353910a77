# hvd_agent_jobs: the jobs hvdagent leads and runs, whoever asked: the node's local jobs (merged
# environments, records) and the jobs this agent leads (the queue, the attempts and their
# restarts, the history), over the coordinator and the ledger. No gRPC or protobuf here: the
# adapter in agent/service/ turns calls into these, the records are written in the jobs' own types
# (agent/records/led_job_records.h), and remote hosts come in through a factory.
add_library(hvd_agent_jobs STATIC
  ${CMAKE_CURRENT_LIST_DIR}/attempts.cc
  ${CMAKE_CURRENT_LIST_DIR}/elastic_job.cc
  ${CMAKE_CURRENT_LIST_DIR}/environment.cc
  ${CMAKE_CURRENT_LIST_DIR}/host_launch.cc
  ${CMAKE_CURRENT_LIST_DIR}/led_elastic.cc
  ${CMAKE_CURRENT_LIST_DIR}/led_jobs.cc
  ${CMAKE_CURRENT_LIST_DIR}/local_host.cc)
target_include_directories(hvd_agent_jobs PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(hvd_agent_jobs
                      PUBLIC hvd_agent_records hvd_agent_coordinator hvd_agent_relay hvd_agent_ledger hvd_agent_elastic hvd
                      PRIVATE hvd_agent_common hvd_auth hvd_support hvd_contract_env spdlog::spdlog hvd_warnings)
