# hvd_agent_elastic: the pure logic of elastic mode that the leader's driver (agent/jobs) runs:
# host discovery (a fixed list, or a user's script run through agent/process), the blacklist
# with its cooldown, the plan of each round's ranks from the last one, and the reset limit.
# Horovod's rules, unit-tested in tests/unit/elastic_*_test.cc.
add_library(hvd_agent_elastic STATIC
  ${CMAKE_CURRENT_LIST_DIR}/discovery.cc
  ${CMAKE_CURRENT_LIST_DIR}/script_discovery.cc
  ${CMAKE_CURRENT_LIST_DIR}/blacklist.cc
  ${CMAKE_CURRENT_LIST_DIR}/rounds.cc
  ${CMAKE_CURRENT_LIST_DIR}/resets.cc)
target_include_directories(hvd_agent_elastic PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(hvd_agent_elastic PUBLIC hvd hvd_contract
                      PRIVATE hvd_agent_process hvd_warnings)
