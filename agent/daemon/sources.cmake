# hvd_agent_daemon: hvdagent as a program: its command line (agent_cli.h) and its life as a Slurm
# step (slurm_step.h: listen address, ready line, end of the step). The hvdagent executable wires
# the service, the jobs, persistence and RemoteNodeAgent (agent/client) together in main().
find_package(CLI11 CONFIG REQUIRED)
add_library(hvd_agent_daemon STATIC
  ${CMAKE_CURRENT_LIST_DIR}/agent_cli.cc
  ${CMAKE_CURRENT_LIST_DIR}/slurm_step.cc)
target_include_directories(hvd_agent_daemon PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(hvd_agent_daemon PUBLIC hvd_agent_rpc hvd_agent_records
                      PRIVATE hvd_agent_common hvd_agent_metrics hvd_support hvd_contract_env CLI11::CLI11 spdlog::spdlog hvd_warnings)

if(TARGET hvd_agent_client)
  add_executable(hvdagent ${CMAKE_CURRENT_LIST_DIR}/hvdagent_main.cc)
  target_link_libraries(hvdagent PRIVATE hvd_agent_daemon hvd_agent_service hvd_agent_jobs hvd_agent_metrics
                                         hvd_agent_client hvd_agent_common hvd_support hvd_contract_env
                                         spdlog::spdlog hvd_warnings)
endif()
