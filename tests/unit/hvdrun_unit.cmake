# hvdrun's CLI, output renderer, job building and keygen (the hvd_launcher library) and the
# in-process LocalHost (agent/jobs/local_host.h).
hvd_test(NAME hvdrun_cli_test LABEL unit TIMEOUT 60
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/hvdrun_cli_test.cc)
target_link_libraries(hvdrun_cli_test PRIVATE hvd_launcher spdlog::spdlog hvd_test_support)
# The host checks of hvdrun's main() are tested by running the binary (it refuses before starting).
add_dependencies(hvdrun_cli_test hvdrun)
target_compile_definitions(hvdrun_cli_test PRIVATE HVDRUN_PATH="$<TARGET_FILE:hvdrun>"
  HVD_TEST_PROJECT_VERSION="${PROJECT_VERSION}" HVD_TEST_HAVE_NCCL=$<BOOL:${HVD_HAVE_NCCL}>
  HVD_TEST_HAVE_MPI=$<BOOL:${HVD_HAVE_MPI}>)

# horovodrun's command lines: every horovodrun flag's setting or warning, --config-file, and
# horovodrun's defaults (launcher/horovodrun_flags.h, launcher/config_file.h).
hvd_test(NAME hvdrun_horovodrun_cli_test LABEL unit TIMEOUT 60
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/hvdrun_horovodrun_cli_test.cc)
target_link_libraries(hvdrun_horovodrun_cli_test PRIVATE hvd_launcher hvd_test_support)

hvd_test(NAME local_host_test LABEL unit TIMEOUT 60
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/local_host_test.cc)
target_link_libraries(local_host_test PRIVATE hvd_agent_jobs)

# hvdrun's job commands: submit/ps/status/logs/attach/cancel parsing, --time-limit
# forms, rank ranges, which agents are asked, and the ps/status renderings.
hvd_test(NAME hvdrun_jobs_cli_test LABEL unit TIMEOUT 60
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/hvdrun_jobs_cli_test.cc)
target_link_libraries(hvdrun_jobs_cli_test PRIVATE hvd_launcher hvd_test_support)

# The Launch RPC's logic (agent/jobs/host_launch.h) without gRPC: real ranks on this host, fake
# relayed hosts, callers that read everything or go away.
hvd_test(NAME host_launch_test LABEL unit TIMEOUT 60
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/host_launch_test.cc)
target_link_libraries(host_launch_test PRIVATE hvd_agent_jobs hvd_agent_process)

# hvdrun doctor: the rules from the agents' answers to findings (the clock rule's boundary
# included), the table and the JSON for fixed answers, and its command line.
hvd_test(NAME hvdrun_doctor_test LABEL unit TIMEOUT 60
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/hvdrun_doctor_test.cc)
target_link_libraries(hvdrun_doctor_test PRIVATE hvd_launcher)
