add_executable(hvd-test-worker ${CMAKE_CURRENT_LIST_DIR}/worker.cc)
target_link_libraries(hvd-test-worker PRIVATE hvd_test_checks hvd_warnings)

hvd_test(NAME mp_test LABEL mp TIMEOUT 600 SOURCES ${CMAKE_CURRENT_LIST_DIR}/mp_test.cc)
target_link_libraries(mp_test PRIVATE hvd_local_job hvd_test_support)
target_compile_definitions(mp_test PRIVATE HVD_BIN_DIR="${CMAKE_RUNTIME_OUTPUT_DIRECTORY}")
add_dependencies(mp_test hvd-test-worker)
include(${CMAKE_CURRENT_LIST_DIR}/hvdrun.cmake OPTIONAL)
include(${CMAKE_CURRENT_LIST_DIR}/hvdagent.cmake OPTIONAL)
include(${CMAKE_CURRENT_LIST_DIR}/engine.cmake OPTIONAL)
include(${CMAKE_CURRENT_LIST_DIR}/process_sets.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/adasum.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/trainer.cmake OPTIONAL)

# Workers started by srun (simulated on one node) or the real mpirun: with a store
# file; under mpirun also with no store (the rendezvous over MPI) and with HVD_CPU_BACKEND=mpi.
hvd_test(NAME scheduler_env_test LABEL mp TIMEOUT 400
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/scheduler_env_test.cc)
target_link_libraries(scheduler_env_test PRIVATE hvd_test_support)
target_compile_definitions(scheduler_env_test PRIVATE
  HVD_WORKER_PATH="$<TARGET_FILE:hvd-test-worker>"
  HVD_E2E_WORKER_PATH="$<TARGET_FILE:hvd-e2e-worker>"
  HVD_ENGINE_WORKER_PATH="$<TARGET_FILE:hvd-engine-worker>"
  HVD_LIBRARY_PATH="$<TARGET_FILE:hvd>"
  HVD_TEST_HAVE_MPI=$<BOOL:${HVD_HAVE_MPI}>)
add_dependencies(scheduler_env_test hvd-test-worker hvd-e2e-worker hvd-engine-worker)

# The job's shape as init learns it (isHomogeneous, initMembers), with ranks started like srun
# so that one machine plays nodes of different sizes.
hvd_test(NAME job_members_mp_test LABEL mp TIMEOUT 200
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/job_members_mp_test.cc)
target_link_libraries(job_members_mp_test PRIVATE hvd_test_support)
target_compile_definitions(job_members_mp_test PRIVATE
  HVD_WORKER_PATH="$<TARGET_FILE:hvd-test-worker>")
add_dependencies(job_members_mp_test hvd-test-worker)
