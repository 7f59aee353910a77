# Rank placement (rank, local rank, cross rank per host): pure logic, tested in tests/unit.
add_library(hvd_agent_core STATIC ${CMAKE_CURRENT_LIST_DIR}/placement.cc)
target_include_directories(hvd_agent_core PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(hvd_agent_core PUBLIC hvd PRIVATE hvd_warnings)
