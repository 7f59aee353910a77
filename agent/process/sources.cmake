# hvd_agent_process: process supervision of the agent: the
# Spawner interface, the fork/exec implementation and a fake for tests of the layers above.
find_package(Threads REQUIRED)
add_library(hvd_agent_process STATIC
  ${CMAKE_CURRENT_LIST_DIR}/posix_spawner.cc
  ${CMAKE_CURRENT_LIST_DIR}/fake_spawner.cc
  ${CMAKE_CURRENT_LIST_DIR}/signal_pipe.cc)
target_include_directories(hvd_agent_process PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(hvd_agent_process PUBLIC Threads::Threads hvd
                      PRIVATE hvd_agent_common hvd_warnings)
