# hvd_agent_ledger: the node's ledger of slots and GPUs held by jobs. Pure logic over an injected
# clock, unit-tested in tests/unit/ledger_test.cc.
add_library(hvd_agent_ledger STATIC ${CMAKE_CURRENT_LIST_DIR}/resource_ledger.cc)
target_include_directories(hvd_agent_ledger PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(hvd_agent_ledger PUBLIC hvd_agent_node PRIVATE hvd_warnings)
