hvd_test(NAME host_spec_test LABEL unit TIMEOUT 60
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/host_spec_test.cc)
target_link_libraries(host_spec_test PRIVATE hvd_launcher_core)

# Slurm's hostlist and tasks-per-node forms (issue 7).
hvd_test(NAME slurm_hosts_test LABEL unit TIMEOUT 60
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/slurm_hosts_test.cc)
target_link_libraries(slurm_hosts_test PRIVATE hvd_launcher_core hvd_internal)
