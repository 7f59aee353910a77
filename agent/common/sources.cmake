# hvd_agent_common: program plumbing that hvdagent and hvdrun share and that belongs to no single
# subsystem: the validators of their command lines, the guard of every thread body, and the
# addresses they listen on, name and pick ports on (net.h).
find_package(CLI11 CONFIG REQUIRED)
add_library(hvd_agent_common STATIC
  ${CMAKE_CURRENT_LIST_DIR}/cli_checks.cc
  ${CMAKE_CURRENT_LIST_DIR}/net.cc
  ${CMAKE_CURRENT_LIST_DIR}/thread_guard.cc)
target_include_directories(hvd_agent_common PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(hvd_agent_common PUBLIC CLI11::CLI11
                      PRIVATE hvd hvd_contract_env hvd_support hvd_contract_env spdlog::spdlog hvd_warnings)
