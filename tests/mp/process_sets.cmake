# Process sets across real processes (runtime, engine and C++ API).
add_executable(hvd-process-sets-worker ${CMAKE_CURRENT_LIST_DIR}/process_sets_worker.cc)
target_link_libraries(hvd-process-sets-worker PRIVATE hvd hvd_warnings)

hvd_test(NAME process_sets_mp_test LABEL mp TIMEOUT 300
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/process_sets_mp_test.cc)
target_link_libraries(process_sets_mp_test PRIVATE hvd_test_support hvd_local_job)
target_compile_definitions(process_sets_mp_test PRIVATE
                           HVD_PROCESS_SETS_WORKER_PATH="$<TARGET_FILE:hvd-process-sets-worker>")
add_dependencies(process_sets_mp_test hvd-process-sets-worker)
