# The NCCL watchdog against a gmock NcclApi (short intervals, loose time bounds), and the
# hierarchical allreduce arithmetic and communicator layout (exhaustive small cases).
hvd_test(NAME gpu_watchdog_test LABEL unit TIMEOUT 120
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/gpu_watchdog_test.cc)
target_link_libraries(gpu_watchdog_test PRIVATE GTest::gmock)
hvd_test(NAME hierarchical_test LABEL unit TIMEOUT 60
         SOURCES ${CMAKE_CURRENT_LIST_DIR}/hierarchical_test.cc)
