# hvdagent's Prometheus metrics (agent/metrics): the exact exposition text of a snapshot and its
# label escaping, --metrics-listen's values, the snapshot of a ledger and job records, and the
# HTTP endpoint (status codes, timeout of a silent client, connection limit) on loopback.
hvd_test(NAME agent_metrics_test LABEL unit TIMEOUT 60
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/agent_metrics_test.cc)
target_link_libraries(agent_metrics_test PRIVATE hvd_agent_metrics hvd_test_support)

# hvdagent's command line refuses a --metrics-listen it cannot bind as it is meant, naming the
# option and the value, and a --metrics-port-file without it.
if(TARGET hvdagent)
  add_test(NAME hvdagent_rejects_metrics_listen_hostname
           COMMAND hvdagent --metrics-listen node1:9100)
  set_tests_properties(hvdagent_rejects_metrics_listen_hostname PROPERTIES LABELS unit TIMEOUT 30
    PASS_REGULAR_EXPRESSION "hvdagent: --metrics-listen 'node1:9100': 'node1' is not an IP address")
  add_test(NAME hvdagent_rejects_metrics_port_file_alone
           COMMAND hvdagent --metrics-port-file /tmp/unused)
  set_tests_properties(hvdagent_rejects_metrics_port_file_alone PROPERTIES LABELS unit TIMEOUT 30
    PASS_REGULAR_EXPRESSION "hvdagent: --metrics-port-file needs --metrics-listen")
endif()
