# Multi-host end-to-end tests: "hosts" are Linux network namespaces joined to a bridge,
# one hvdagent each (scripts/netns-cluster.sh); hvdrun runs in the root namespace. Label e2e;
# they need root and `ip netns` and are skipped without them.
#
# e2e_cluster_up (fixture setup) brings one 2-host cluster up that the E2e* tests share;
# e2e_cluster_down (fixture cleanup) tears down every cluster under this build's state root,
# also when a test failed or was killed. The tests take one resource lock: they share agents
# and measure failure-detection times.
if(NOT (TARGET hvdagent AND TARGET hvdrun AND TARGET hvd_agent_rpc))
  return()
endif()

add_executable(hvd-e2e-worker ${CMAKE_CURRENT_LIST_DIR}/e2e_worker.cc)
target_link_libraries(hvd-e2e-worker PRIVATE hvd hvd_internal hvd_warnings)

# A cluster name and state root of this build tree, so build trees can run e2e side by side.
string(MD5 _e2e_hash "${PROJECT_BINARY_DIR}")
string(SUBSTRING "${_e2e_hash}" 0 6 _e2e_hash)
set(HVD_E2E_PREFIX "e2e${_e2e_hash}")
set(HVD_E2E_STATE_ROOT "${PROJECT_BINARY_DIR}/e2e-netns")
set(HVD_E2E_SCRIPT "${PROJECT_SOURCE_DIR}/scripts/netns-cluster.sh")

# The cluster, the processes and the shared fixture of every e2e binary.
add_library(hvd_e2e_support STATIC ${CMAKE_CURRENT_LIST_DIR}/e2e_support.cc
                                   ${CMAKE_CURRENT_LIST_DIR}/e2e_cluster.cc
                                   ${CMAKE_CURRENT_LIST_DIR}/e2e_process.cc)
target_link_libraries(hvd_e2e_support PUBLIC GTest::gtest hvd_test_support PRIVATE hvd_warnings)
target_compile_definitions(hvd_e2e_support PUBLIC
  HVDRUN_PATH="$<TARGET_FILE:hvdrun>"
  HVDAGENT_PATH="$<TARGET_FILE:hvdagent>"
  HVD_E2E_WORKER_PATH="$<TARGET_FILE:hvd-e2e-worker>"
  HVD_E2E_BIN_DIR="$<TARGET_FILE_DIR:hvdagent>"
  HVD_E2E_SCRIPT="${HVD_E2E_SCRIPT}"
  HVD_E2E_STATE_ROOT="${HVD_E2E_STATE_ROOT}")

add_executable(e2e_test ${CMAKE_CURRENT_LIST_DIR}/e2e_jobs_test.cc
                        ${CMAKE_CURRENT_LIST_DIR}/e2e_submit_test.cc
                        ${CMAKE_CURRENT_LIST_DIR}/e2e_torch_test.cc
                        ${CMAKE_CURRENT_LIST_DIR}/e2e_security_test.cc
                        ${CMAKE_CURRENT_LIST_DIR}/e2e_orchestration_test.cc
                        ${CMAKE_CURRENT_LIST_DIR}/e2e_tree_test.cc
                        ${CMAKE_CURRENT_LIST_DIR}/e2e_elastic_test.cc)
target_link_libraries(e2e_test PRIVATE hvd_e2e_support hvd_agent_rpc hvd_auth hvd_proto
                                       GTest::gtest_main hvd_warnings)
target_compile_definitions(e2e_test PRIVATE
  HVD_TORCH_DDP_SCRIPT="${PROJECT_SOURCE_DIR}/examples/torch_ddp.py"
  HVD_ELASTIC_TRAIN_SCRIPT="${PROJECT_SOURCE_DIR}/tests/python/elastic_jobs/train.py"
  HVD_E2E_PYTHONPATH="${PROJECT_BINARY_DIR}/python")
add_dependencies(e2e_test hvdrun hvdagent hvd-e2e-worker)

add_test(NAME e2e_cluster_up
         COMMAND ${CMAKE_CURRENT_LIST_DIR}/cluster_fixture.sh up ${HVD_E2E_STATE_ROOT}
                 ${HVD_E2E_PREFIX} $<TARGET_FILE_DIR:hvdagent>)
set_tests_properties(e2e_cluster_up PROPERTIES LABELS e2e TIMEOUT 60 SKIP_RETURN_CODE 77
                     FIXTURES_SETUP e2e_cluster RESOURCE_LOCK e2e_cluster)
add_test(NAME e2e_cluster_down
         COMMAND ${CMAKE_CURRENT_LIST_DIR}/cluster_fixture.sh down ${HVD_E2E_STATE_ROOT})
set_tests_properties(e2e_cluster_down PROPERTIES LABELS e2e TIMEOUT 60 SKIP_RETURN_CODE 77
                     FIXTURES_CLEANUP e2e_cluster RESOURCE_LOCK e2e_cluster)

gtest_discover_tests(e2e_test DISCOVERY_TIMEOUT 60
  PROPERTIES LABELS e2e TIMEOUT 90 FIXTURES_REQUIRED e2e_cluster RESOURCE_LOCK e2e_cluster
             ENVIRONMENT "HVD_E2E_CLUSTER_ENV=${HVD_E2E_STATE_ROOT}/${HVD_E2E_PREFIX}/env")

