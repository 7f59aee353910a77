add_executable(hvd-test-worker ${CMAKE_CURRENT_LIST_DIR}/worker.cc)
target_link_libraries(hvd-test-worker PRIVATE hvd_test_checks hvd_warnings)

hvd_test(NAME mp_test LABEL mp TIMEOUT 600 SOURCES ${CMAKE_CURRENT_LIST_DIR}/mp_test.cc)
target_link_libraries(mp_test PRIVATE hvd_local_job)
target_compile_definitions(mp_test PRIVATE HVD_BIN_DIR="${CMAKE_RUNTIME_OUTPUT_DIRECTORY}")
add_dependencies(mp_test hvd-test-worker)
include(${CMAKE_CURRENT_LIST_DIR}/hvdrun.cmake OPTIONAL)
include(${CMAKE_CURRENT_LIST_DIR}/hvdagent.cmake OPTIONAL)
