# hvd_agent_common: program plumbing that hvdagent and hvdrun share and that belongs to no single
# subsystem: the guard of every thread body.
add_library(hvd_agent_common STATIC ${CMAKE_CURRENT_LIST_DIR}/thread_guard.cc)
target_include_directories(hvd_agent_common PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(hvd_agent_common PRIVATE spdlog::spdlog hvd_warnings)
