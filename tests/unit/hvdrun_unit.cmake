# hvdrun's CLI and output renderer (launcher/cli.cc, launcher/output.cc are compiled only into the
# hvdrun executable, so the test builds them too) and the in-process LocalNodeAgent.
find_package(CLI11 CONFIG REQUIRED)  # imported in launcher/'s scope only
hvd_test(NAME hvdrun_cli_test LABEL unit TIMEOUT 60
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/hvdrun_cli_test.cc ${PROJECT_SOURCE_DIR}/launcher/cli.cc
                 ${PROJECT_SOURCE_DIR}/launcher/output.cc)
target_link_libraries(hvdrun_cli_test PRIVATE hvd_launcher_core hvd_agent_coordinator CLI11::CLI11
                                              spdlog::spdlog)
# The host checks of hvdrun's main() are tested by running the binary (it refuses before starting).
add_dependencies(hvdrun_cli_test hvdrun)
target_compile_definitions(hvdrun_cli_test PRIVATE HVDRUN_PATH="$<TARGET_FILE:hvdrun>")

hvd_test(NAME local_node_agent_test LABEL unit TIMEOUT 60
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/local_node_agent_test.cc)
target_link_libraries(local_node_agent_test PRIVATE hvd_agent_coordinator)
