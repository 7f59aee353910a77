# Adasum through the engine across real processes (np 2, 3, 4, 8), against the reference tree.
add_executable(hvd-adasum-worker ${CMAKE_CURRENT_LIST_DIR}/adasum_worker.cc)
# hvd_internal for the header-only element conversions of the reference (tests/common).
target_include_directories(hvd-adasum-worker PRIVATE ${CMAKE_CURRENT_LIST_DIR}/..)
target_link_libraries(hvd-adasum-worker PRIVATE hvd hvd_internal hvd_warnings)

hvd_test(NAME adasum_mp_test LABEL mp TIMEOUT 240 SOURCES ${CMAKE_CURRENT_LIST_DIR}/adasum_mp_test.cc)
target_link_libraries(adasum_mp_test PRIVATE hvd_test_support hvd_local_job)
target_compile_definitions(adasum_mp_test PRIVATE
                           HVD_ADASUM_WORKER_PATH="$<TARGET_FILE:hvd-adasum-worker>"
                           HVD_TEST_HAVE_MPI=$<BOOL:${HVD_HAVE_MPI}>)
add_dependencies(adasum_mp_test hvd-adasum-worker)
