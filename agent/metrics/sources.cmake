# hvd_agent_metrics: hvdagent's Prometheus metrics (--metrics-listen): the snapshot of the agent's
# state (collect.h, read through the jobs', ledger's and records' own locks), its text format
# (exposition.h, a pure function unit-tested in tests/unit/agent_metrics_test.cc) and the HTTP
# endpoint that serves it on a thread of its own (metrics_server.h, Boost.Beast, header-only).
find_package(Threads REQUIRED)
add_library(hvd_agent_metrics STATIC
  ${CMAKE_CURRENT_LIST_DIR}/collect.cc
  ${CMAKE_CURRENT_LIST_DIR}/exposition.cc
  ${CMAKE_CURRENT_LIST_DIR}/metrics_listen.cc
  ${CMAKE_CURRENT_LIST_DIR}/metrics_server.cc)
target_include_directories(hvd_agent_metrics PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(hvd_agent_metrics
                      PUBLIC hvd_agent_jobs hvd_agent_ledger hvd_agent_records hvd_agent_common hvd
                      PRIVATE hvd_agent_rpc hvd_contract_env Boost::headers Threads::Threads
                              hvd_warnings)
