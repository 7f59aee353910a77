# hvd_agent_service: hvdagent's gRPC service and what it stands on (issue 3): node facts for
# Describe, the jobs' base environment, job records (clean-up after a crash), the node's local
# jobs, and the SubmitJob coordinator glue. Remote hosts come in through a factory, so the
# library and its unit tests do not need the gRPC client; the hvdagent executable wires
# RemoteNodeAgent in.
find_package(CLI11 CONFIG REQUIRED)
add_library(hvd_agent_service STATIC
  ${CMAKE_CURRENT_LIST_DIR}/agent_cli.cc
  ${CMAKE_CURRENT_LIST_DIR}/agent_service.cc
  ${CMAKE_CURRENT_LIST_DIR}/atomic_file.cc
  ${CMAKE_CURRENT_LIST_DIR}/environment.cc
  ${CMAKE_CURRENT_LIST_DIR}/job_history.cc
  ${CMAKE_CURRENT_LIST_DIR}/job_log.cc
  ${CMAKE_CURRENT_LIST_DIR}/job_records.cc
  ${CMAKE_CURRENT_LIST_DIR}/led_jobs.cc
  ${CMAKE_CURRENT_LIST_DIR}/local_jobs.cc
  ${CMAKE_CURRENT_LIST_DIR}/node_facts.cc
  ${CMAKE_CURRENT_LIST_DIR}/slurm_step.cc
  ${CMAKE_CURRENT_LIST_DIR}/submit_job.cc)
target_include_directories(hvd_agent_service PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(hvd_agent_service
                      PUBLIC hvd_agent_rpc hvd_agent_coordinator hvd_auth hvd_proto hvd_internal
                      PRIVATE hvd_agent_common CLI11::CLI11 spdlog::spdlog hvd_warnings)
target_compile_definitions(hvd_agent_service PRIVATE HVD_AGENT_VERSION="${PROJECT_VERSION}")
if(HVD_HAVE_NCCL)
  target_compile_definitions(hvd_agent_service PRIVATE HVD_AGENT_HAVE_NCCL)
endif()
if(HVD_HAVE_MPI)
  target_compile_definitions(hvd_agent_service PRIVATE HVD_AGENT_HAVE_MPI)
endif()

# hvdagent: the per-node daemon. Needs RemoteNodeAgent (agent/client) for jobs it leads across
# hosts.
if(TARGET hvd_agent_client)
  add_executable(hvdagent ${CMAKE_CURRENT_LIST_DIR}/hvdagent_main.cc)
  target_link_libraries(hvdagent PRIVATE hvd_agent_service hvd_agent_client hvd_agent_common
                                         hvd_internal spdlog::spdlog hvd_warnings)
endif()
