# Host specifications (-H lists and hostfiles): pure parsing, tested in tests/unit.
add_library(hvd_launcher_core STATIC ${CMAKE_CURRENT_LIST_DIR}/host_spec.cc)
target_include_directories(hvd_launcher_core PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(hvd_launcher_core PUBLIC hvd PRIVATE hvd_warnings)

# hvdrun, embedded mode: coordinator, process supervision and the job store in one process.
find_package(CLI11 CONFIG REQUIRED)
add_executable(hvdrun ${CMAKE_CURRENT_LIST_DIR}/hvdrun_main.cc ${CMAKE_CURRENT_LIST_DIR}/cli.cc
                      ${CMAKE_CURRENT_LIST_DIR}/output.cc)
target_link_libraries(hvdrun PRIVATE hvd_launcher_core hvd_agent_coordinator hvd_auth hvd_internal
                                     CLI11::CLI11 spdlog::spdlog hvd_warnings)
