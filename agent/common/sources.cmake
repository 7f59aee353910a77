# hvd_agent_common: program plumbing that hvdagent and hvdrun share and that belongs to no single
# subsystem: the validators of their command lines and the guard of every thread body.
find_package(CLI11 CONFIG REQUIRED)
add_library(hvd_agent_common STATIC
  ${CMAKE_CURRENT_LIST_DIR}/cli_checks.cc
  ${CMAKE_CURRENT_LIST_DIR}/thread_guard.cc)
target_include_directories(hvd_agent_common PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(hvd_agent_common PUBLIC CLI11::CLI11 PRIVATE hvd_internal spdlog::spdlog hvd_warnings)
