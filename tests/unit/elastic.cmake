# Elastic mode's pure logic (agent/elastic): discovery output and real discovery scripts, the
# blacklist's cooldown on a manual clock, each round's ranks from the last, the reset limit.
hvd_test(NAME elastic_discovery_test LABEL unit TIMEOUT 120
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/elastic_discovery_test.cc)
target_link_libraries(elastic_discovery_test PRIVATE hvd_agent_elastic hvd_test_support)
hvd_test(NAME elastic_blacklist_test LABEL unit TIMEOUT 60
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/elastic_blacklist_test.cc)
target_link_libraries(elastic_blacklist_test PRIVATE hvd_agent_elastic)
hvd_test(NAME elastic_rounds_test LABEL unit TIMEOUT 60
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/elastic_rounds_test.cc)
target_link_libraries(elastic_rounds_test PRIVATE hvd_agent_elastic)
hvd_test(NAME elastic_resets_test LABEL unit TIMEOUT 60
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/elastic_resets_test.cc)
target_link_libraries(elastic_resets_test PRIVATE hvd_agent_elastic)
# The leader's elastic driver (agent/jobs/elastic_job.h) against fake agents, a manual clock and
# an in-process store: the success rule, survivors' places in the next round, the limits.
hvd_test(NAME elastic_job_test LABEL unit TIMEOUT 120
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/elastic_job_test.cc)
target_link_libraries(elastic_job_test PRIVATE hvd_agent_jobs hvd_agent_coordinator hvd_support)