# 64 hosts x 8 ranks: a cluster of its own, minutes on two cores; serial with the other e2e
# tests (the kernel's neighbour table is shared).
add_executable(e2e_scale_test ${CMAKE_CURRENT_LIST_DIR}/e2e_scale_test.cc)
target_link_libraries(e2e_scale_test PRIVATE hvd_e2e_support GTest::gtest_main hvd_warnings)
target_compile_definitions(e2e_scale_test PRIVATE
  HVD_TEST_WORKER_PATH="$<TARGET_FILE:hvd-test-worker>")
add_dependencies(e2e_scale_test hvdrun hvdagent hvd-e2e-worker hvd-test-worker)
gtest_discover_tests(e2e_scale_test DISCOVERY_TIMEOUT 60
  PROPERTIES LABELS e2e TIMEOUT 600 RESOURCE_LOCK e2e_cluster)

# A real Slurm: scripts/slurm-cluster.sh's slurmctld, munged and one slurmd per
# namespace, one cluster per test process; e2e_slurm_down removes it should a test be killed.
set(HVD_SLURM_PREFIX "sl${_e2e_hash}")
set(HVD_SLURM_STATE_ROOT "${PROJECT_BINARY_DIR}/e2e-slurm")
set(HVD_SLURM_SCRIPT "${PROJECT_SOURCE_DIR}/scripts/slurm-cluster.sh")
add_executable(e2e_slurm_test ${CMAKE_CURRENT_LIST_DIR}/e2e_slurm_test.cc)
target_link_libraries(e2e_slurm_test PRIVATE hvd_e2e_support GTest::gtest_main hvd_warnings)
target_compile_definitions(e2e_slurm_test PRIVATE
  HVD_WORKER_PATH="$<TARGET_FILE:hvd-test-worker>"
  HVD_SLURM_SCRIPT="${HVD_SLURM_SCRIPT}"
  HVD_SLURM_PREFIX="${HVD_SLURM_PREFIX}"
  HVD_SLURM_STATE_ROOT="${HVD_SLURM_STATE_ROOT}")
add_dependencies(e2e_slurm_test hvdrun hvdagent hvd-e2e-worker hvd-test-worker)
add_test(NAME e2e_slurm_down
         COMMAND sh -c "[ \"$(id -u)\" = 0 ] || exit 77; exec \"$0\" down --prefix \"$1\" --state-root \"$2\""
                 ${HVD_SLURM_SCRIPT} ${HVD_SLURM_PREFIX} ${HVD_SLURM_STATE_ROOT})
set_tests_properties(e2e_slurm_down PROPERTIES LABELS e2e TIMEOUT 60 SKIP_RETURN_CODE 77
                     FIXTURES_CLEANUP e2e_slurm RESOURCE_LOCK e2e_slurm)
gtest_discover_tests(e2e_slurm_test DISCOVERY_TIMEOUT 60
  PROPERTIES LABELS e2e TIMEOUT 240 FIXTURES_REQUIRED e2e_slurm RESOURCE_LOCK e2e_slurm)

# hvdagent --metrics-listen scraped by a real Prometheus server (Debian's prometheus): one agent
# on loopback with two fake GPUs and no netns cluster, jobs run, queued, restarted and cancelled
# through it with hvdrun, every figure read back through Prometheus' query API. Skipped (77)
# without prometheus.
add_test(NAME e2e_metrics_prometheus
         COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/e2e_metrics_test.py
                 --hvdagent $<TARGET_FILE:hvdagent> --hvdrun $<TARGET_FILE:hvdrun>)
set_tests_properties(e2e_metrics_prometheus PROPERTIES LABELS e2e TIMEOUT 240
                     SKIP_RETURN_CODE 77)

# hvdrun doctor against three namespace hosts, each test with a cluster of its own (prefix
# "e2e<pid>dr"). hvdagent-e2e-other-version is hvdagent with another version compiled in, for the
# version check only: node_facts.cc (where the version is) compiled into the executable with
# another HVD_AGENT_VERSION, so the linker never takes the library's copy. The product hvdagent
# has no way to claim another version.
set(HVD_E2E_OTHER_AGENT_VERSION "0.0.0-e2e-other")
add_executable(hvdagent-e2e-other-version ${PROJECT_SOURCE_DIR}/agent/daemon/hvdagent_main.cc
                                          ${PROJECT_SOURCE_DIR}/agent/node/node_facts.cc)
target_link_libraries(hvdagent-e2e-other-version PRIVATE
  hvd_agent_daemon hvd_agent_service hvd_agent_jobs hvd_agent_metrics hvd_agent_client
  hvd_agent_common hvd_support hvd_contract_env spdlog::spdlog hvd_warnings)
target_compile_definitions(hvdagent-e2e-other-version PRIVATE
  HVD_AGENT_VERSION="${HVD_E2E_OTHER_AGENT_VERSION}")
add_executable(e2e_doctor_test ${CMAKE_CURRENT_LIST_DIR}/e2e_doctor_test.cc)
target_link_libraries(e2e_doctor_test PRIVATE hvd_e2e_support GTest::gtest_main hvd_warnings)
target_compile_definitions(e2e_doctor_test PRIVATE
  HVD_E2E_OTHER_AGENT_PATH="$<TARGET_FILE:hvdagent-e2e-other-version>"
  HVD_E2E_OTHER_AGENT_VERSION="${HVD_E2E_OTHER_AGENT_VERSION}"
  HVD_E2E_PROJECT_VERSION="${PROJECT_VERSION}")
add_dependencies(e2e_doctor_test hvdrun hvdagent hvdagent-e2e-other-version)
gtest_discover_tests(e2e_doctor_test DISCOVERY_TIMEOUT 60
  PROPERTIES LABELS e2e TIMEOUT 120 RESOURCE_LOCK e2e_cluster)
