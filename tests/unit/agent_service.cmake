# hvdagent's service (agent/service): authentication of every RPC, Describe, Launch, Stop,
# SubmitJob and CancelJob against an in-process server on an ephemeral loopback port with real
# processes (/bin/sh), plus the environment merge, job records and the command-line helpers.
hvd_test(NAME agent_service_test LABEL unit TIMEOUT 120
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/agent_service_test.cc)
target_link_libraries(agent_service_test PRIVATE hvd_agent_service hvd_agent_daemon hvd_agent_client hvd_test_support
                                                 hvd_test_grpc)

# Job records and logs of led jobs: the log's line format, filters, tail and limit,
# records across a restart (LOST), other agents' records, --keep-jobs.
hvd_test(NAME job_history_test LABEL unit TIMEOUT 120
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/job_history_test.cc)
target_link_libraries(job_history_test PRIVATE hvd_agent_records hvd_test_support)

# The state directory's room (logs leave a headroom, records get a reserve) and a job log's
# behaviour when room runs out or a write stops part-way.
hvd_test(NAME state_space_test LABEL unit TIMEOUT 60
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/state_space_test.cc)
target_link_libraries(state_space_test PRIVATE hvd_agent_records hvd_test_support)
