# hvdrun's embedded mode end to end: the real executable runs real workers.
hvd_test(NAME hvdrun_test LABEL mp TIMEOUT 120 SOURCES ${CMAKE_CURRENT_LIST_DIR}/hvdrun_test.cc)
target_link_libraries(hvdrun_test PRIVATE hvd_test_support)
target_compile_definitions(hvdrun_test PRIVATE HVDRUN_PATH="$<TARGET_FILE:hvdrun>"
                                               HVD_WORKER_PATH="$<TARGET_FILE:hvd-test-worker>"
                                               HVD_PROJECT_VERSION="${PROJECT_VERSION}")
add_dependencies(hvdrun_test hvdrun hvd-test-worker)
# Remote mode through a real hvdagent on 127.0.0.1 (when this build has it).
if(TARGET hvdagent)
  target_compile_definitions(hvdrun_test PRIVATE HVDAGENT_PATH="$<TARGET_FILE:hvdagent>")
  add_dependencies(hvdrun_test hvdagent)
endif()

# Jobs that outlive the terminal: hvdrun submit, ps, status, logs, attach and cancel
# against a real hvdagent; time limits; an agent SIGKILLed and restarted; 100,000 log lines.
if(TARGET hvdagent)
  hvd_test(NAME hvdrun_jobs_test LABEL mp TIMEOUT 240
           SOURCES ${CMAKE_CURRENT_LIST_DIR}/hvdrun_jobs_test.cc)
  target_link_libraries(hvdrun_jobs_test PRIVATE hvd_auth hvd_test_support)
  target_compile_definitions(hvdrun_jobs_test PRIVATE HVDRUN_PATH="$<TARGET_FILE:hvdrun>"
                                                      HVDAGENT_PATH="$<TARGET_FILE:hvdagent>")
  add_dependencies(hvdrun_jobs_test hvdrun hvdagent)
endif()

# hvdrun in a Slurm allocation with no -H, with a stand-in srun (tests/mp/fake_srun.sh):
# agents started per node with a one-time key, --print-hosts, a step that fails to start.
if(TARGET hvdagent)
  hvd_test(NAME hvdrun_slurm_test LABEL mp TIMEOUT 240
           SOURCES ${CMAKE_CURRENT_LIST_DIR}/hvdrun_slurm_test.cc)
  target_link_libraries(hvdrun_slurm_test PRIVATE hvd_test_support)
  target_compile_definitions(hvdrun_slurm_test PRIVATE HVDRUN_PATH="$<TARGET_FILE:hvdrun>"
    HVDAGENT_PATH="$<TARGET_FILE:hvdagent>" HVD_WORKER_PATH="$<TARGET_FILE:hvd-test-worker>"
    HVD_E2E_WORKER_PATH="$<TARGET_FILE:hvd-e2e-worker>"
    HVD_FAKE_SRUN="${CMAKE_CURRENT_LIST_DIR}/fake_srun.sh")
  add_dependencies(hvdrun_slurm_test hvdrun hvdagent hvd-test-worker hvd-e2e-worker)
endif()

# The agent as an orchestrator: GPUs accounted across jobs, the queue, restarts, against a real
# hvdagent with HVD_FAKE_GPUS=4.
if(TARGET hvdagent)
  hvd_test(NAME hvdrun_orchestration_test LABEL mp TIMEOUT 300
           SOURCES ${CMAKE_CURRENT_LIST_DIR}/hvdrun_orchestration_test.cc)
  target_link_libraries(hvdrun_orchestration_test PRIVATE hvd_auth hvd_test_support)
  target_compile_definitions(hvdrun_orchestration_test PRIVATE HVDRUN_PATH="$<TARGET_FILE:hvdrun>"
    HVDAGENT_PATH="$<TARGET_FILE:hvdagent>" HVD_WORKER_PATH="$<TARGET_FILE:hvd-test-worker>")
  add_dependencies(hvdrun_orchestration_test hvdrun hvdagent hvd-test-worker)
endif()
