hvd_test(NAME host_spec_test LABEL unit TIMEOUT 60
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/host_spec_test.cc)
target_link_libraries(host_spec_test PRIVATE hvd_contract)

# Slurm's hostlist and tasks-per-node forms.
hvd_test(NAME slurm_hosts_test LABEL unit TIMEOUT 60
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/slurm_hosts_test.cc)
target_link_libraries(slurm_hosts_test PRIVATE hvd_contract hvd_internal)

# hvdrun in a Slurm allocation: srun's argv for the agents, their ready lines, the
# step agent's listen address and state dir, --print-hosts and the -np default.
hvd_test(NAME slurm_launch_test LABEL unit TIMEOUT 60
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/slurm_launch_test.cc)
target_link_libraries(slurm_launch_test PRIVATE hvd_launcher hvd_agent_daemon hvd_internal
                                                hvd_test_support)

# The front door's checks (agent/common/cli_checks.h, contract/names.h) and the guard of every
# thread body (agent/common/thread_guard.h).
hvd_test(NAME validate_test LABEL unit TIMEOUT 60
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/validate_test.cc)
target_link_libraries(validate_test PRIVATE hvd_contract hvd_agent_common hvd_internal hvd_test_support
                                            spdlog::spdlog)
